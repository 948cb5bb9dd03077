# Stage 3: evaluate each run's final model (runs/<study>/<run_id>/model/) on the study's
# benchmarks with `grpo-research eval` (generation + the same scoring as `grpo-research score`),
# into runs/<study>/<run_id>/eval/<benchmark>.json. {benchmark} is the study's entry, which names
# the file; eval_args passes the benchmark it runs (`--benchmark`: the entry's `benchmark`, else
# its name), so one benchmark can be evaluated twice (e.g. greedy and 64 samples).


rule evaluate_run:
    input:
        summary=f"{RUNS}/{{study}}/{{run_id}}/summary.json",
    output:
        f"{RUNS}/{{study}}/{{run_id}}/eval/{{benchmark}}.json",
    log:
        f"{LOGS}/evaluate_run/{{study}}/{{run_id}}/{{benchmark}}.log",
    benchmark:
        f"{BENCH}/evaluate_run/{{study}}/{{run_id}}/{{benchmark}}.tsv"
    wildcard_constraints:
        study=alternation(ALL_STUDY_NAMES),
        run_id=r"[^/_][^/]*",  # not _base_model (rule evaluate_base)
        benchmark=r"[A-Za-z0-9_]+",
    params:
        cli=CLI,
        run_dir=lambda wc: f"{RUNS}/{wc.study}/{wc.run_id}",
        args=lambda wc: eval_args(wc.study, wc.benchmark),
        env=lambda wc: run_env(wc.study, wc.run_id),
        batch=config["evaluate"]["batch_size"],
    threads: RES["evaluate"]["threads"]
    resources:
        mem_mb=RES["evaluate"]["mem_mb"],
        runtime=RES["evaluate"]["runtime"],
    shell:
        "{params.env}{params.cli} eval --checkpoint {params.run_dir} "
        "--out {output} --threads {threads} --batch-size {params.batch} {params.args} > {log} 2>&1"


rule evaluate_base:
    """A study's base model on its benchmarks (study key `benchmark_base: true`), posed as its
    runs pose their prompts, into runs/<study>/_base_model/eval/<benchmark>.json (base seed b
    != 0: _base_model-base<b>/)."""
    input:
        lambda wc: base_eval_inputs(wc.study, base_of_suffix(wc.suffix), kernels_of_suffix(wc.suffix)),
    output:
        f"{RUNS}/{{study}}/_base_model{{suffix}}/eval/{{benchmark}}.json",
    log:
        f"{LOGS}/evaluate_base/{{study}}/{{benchmark}}{{suffix}}.log",
    benchmark:
        f"{BENCH}/evaluate_base/{{study}}/{{benchmark}}{{suffix}}.tsv"
    wildcard_constraints:
        study=alternation(TRAINED_STUDIES),
        benchmark=r"[A-Za-z0-9_]+",
        suffix=rf"(?:-base[0-9]+)?(?:-k(?:{KERNEL_SUFFIX}))?",  # base seed b != 0, kernel family; empty for base 0
    params:
        cli=CLI,
        args=lambda wc: base_eval_args(wc.study, wc.benchmark, base_of_suffix(wc.suffix), kernels_of_suffix(wc.suffix)),
        env=lambda wc: kernel_env_prefix(kernels_of_suffix(wc.suffix)),
        batch=config["evaluate"]["batch_size"],
    threads: RES["evaluate"]["threads"]
    resources:
        mem_mb=RES["evaluate"]["mem_mb"],
        runtime=RES["evaluate"]["runtime"],
    shell:
        "{params.env}{params.cli} eval --out {output} --threads {threads} "
        "--batch-size {params.batch} {params.args} > {log} 2>&1"
