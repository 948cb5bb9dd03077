# Stage 5: aggregate a study's runs over seeds (tables, curves), plot, render the
# self-contained report.html (one job per study); render results/index.html. All from the
# run dirs (grpo_research/analysis/, `grpo-research report`), never from W&B.


rule report_study:
    """Tables (final, cost, curves, runs), figures and the self-contained report.html."""
    input:
        unpack(report_inputs),
    output:
        report=f"{RESULTS}/{{study}}/report.html",
        final=f"{RESULTS}/{{study}}/final.csv",
        final_md=f"{RESULTS}/{{study}}/final.md",
        cost=f"{RESULTS}/{{study}}/cost.csv",
        cost_md=f"{RESULTS}/{{study}}/cost.md",
        curves=f"{RESULTS}/{{study}}/curves.csv",
        runs=f"{RESULTS}/{{study}}/runs.csv",
        gains=f"{RESULTS}/{{study}}/gains.csv",
        gains_md=f"{RESULTS}/{{study}}/gains.md",
        wall_curves=f"{RESULTS}/{{study}}/wall_curves.csv",
        summary=f"{RESULTS}/{{study}}/summary.json",
        figures=directory(f"{RESULTS}/{{study}}/figures"),
    log:
        f"{LOGS}/report_study/{{study}}.log",
    wildcard_constraints:
        study=alternation(ALL_STUDY_NAMES),
    params:
        cli=CLI,
        args=report_args,
    resources:
        mem_mb=RES["analyze"]["mem_mb"],
        runtime=RES["analyze"]["runtime"],
    shell:
        "{params.cli} report study {params.args} > {log} 2>&1"


rule render_index:
    """results/index.html, listing every report on disk; rebuilt after the reports of the
    `ablations` and `report` targets (the studies of config `studies`, else the default ones)."""
    input:
        lambda wc: [report_path(s) for s in selected_studies()],
    output:
        f"{RESULTS}/index.html",
    log:
        f"{LOGS}/render_index.log",
    params:
        cli=CLI,
        results=RESULTS,
    resources:
        mem_mb=RES["analyze"]["mem_mb"],
        runtime=RES["analyze"]["runtime"],
    shell:
        "{params.cli} report index --results {params.results} --out {output} > {log} 2>&1"


rule report_atlas_exploratory:
    """The exploratory atlas: every claim of <studies_dir>/claims.yaml tested on its studies' runs
    on the bases they already use (results/atlas_exploratory/report.html, atlas.csv, atlas.md);
    the studies' reports come first, so their runs and evaluations are finished."""
    input:
        claims=P.claims_path,
        reports=lambda wc: [report_path(s) for s in atlas_studies()],
    output:
        report=f"{RESULTS}/atlas_exploratory/report.html",
        csv=f"{RESULTS}/atlas_exploratory/atlas.csv",
        md=f"{RESULTS}/atlas_exploratory/atlas.md",
    log:
        f"{LOGS}/report_atlas_exploratory.log",
    params:
        cli=CLI,
        args=lambda wc: atlas_args(),
    resources:
        mem_mb=RES["analyze"]["mem_mb"],
        runtime=RES["analyze"]["runtime"],
    shell:
        "{params.cli} report atlas {params.args} > {log} 2>&1"


rule report_atlas:
    """The confirmatory atlas: the frozen family and positive controls of
    <studies_dir>/atlas_freeze.json tested on their confirmatory runs only (confirm-<study>: new
    base models), Holm over both directions (results/atlas/report.html, atlas.csv, atlas.md)."""
    input:
        claims=P.claims_path,
        freeze=P.freeze_path,
        reports=lambda wc: [report_path(s) for s in confirm_studies()],
    output:
        report=f"{RESULTS}/atlas/report.html",
        csv=f"{RESULTS}/atlas/atlas.csv",
        md=f"{RESULTS}/atlas/atlas.md",
    log:
        f"{LOGS}/report_atlas.log",
    params:
        cli=CLI,
        args=lambda wc: atlas_args("confirmatory"),
    resources:
        mem_mb=RES["analyze"]["mem_mb"],
        runtime=RES["analyze"]["runtime"],
    shell:
        "{params.cli} report atlas {params.args} > {log} 2>&1"
