"""`grpo-research eval`: generate on a benchmark from a checkpoint, then score like `score`
(the generation: grpo_research/evaluation/generate.py, whose docstring describes the outputs).

    grpo-research eval --checkpoint DIR --benchmark NAME --out OUT.json
                       [--data PATH] [--n N] [--samples K] [--temperature T] [--seed S]
                       [--max-new-tokens M] [--batch-size B] [--threads N] [--config RUN.yaml]

Usage errors print one `error: ...` line and exit with status 2, before any work: bad numbers
(--samples > 1 needs a --temperature above 0; --samples 1 is greedy and takes none), and an
--out that cannot be written or is one of the inputs (a file of the checkpoint, --config, --data).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grpo_research.cli.common import Parser, run_command


def build_parser() -> Parser:
    p = Parser(prog="grpo-research eval", description="Generate on a benchmark from a checkpoint and score it.")
    p.add_argument("--checkpoint", required=True, type=Path,
                   help="HF checkpoint dir, a run dir (uses its model/) or a packaged model (smollm2-135m-instruct)")
    p.add_argument("--benchmark", required=True, help="task name: arith, code, gsm8k, math500, humaneval, mbpp, ...")
    p.add_argument("--out", required=True, help="summary JSON (samples and predictions are written beside it)")
    p.add_argument("--data", help="benchmark data: local file or folder, or a Hugging Face dataset name")
    p.add_argument("--config", type=Path, help="the run's config.yaml (default: found beside the checkpoint)")
    p.add_argument("--n", type=int, help="evaluate the first N held-out problems (default: all)")
    p.add_argument("--samples", type=int, default=1, help="completions per problem (1: greedy)")
    p.add_argument("--temperature", type=float, help="sampling temperature (> 0), required with --samples > 1")
    p.add_argument("--seed", type=int, default=0, help="sampler seed when --samples > 1")
    p.add_argument("--max-new-tokens", type=int, help="default: the run's rollout.max_new_tokens, else 512")
    p.add_argument("--batch-size", type=int, default=256, help="prompts per generate() call")
    p.add_argument("--prompt-format", choices=("auto", "raw", "chat"),
                   help="raw text or the tokenizer's chat template (default: the run's task.prompt_format, else auto: "
                        "chat when the tokenizer has a template)")
    p.add_argument("--system-prompt", help="chat: a system turn (default: the run's task.system_prompt)")
    p.add_argument("--few-shot", type=int, help="solved training problems shown first (default: the run's task.few_shot)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--reuse-final-eval", action="store_true",
                   help="--checkpoint a run dir: copy the run's own last held-out evaluation (final_eval/heldout.json) "
                        "when it is exactly this evaluation, else say why and generate")
    p.set_defaults(func=cmd_eval)
    return p


def cmd_eval(args: argparse.Namespace) -> int:
    from grpo_research.evaluation.generate import check_args, evaluate_checkpoint
    from grpo_research.evaluation.score import check_outputs, report_sandbox_errors, summary_line, write_results

    check_args(args)
    # before any work; the inputs are the model's files and the config (a run dir's eval/ is where outputs go)
    model = args.checkpoint / "model" if (args.checkpoint / "model").is_dir() else args.checkpoint
    out = check_outputs(args.out, [model, args.config, args.checkpoint / "config.yaml"], args.data, predictions=True)
    if args.reuse_final_eval:
        from grpo_research.evaluation.final import reuse_final_eval

        why = reuse_final_eval(args, out)
        if why is None:
            s = json.loads(out.read_text())
            print(f"{summary_line(s)} over {s['n_tasks']} tasks, {s['n_samples']} samples: the run's own final "
                  f"evaluation at step {s['evaluated_by']['trainer_step']} ({s['reused_from']}) -> {out}")
            return 0
        print(f"not reusing the run's final evaluation: {why}; generating", file=sys.stderr)
    result = evaluate_checkpoint(args)
    s = result["summary"]
    write_results(out, s, result["rows"], result["predictions"])
    if not report_sandbox_errors(s, out):
        return 1
    print(f"{summary_line(s)} over {s['n_tasks']} tasks, {s['n_samples']} samples, "
          f"generation {s['generate_s']:.1f}s -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run `eval`; argv excludes the word "eval". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
