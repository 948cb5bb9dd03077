# Stage 4: Optuna searches (grpo_research.hpo, `grpo-research hpo`), one per (method, task) of `hpo.searches`.
#
# search_hpo runs trials (ordinary run dirs under runs/_hpo/<search>/) until hpo.n_trials are
# COMPLETE or PRUNED in the storage (SQLite by default, any RDB URL for many workers). Neither
# the storage nor the trial dirs are declared outputs, so an interrupted search loses nothing
# and a rerun resumes it. export_hpo writes best.yaml and the study plots; train_hpo_rerun
# trains the best config and the defaults with fresh seeds into runs/hpo-<search>/, a study
# that the analyze rules report like any other (with the Optuna plots).


rule tune_arm:
    """The lr search of one arm of a `tuned: true` claim (Pipeline.tuning_args: lr only, the arm's
    run config on the study's base 0), then its best.yaml; the freeze fixes that lr."""
    input:
        base=lambda wc: tuning_base_inputs(wc.name),
    output:
        f"{RESULTS}/atlas_tuning/{{name}}/best.yaml",
    log:
        f"{LOGS}/tune_arm/{{name}}.log",
    benchmark:
        f"{BENCH}/tune_arm/{{name}}.tsv"
    wildcard_constraints:
        name=alternation(TUNED_ARMS),
    params:
        cli=CLI,
        search=lambda wc: q(tuning_args(wc.name)[0]),
        export=lambda wc: q(tuning_args(wc.name)[1]),
    threads: RES["hpo"]["threads"]
    resources:
        mem_mb=RES["hpo"]["mem_mb"],
        runtime=RES["hpo"]["runtime"],
    shell:
        "({params.cli} hpo search {params.search} && {params.cli} hpo export {params.export}) > {log} 2>&1"


rule search_hpo:
    input:
        base=lambda wc: base_inputs(search_model(wc.search)),
    output:
        f"{RESULTS}/hpo/{{search}}/trials.csv",
    log:
        f"{LOGS}/search_hpo/{{search}}.log",
    benchmark:
        f"{BENCH}/search_hpo/{{search}}.tsv"
    wildcard_constraints:
        search=alternation(SEARCHES),
    params:
        cli=CLI,
        args=lambda wc: search_args(wc.search),
    threads: RES["hpo"]["threads"]
    resources:
        mem_mb=RES["hpo"]["mem_mb"],
        runtime=RES["hpo"]["runtime"],
    shell:
        "{params.cli} hpo search {params.args} > {log} 2>&1"


rule export_hpo:
    input:
        f"{RESULTS}/hpo/{{search}}/trials.csv",
    output:
        best=f"{RESULTS}/hpo/{{search}}/best.yaml",
        plots=directory(f"{RESULTS}/hpo/{{search}}/plots"),
    log:
        f"{LOGS}/export_hpo/{{search}}.log",
    wildcard_constraints:
        search=alternation(SEARCHES),
    params:
        cli=CLI,
        args=lambda wc: export_args(wc.search),
    resources:
        mem_mb=RES["analyze"]["mem_mb"],
        runtime=RES["analyze"]["runtime"],
    shell:
        "{params.cli} hpo export {params.args} > {log} 2>&1"


rule train_hpo_rerun:
    input:
        rerun_inputs,
    output:
        f"{RUNS}/hpo-{{search}}/{{run_id}}/summary.json",
    log:
        f"{LOGS}/train_hpo_rerun/{{search}}/{{run_id}}.log",
    benchmark:
        f"{BENCH}/train_hpo_rerun/{{search}}/{{run_id}}.tsv"
    wildcard_constraints:
        search=alternation(SEARCHES),
        run_id=r"[^/]+",
    params:
        cli=CLI,
        args=rerun_args,
    threads: RES["train"]["threads"]
    resources:
        mem_mb=RES["train"]["mem_mb"],
        runtime=RES["train"]["runtime"],
    shell:
        "{params.cli} study train-budget {params.args} > {log} 2>&1"
