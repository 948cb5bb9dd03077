# Stage 2: one training run per (study, run id), `grpo-research train` into runs/<study>/<run_id>/.
#
# Only summary.json (written last, by a finished run) is declared: Snakemake deletes the
# declared outputs of a failed or interrupted job, never the run dir, so the trainer's
# checkpoint survives and a rerun of the pipeline resumes the run where it stopped. No
# `shadow:` (a shadow dir would throw the checkpoint away). If a run's study settings change,
# the run dir holds a different config.yaml and `train` refuses it (exit 2, message in the
# log): delete runs/<study>/<run_id> to retrain it.
#
# The equal-wall-time supervised control of a seed (`sft_control-wall-seed<N>`) waits for the RL
# runs of that seed and for its equal-samples twin, and trains as long as the longest of them
# trained (`grpo-research study train-wall`).


rule train_run:
    input:
        base=lambda wc: run_base_inputs(wc.study, wc.run_id),
        matched=lambda wc: wall_inputs(wc.study, wc.run_id),
    output:
        f"{RUNS}/{{study}}/{{run_id}}/summary.json",
    log:
        f"{LOGS}/train_run/{{study}}/{{run_id}}.log",
    benchmark:
        f"{BENCH}/train_run/{{study}}/{{run_id}}.tsv"
    wildcard_constraints:
        study=alternation(TRAINED_STUDIES),
        run_id=r"[^/]+",
    params:
        cli=CLI,
        command=lambda wc: train_command(wc.study, wc.run_id),
        env=lambda wc: run_env(wc.study, wc.run_id),  # its kernel family's variables ("" if native)
    threads: lambda wc: train_threads(wc.study, wc.run_id)
    resources:
        mem_mb=RES["train"]["mem_mb"],
        runtime=RES["train"]["runtime"],
    shell:
        "{params.env}{params.cli} {params.command} > {log} 2>&1"
