"""Which environment variables change the numbers of this harness's training on this CPU (issue 33)?

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 .venv/bin/python benchmarks/kernel_family.py
    ... benchmarks/kernel_family.py --no-harness          # part (a) only
    ... benchmarks/kernel_family.py --base-steps 300 --grpo-steps 200 --grpo-base runs/_base/tiny-arith

Each setting (the kernel variables below, read when torch/MKL/oneDNN load, so each runs in a fresh
process with one thread) is checked in two parts:

(a) probe: the harness's tiny Llama (LlamaConfig of the default size, fixed seed, fixed batch with
    padding) forward + backward; sha256 of the logits' and the gradients' bytes and the max abs
    difference from the native (no variable set) process; the same for a plain matrix product, a few
    elementwise kernels (exp, silu, rsqrt, softmax, on a tensor with an odd length) and a long sum, to
    tell matrix-product changes from elementwise ones. It also records
    torch.backends.cpu.get_cpu_capability(), and in a second process with MKL_VERBOSE=1 and
    ONEDNN_VERBOSE=1 which library ran the model's matrix products and with what instruction set.
(b) harness, for the settings whose forward/backward differs from native: a short base build
    (`grpo-research sft`, `--base-steps` steps, no early stop) and a short GRPO run (`grpo-research
    train`, `--grpo-steps` steps, train.threads=1) from one shared base model (`--grpo-base`, by default
    the native base this script builds, so only the GRPO steps' kernels differ); the base's check
    history (loss, check accuracy every 10 steps) and the runs' metrics.jsonl are compared with native's
    bit for bit: the first step where the update's numbers (loss, grad_norm, kl), the rollouts
    (reward_mean, completion_len, tokens: where the runs fork) and the greedy eval accuracy differ, and
    the final values. "native (again)" is the control: a second native process.

Prints one table.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("matmul", "exp", "silu", "rsqrt", "softmax", "sum", "randn")
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
SETTINGS: dict[str, dict[str, str]] = {
    "native": {},
    "native (again)": {},  # control: a second native process gives the same bytes
    "ATEN_CPU_CAPABILITY=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
    "MKL_CBWR=AVX2": {"MKL_CBWR": "AVX2"},
    "MKL_ENABLE_INSTRUCTIONS=AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "ONEDNN_MAX_CPU_ISA=AVX2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx2 (all four)": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                        "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"},
}


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARS}
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"})
    env.update(extra)
    return env


# ---------------------------------------------------------------------------------------------
# (a) the probe, run in the child process


def _sha(t) -> str:
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


def probe(out: Path, verbose_only: bool = False) -> None:
    import numpy as np
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=4, intermediate_size=512, max_position_embeddings=256,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).float()
    # inputs and weights from numpy, so that every setting computes on the same numbers (torch's own
    # random fills are vectorised kernels too: see `randn` below)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.copy_(torch.from_numpy(rng.normal(0.0, 0.02, p.shape).astype(np.float32)))
    ids = torch.from_numpy(rng.integers(3, 64, (16, 48)))
    mask = torch.ones_like(ids)
    mask[::2, :7] = 0  # left padding on half the rows, as the harness's rollouts have
    ids[mask == 0] = 0
    labels = ids.masked_fill(mask == 0, -100)
    if verbose_only:  # one forward + backward, for MKL_VERBOSE / ONEDNN_VERBOSE to report
        print("PROBE-START", flush=True)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        print("PROBE-END", flush=True)
        return
    res = model(input_ids=ids, attention_mask=mask, labels=labels)
    res.loss.backward()
    logits = res.logits.detach()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    f32 = lambda *shape: torch.from_numpy(rng.standard_normal(shape).astype(np.float32))  # noqa: E731
    a, b, x = f32(257, 301), f32(301, 263), f32(100_003)
    tensors = {"logits": logits, "grads": grads, "matmul": a @ b, "exp": x.exp(),
               "silu": torch.nn.functional.silu(x), "rsqrt": x.abs().add(1e-3).rsqrt(), "softmax": x.softmax(0),
               "sum": x.sum().reshape(1), "randn": torch.randn(100_003, generator=torch.Generator().manual_seed(1))}
    torch.save(tensors, out.with_suffix(".pt"))
    info = {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkldnn_available": torch.backends.mkldnn.is_available(),
            "mkl_available": torch.backends.mkl.is_available(),
            "loss": res.loss.item(), "sha": {k: _sha(v) for k, v in tensors.items()}}
    out.write_text(json.dumps(info))


def verbose_report(extra: dict[str, str]) -> dict[str, str]:
    """Which libraries ran the model's matrix products in a process with `extra`, from MKL_VERBOSE
    and ONEDNN_VERBOSE: {"mkl": "<n> SGEMM calls, <isa>", "onednn": "<n> primitives, <isa>"}."""
    env = child_env({**extra, "MKL_VERBOSE": "1", "ONEDNN_VERBOSE": "1"})
    out = subprocess.run([sys.executable, __file__, "--probe-verbose"], env=env, capture_output=True, text=True,
                         timeout=600)
    text = out.stdout
    inside = text.split("PROBE-START", 1)[-1].split("PROBE-END", 1)[0]
    mkl_calls = re.findall(r"MKL_VERBOSE (\w+)\(", inside)
    banner = re.search(r"MKL_VERBOSE (?:oneMKL|Intel\(R\) MKL)[^\n]*?architecture (.*?)(?: with support| enabled processors|, Lnx)",
                       text)
    short = re.search(r"\(Intel\(R\) ([^)]*)\)", banner.group(1)) if banner else None
    mkl_isa = short.group(1) if short else (banner.group(1).replace("Intel(R) ", "") if banner else None)
    dnn_exec = [l for l in inside.splitlines() if l.startswith("onednn_verbose") and ",exec," in l]
    dnn_isa = re.search(r"onednn_verbose,[^\n]*info,cpu,isa:([^\n]*)", text)
    kinds: dict[str, int] = {}
    for c in mkl_calls:
        kinds[c] = kinds.get(c, 0) + 1
    return {"mkl": (", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no calls")
            + (f" [{mkl_isa}]" if mkl_isa else ""),
            "onednn": f"{len(dnn_exec)} primitives" + (f" [{dnn_isa.group(1).strip()}]" if dnn_isa and dnn_exec else "")}


def run_probe(name: str, extra: dict[str, str], tmp: Path) -> dict:
    out = tmp / f"probe-{len(list(tmp.glob('probe-*.json')))}.json"
    subprocess.run([sys.executable, __file__, "--probe", str(out)], env=child_env(extra), check=True, timeout=600)
    info = json.loads(out.read_text())
    info["tensors"] = out.with_suffix(".pt")
    info["verbose"] = verbose_report(extra)
    return info


def max_diff(a_path: Path, b_path: Path) -> dict[str, float]:
    import torch

    a, b = torch.load(a_path), torch.load(b_path)
    return {k: float((a[k].double() - b[k].double()).abs().max()) for k in a}


# ---------------------------------------------------------------------------------------------
# (b) the harness


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "grpo_research.cli", *args]


def build_base(extra: dict[str, str], out: Path, steps: int) -> dict:
    args = cli("sft", "--out", str(out), "task.name=arith", f"base.max_steps={steps}", "base.stop_accuracy=1.0",
               "base.eval_every=10", "base.check_size=200", "base.eval_size=500", "tracking.progress=false")
    subprocess.run(args, env=child_env(extra), check=True, cwd=ROOT, capture_output=True, timeout=1800)
    return json.loads((out / "base_info.json").read_text())


def grpo(extra: dict[str, str], base: Path, run_dir: Path, steps: int) -> list[dict]:
    args = cli("train", "--run-dir", str(run_dir), "method=grpo", "seed=0", f"model.name_or_path={base}",
               "task.name=arith", f"train.steps={steps}", "train.eval_every=5", "train.eval_size=500",
               f"train.checkpoint_every={steps}", f"train.samples_every={steps}", "train.threads=1",
               "tracking.wandb=disabled", "tracking.progress=false")
    subprocess.run(args, env=child_env(extra), check=True, cwd=ROOT, capture_output=True, timeout=1800)
    return [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines() if l.strip()]


def first_diff(rows: list[dict], ref: list[dict], keys: tuple[str, ...]) -> str:
    """The first step at which any of `keys` differs (bit for bit) from `ref`'s, or "none"."""
    for r, n in zip(rows, ref):
        for k in keys:
            if (k in r or k in n) and repr(r.get(k)) != repr(n.get(k)):
                return str(r.get("step"))
    return "none" if len(rows) == len(ref) else "length"


def last(rows: list[dict], key: str):
    vals = [r[key] for r in rows if key in r]
    return vals[-1] if vals else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--probe-verbose", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-harness", action="store_true", help="part (a) only")
    ap.add_argument("--base-steps", type=int, default=300)
    ap.add_argument("--grpo-steps", type=int, default=200)
    ap.add_argument("--grpo-base", type=Path, default=None,
                    help="the base model every GRPO run starts from (default: the native base built here)")
    ap.add_argument("--only", nargs="*", default=None, help="settings to run (names as in the table)")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here too")
    args = ap.parse_args()
    if args.probe is not None:
        return probe(args.probe)
    if args.probe_verbose:
        return probe(Path(os.devnull), verbose_only=True)

    settings = {k: v for k, v in SETTINGS.items() if args.only is None or k in args.only or k == "native"}
    tmp = Path(tempfile.mkdtemp(prefix="kernel-family-"))
    rows: dict[str, dict] = {}
    try:
        for name, extra in settings.items():
            info = run_probe(name, extra, tmp)
            rows[name] = info
            print(f"probe {name}: {info['cpu_capability']} {info['sha']} {info['verbose']}", flush=True)
        nat = rows["native"]
        for name, r in rows.items():
            r["diff"] = max_diff(r["tensors"], nat["tensors"])
            r["same"] = {k: r["sha"][k] == nat["sha"][k] for k in r["sha"]}
            r["fwd_same"] = r["same"]["logits"] and r["same"]["grads"]
        if not args.no_harness:
            base_nat = tmp / "base-native"
            for name, r in rows.items():
                if name not in ("native", "native (again)") and r["fwd_same"]:
                    continue  # (the native repeat runs as the control of the harness's own repeatability)
                out = tmp / f"base-{len(list(tmp.glob('base-*')))}" if name != "native" else base_nat
                info = build_base(settings[name], out, args.base_steps)
                r["base"] = {"steps": info["steps"], "loss": info["history"][-1]["loss"],
                             "heldout": info["heldout_accuracy"], "history": info["history"],
                             "kernels": info["environment"].get("kernels")}
                print(f"base {name}: {r['base']['loss']:.6f} heldout {r['base']['heldout']}", flush=True)
            grpo_base = args.grpo_base or base_nat
            for name, r in rows.items():
                if "base" not in r:
                    continue
                r["grpo"] = grpo(settings[name], grpo_base, tmp / f"grpo-{name.split()[0]}", args.grpo_steps)
                print(f"grpo {name}: acc {last(r['grpo'], 'eval/accuracy')} loss {last(r['grpo'], 'loss')}", flush=True)
            for name, r in rows.items():
                if "base" in r:
                    hist, ref = r["base"]["history"], nat["base"]["history"]
                    r["base_first_diff"] = {k: first_diff(hist, ref, (k,)) for k in ("loss", "check_accuracy")}
                    # loss: the update's numbers; rollouts: the sampled completions (their rewards and
                    # lengths), i.e. where the runs fork; eval/accuracy: the greedy held-out score
                    r["grpo_first_diff"] = {
                        "loss": first_diff(r["grpo"], nat["grpo"], ("loss", "grad_norm", "kl")),
                        "rollouts": first_diff(r["grpo"], nat["grpo"], ("reward_mean", "completion_len", "tokens")),
                        "eval": first_diff(r["grpo"], nat["grpo"], ("eval/accuracy",))}
    finally:
        table(rows)
        if args.json:
            keep = {n: {k: v for k, v in r.items() if k not in ("tensors",)} for n, r in rows.items()}
            args.json.write_text(json.dumps(keep, indent=1, default=str))
        shutil.rmtree(tmp, ignore_errors=True)


def table(rows: dict[str, dict]) -> None:
    print()
    print("| setting | cpu capability | logits+grads bit-identical to native | max abs diff logits / grads | "
          "kernels that differ from native | matrix products run by (MKL_VERBOSE, ONEDNN_VERBOSE) | "
          "base: final loss, held-out acc (first check differing: loss / check acc) | "
          "GRPO: final eval acc, final reward_mean (first step differing: loss / rollouts / eval acc) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if "diff" not in r:
            continue
        d, s = r["diff"], r["same"]
        yn = lambda v: "yes" if v else "no"  # noqa: E731
        base = grp = "not run (forward identical)"
        if "base" in r:
            b = r["base"]
            bd, gd = r.get("base_first_diff", {}), r.get("grpo_first_diff", {})
            base = f"{b['loss']:.4f}, {b['heldout']:.3f} ({bd.get('loss', '-')} / {bd.get('check_accuracy', '-')})"
            grp = (f"{last(r['grpo'], 'eval/accuracy'):.3f}, {last(r['grpo'], 'reward_mean'):.4f} "
                   f"({gd.get('loss', '-')} / {gd.get('rollouts', '-')} / {gd.get('eval', '-')})")
        print(f"| {name} | {r['cpu_capability']} | {yn(r['fwd_same'])} | {d['logits']:.2e} / {d['grads']:.2e} | "
              f"{', '.join(k for k in PARTS if not s[k]) or 'none'} | "
              f"MKL {r['verbose']['mkl']}; oneDNN {r['verbose']['onednn']} | {base} | {grp} |")


if __name__ == "__main__":
    main()
