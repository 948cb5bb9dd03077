# Stage 1: the base model, built once into <runs>/_base/<name>/ (an HF checkpoint dir with
# base_info.json) and given to every run as model.name_or_path, so parallel runs never race
# to build it. <name>-base<b> is base seed b of <name> (a study's `base_seeds`): the same build
# with base.seed=b, shared by every study that asks for it; <name>[-base<b>]-k<family> the same
# build on kernel family <family> (a study's `kernels`).


rule build_base_model:
    output:
        f"{RUNS}/_base/{{base}}/base_info.json",
    log:
        f"{LOGS}/build_base_model/{{base}}.log",
    benchmark:
        f"{BENCH}/build_base_model/{{base}}.tsv"
    wildcard_constraints:
        base=f"(?:{alternation(config['base_models'])})(?:-base[0-9]+)?(?:-k(?:{KERNEL_SUFFIX}))?",
    params:
        cli=CLI,
        out=lambda wc: f"{RUNS}/_base/{wc.base}",
        overrides=lambda wc: q([*base_model_overrides(wc.base), "tracking.progress=false"]),
        env=lambda wc: base_model_env(wc.base),  # its kernel family's variables ("" if native)
    threads: RES["base_model"]["threads"]
    resources:
        mem_mb=RES["base_model"]["mem_mb"],
        runtime=RES["base_model"]["runtime"],
    shell:
        # sft refuses a non-empty dir: clear what a changed config left behind, then build atomically
        "rm -rf {params.out} && {params.env}OMP_NUM_THREADS={threads} "
        "{params.cli} sft --out {params.out} {params.overrides} > {log} 2>&1"
