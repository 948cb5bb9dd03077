"""Benchmark: how long `snakemake -n <target>` takes to plan (parse, validate, expand every
study of the target, build the DAG), in an empty working directory.

    .venv/bin/python workflow/scripts/bench_plan.py [--target ablations] [--repeat 3] [--limit 10]

Prints each wall time and the best; exits 1 when the best exceeds --limit seconds (the
pipeline's promise: `snakemake -n ablations` plans in under 10 s). Timing is asserted here,
not in the test suite, because a loaded machine makes it noisy.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="ablations")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--limit", type=float, default=10.0)
    args = p.parse_args(argv)
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    times = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp) / "config.yaml"
            cfg.write_text(f"studies_dir: {ROOT / 'experiments'}\n")
            t0 = time.perf_counter()
            proc = subprocess.run([snakemake, "--snakefile", str(ROOT / "Snakefile"), "--directory", tmp,
                                   "--configfile", str(cfg), "-n", args.target], capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
                return 2
    print(f"snakemake -n {args.target}: " + ", ".join(f"{t:.2f}" for t in times) + f" s; best {min(times):.2f} s "
          f"(limit {args.limit:.0f} s)")
    return 0 if min(times) <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
