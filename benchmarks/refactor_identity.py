"""Does a refactor keep behaviour? Train every method for a few steps with a fixed seed at two
commits and compare the metrics.jsonl they write, row for row and value for value.

    .venv/bin/python benchmarks/refactor_identity.py --before 08c4dd1 --after HEAD
    .venv/bin/python benchmarks/refactor_identity.py --before 08c4dd1 --after .   # the work tree

Each side runs from its own checkout (`git worktree` under a temporary directory; `.` is this
checkout as it is on disk) with `python -m grpo_research.cli train`, one thread, W&B off, on
the same starting model: the cached offline base model (built once by the current checkout)
or `--model DIR`. Ignored in the comparison: timing and memory fields (`*_s`, `peak_mem_mb`,
`cost/*`). Everything else must be equal bit for bit (floats compared by their repr), keys in the same order.
Prints one line per method and exits 1 when any differs.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, default_model_dir, worker_env

from grpo_research.methods import METHODS as REGISTERED  # noqa: E402

METHODS = tuple(REGISTERED)  # every registered method
FAST = ["train.steps={steps}", "train.eval_every=10", "train.eval_size=200", "train.checkpoint_every=10",
        "train.samples_every=10", "train.threads=1", "tracking.wandb=disabled", "tracking.progress=false"]


def ignored(key: str) -> bool:
    return key.endswith("_s") or key == "peak_mem_mb" or key.startswith("cost/")


def checkout(rev: str, tmp: Path) -> Path:
    if rev == ".":
        return ROOT
    dest = tmp / f"src-{rev.replace('/', '_')}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(dest), rev],
                   check=True, capture_output=True)
    return dest


def train(src: Path, method: str, run_dir: Path, model: Path, steps: int, seed: int,
          extra: list[str] = ()) -> list[dict]:
    env = worker_env(1)
    env["PYTHONPATH"] = str(src)
    overrides = [f"method={method}", f"seed={seed}", f"model.name_or_path={model}",
                 *[o.format(steps=steps) for o in FAST], *extra]
    cmd = [sys.executable, "-m", "grpo_research.cli", "train", "--run-dir", str(run_dir), *overrides]
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{method} at {src}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def compare(a: list[dict], b: list[dict]) -> list[str]:
    """Differences between two metrics logs (empty: identical outside the ignored fields)."""
    out = []
    if len(a) != len(b):
        out.append(f"{len(a)} rows vs {len(b)}")
    for i, (ra, rb) in enumerate(zip(a, b)):
        ka = [k for k in ra if not ignored(k)]
        kb = [k for k in rb if not ignored(k)]
        if ka != kb:
            out.append(f"row {i}: keys differ (or their order): before {ka}, after {kb}")
        for k in sorted(set(ka) & set(kb)):
            if repr(ra[k]) != repr(rb[k]):
                out.append(f"row {i} (step {ra.get('step')}): {k} {ra[k]!r} != {rb[k]!r}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a git revision, or . for this checkout")
    ap.add_argument("--after", default=".", help="a git revision, or . for this checkout (default)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", help="starting checkpoint (default: the cached offline base model)")
    ap.add_argument("--args", default="", help="config overrides for both sides, space-separated (e.g. "
                    "'train.micro_batch_size=16 critic.warmup_steps=3' to compare a path the defaults skip)")
    ap.add_argument("--after-args", default="", help="config overrides for the after side only, space-separated "
                    "(e.g. a new option set to keep the old code path: 'train.shared_prefix=false')")
    args = ap.parse_args()
    model = Path(args.model) if args.model else default_model_dir()
    tmp = Path(tempfile.mkdtemp(prefix="refactor-identity-"))
    failed = 0
    try:
        srcs = {side: checkout(rev, tmp) for side, rev in (("before", args.before), ("after", args.after))}
        for method in args.methods.split(","):
            logs = {side: train(src, method, tmp / side / method, model, args.steps, args.seed,
                                args.args.split() + (args.after_args.split() if side == "after" else []))
                    for side, src in srcs.items()}
            diffs = compare(logs["before"], logs["after"])
            n_rows = len(logs["before"])
            n_values = sum(1 for r in logs["before"] for k in r if not ignored(k))
            if diffs:
                failed += 1
                print(f"{method:13s} DIFFERENT: {len(diffs)} differences; first: {diffs[0]}")
            else:
                print(f"{method:13s} identical: {n_rows} rows, {n_values} values compared")
            sys.stdout.flush()
    finally:
        for side in ("before", "after"):
            rev = getattr(args, side)
            if rev != ".":
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tmp / f"src-{rev.replace('/', '_')}")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(args.methods.split(',')) - failed} of {len(args.methods.split(','))} methods identical "
          f"({args.steps} steps, seed {args.seed}; before {args.before}, after {args.after}"
          f"{'; both with ' + args.args if args.args else ''}"
          f"{'; after with ' + args.after_args if args.after_args else ''})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
