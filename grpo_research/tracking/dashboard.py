"""A study's W&B dashboard: a saved workspace view built with `wandb-workspaces`.

`grpo-research dashboard --study NAME` (grpo_research/cli/dashboard.py) reads the study's run
dirs (`<runs>/<NAME>/*/config.yaml`; for an HPO study `hpo-<search>` also the search's trials
under `<runs>/_hpo/<search>/`) and builds one workspace:

- the runs: filtered by the W&B group the trainer gave them (`tracking.group`: the study's
  name, `hpo-<search>` for a search), leaving out the equal-wall-time control (tag
  `control=equal_wall_time`: it generates more samples than the budget, so it would stretch
  every equal-samples axis; it is left out by run name, the run dir's name); grouped by `method` and the swept config keys (the `key=value`
  tags the study gives each run), each group drawn as its mean with a standard-error band;
- line panels of held-out accuracy, reward, KL, entropy, completion length and the share of
  groups without signal against generated `samples`; a panel per `cost/...` key the runs
  logged; a run comparer and a runs table (pinned columns: method, seed, swept keys, final
  values); for an HPO group a parallel-coordinates panel (swept keys -> final accuracy).

Offline (the default) nothing touches the network: the workspace's view spec (the JSON that
W&B stores, `Workspace._to_model()` of wandb-workspaces) is written to
`results/<NAME>/wandb_workspace.json`. Online (`publish`) saves the view to W&B and returns
its URL; that needs `wandb login` and the runs synced (`wandb sync <run-dir>/wandb/offline-run-*`).

Metric keys are those of grpo_research/tracking (the table in its docstring); the history's
x-axis `samples` is logged with every row.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_research.errors import UsageError
from grpo_research.typed_config import safe_load

X_AXIS = "samples"
X_TITLE = "generated samples (completions)"
# (key, panel title, y-axis title): the learning curves of every study
LINE_PANELS = [
    ("eval/accuracy", "Held-out accuracy (greedy)", "accuracy (fraction)"),
    ("reward_mean", "Training reward", "reward per completion"),
    ("kl", "KL to the reference", "KL per token (nats)"),
    ("entropy", "Policy entropy", "entropy per token (nats)"),
    ("completion_len", "Completion length", "tokens (EOS included)"),
    ("frac_zero_std", "Groups without learning signal", "share of groups with equal rewards"),
]
COST_PREFIX = "cost/"
WALL_CONTROL_TAG = "control=equal_wall_time"  # the tag grpo_research.studies gives the equal-wall-time control
HPO_PREFIX = "hpo-"  # an Optuna search's runs: W&B group `hpo-<search>` (grpo_research.hpo.search)
PLACEHOLDER_ENTITY = "your-entity"  # offline, without --entity or WANDB_ENTITY
SUMMARY_COLUMNS = ["eval/accuracy", "reward_mean", "samples"]
SPEC_FILE = "wandb_workspace.json"


@dataclass
class StudyRuns:
    """What the run dirs of a study say about its W&B runs."""

    study: str
    run_dirs: list[Path]
    groups: list[str]  # the W&B groups of the runs (tracking.group), normally [study]
    projects: list[str]  # tracking.project of the runs
    swept: list[str]  # config keys the study sweeps (the runs' `key=value` tags)
    history_keys: list[str]  # every key the runs shown logged (metrics.jsonl), in first-seen order
    hpo: bool = False
    wall_controls: list[str] = field(default_factory=list)  # W&B run names of the equal-wall-time control
    configs: list[dict] = field(default_factory=list)


def _config_has(config: dict, dotted: str) -> bool:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _study_dirs(runs_root: Path, study: str) -> list[Path]:
    dirs = [runs_root / study]
    if study.startswith(HPO_PREFIX):
        dirs.append(runs_root / "_hpo" / study[len(HPO_PREFIX):])
    return [d for d in dirs if d.is_dir()]


def find_study_runs(study: str, runs_root: str | Path = "runs") -> StudyRuns:
    """The W&B-tracked runs of `study` under `runs_root` (UsageError: unknown study, no runs,
    or no run that W&B tracked)."""
    runs_root = Path(runs_root)
    if not study or "/" in study or study.startswith("."):
        raise UsageError(f"--study {study!r}: a study name, e.g. ppo_vs_grpo")
    dirs = _study_dirs(runs_root, study)
    if not dirs:
        raise UsageError(f"unknown study {study!r}: no directory {runs_root / study} (train it first: "
                         f"snakemake --cores all study_{study})")
    run_dirs, configs = [], []
    for d in dirs:
        for cfg_file in sorted(d.glob("*/config.yaml")):
            run_dir = cfg_file.parent
            if ".stale-" in run_dir.name or not (run_dir / "metrics.jsonl").exists():
                continue
            configs.append(safe_load(cfg_file.read_text()) or {})
            run_dirs.append(run_dir)
    if not run_dirs:
        raise UsageError(f"study {study!r} has no runs under {', '.join(map(str, dirs))} "
                         "(no run dir with config.yaml and metrics.jsonl)")
    tracked = [(d, c) for d, c in zip(run_dirs, configs) if (c.get("tracking") or {}).get("wandb") != "disabled"]
    if not tracked:
        raise UsageError(f"study {study!r}: none of its {len(run_dirs)} runs logged to W&B (tracking.wandb=disabled); "
                         "rerun them with tracking.wandb=offline")
    run_dirs, configs = [d for d, _ in tracked], [c for _, c in tracked]
    groups = list(dict.fromkeys(str((c.get("tracking") or {}).get("group") or "") for c in configs))
    if "" in groups:
        raise UsageError(f"study {study!r}: some runs have no W&B group (tracking.group), so no filter can select "
                         "them; runs the pipeline trains have it")
    projects = list(dict.fromkeys(str((c.get("tracking") or {}).get("project") or "") for c in configs))
    swept: list[str] = []
    for c in configs:
        for tag in (c.get("tracking") or {}).get("tags") or []:
            key = str(tag).split("=", 1)[0]
            if "=" in str(tag) and _config_has(c, key) and key not in swept:
                swept.append(key)
    walls = [d.name for d, c in zip(run_dirs, configs)
             if WALL_CONTROL_TAG in ((c.get("tracking") or {}).get("tags") or []) or (d / "wall_budget.json").exists()]
    keys: dict[str, None] = {}  # what the runs the workspace shows logged
    from grpo_research.tracking import read_metrics

    for d in run_dirs:
        if d.name not in walls:
            for row in read_metrics(d / "metrics.jsonl", missing_ok=True, skip_bad_lines=True):
                keys.update(dict.fromkeys(row))
    return StudyRuns(study=study, run_dirs=run_dirs, groups=groups, projects=projects, swept=swept,
                     history_keys=list(keys), wall_controls=walls, hpo=study.startswith(HPO_PREFIX) or any(
                         g.startswith(HPO_PREFIX) for g in groups), configs=configs)


def resolve_target(runs: StudyRuns, entity: str | None = None, project: str | None = None,
                   online: bool = False) -> tuple[str, str]:
    """(entity, project): the flags, else W&B's WANDB_ENTITY / WANDB_PROJECT, else the project
    the runs logged to and, offline, a placeholder entity (online: UsageError without one)."""
    project = project or os.environ.get("WANDB_PROJECT") or (runs.projects[0] if runs.projects else "")
    if not project:
        raise UsageError("no W&B project: pass --project or set WANDB_PROJECT")
    entity = entity or os.environ.get("WANDB_ENTITY")
    if not entity:
        if online:
            raise UsageError("--publish needs the W&B entity: pass --entity or set WANDB_ENTITY")
        entity = PLACEHOLDER_ENTITY
    return entity, project


def build_workspace(runs: StudyRuns, entity: str, project: str):
    """The `wandb_workspaces.workspaces.Workspace` of the study (nothing saved)."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces import expr

    logged = set(runs.history_keys)
    curves = [wr.LinePlot(title=title, x=X_AXIS, y=[key], title_x=X_TITLE, title_y=ytitle,
                          groupby_aggfunc="mean", groupby_rangefunc="stderr", smoothing_type="none",
                          legend_position="south")
              for key, title, ytitle in LINE_PANELS if key in logged]
    cost = [wr.LinePlot(title=key, x=X_AXIS, y=[key], title_x=X_TITLE, groupby_aggfunc="mean",
                        groupby_rangefunc="stderr", smoothing_type="none")
            for key in runs.history_keys if key.startswith(COST_PREFIX)]
    note = (f"**{runs.study}**: runs of W&B group {', '.join(f'`{g}`' for g in runs.groups)}, grouped by "
            f"`method`{''.join(f', `{k}`' for k in runs.swept)}; a line is the group's mean, its band the "
            "standard error over seeds. x-axis: generated samples (completions).")
    if runs.wall_controls:
        note += (f" The equal-wall-time control (tag `{WALL_CONTROL_TAG}`: {', '.join(runs.wall_controls)}) is "
                 "filtered out: it generates more samples than the budget. The comparison at equal wall time is "
                 "in the study's report.html.")
    sections = [ws.Section(name="Learning curves at equal samples", panels=[wr.MarkdownPanel(markdown=note), *curves],
                           is_open=True)]
    if cost:
        sections.append(ws.Section(name="Cost (memory, throughput, MFU)", panels=cost, is_open=True))
    if runs.hpo:
        columns = [wr.ParallelCoordinatesPlotColumn(metric=wr.Config(k)) for k in runs.swept]
        columns.append(wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric("eval/accuracy"),
                                                        display_name="final held-out accuracy"))
        sections.append(ws.Section(name="Hyper-parameter search", is_open=True, panels=[
            wr.ParallelCoordinatesPlot(title="swept values -> final held-out accuracy", columns=columns)]))
    sections.append(ws.Section(name="Runs", panels=[wr.RunComparer(diff_only="split")], is_open=True))
    groups = runs.groups[0] if len(runs.groups) == 1 else None
    filters = [expr.Metric("Group") == groups] if groups else [expr.Metric("Group").isin(runs.groups)]
    if runs.wall_controls:  # by name: wandb-workspaces 0.4.13 turns a filter value's `=` into `==`
        filters.append(expr.Metric("Name").notin(runs.wall_controls))
    pinned = ["config:method", "config:seed", *(f"config:{k}" for k in runs.swept),
              *(f"summary:{k}" for k in SUMMARY_COLUMNS if k in logged)]
    return ws.Workspace(
        entity=entity, project=project, name=f"{runs.study} (grpo-research)", sections=sections,
        settings=ws.WorkspaceSettings(x_axis=X_AXIS, smoothing_type="none", max_runs=100,
                                      tooltip_number_of_runs="all_runs"),
        runset_settings=ws.RunsetSettings(
            filters=filters, groupby=[expr.Config("method"), *(expr.Config(k) for k in runs.swept)],
            pinned_columns=pinned, order=[expr.Ordering(expr.Config("method"), ascending=True)]),
    )


def workspace_spec(workspace) -> dict[str, Any]:
    """The view spec W&B stores for `workspace` (wandb-workspaces' own serialisation)."""
    return workspace._to_model().model_dump(by_alias=True, exclude_none=True, mode="json")


def spec_panels(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """[{section, type, x, keys: [metric keys], config: [config keys]}] of a workspace spec."""
    out = []
    for section in spec["spec"]["section"]["panelBankConfig"]["sections"]:
        for panel in section.get("panels", []):
            cfg = panel.get("config", {})
            keys, config_keys = list(cfg.get("metrics", [])), []
            for col in cfg.get("columns", []):
                where, _, name = col["accessor"].partition(":")
                if where == "config":  # config:algo.value.beta -> algo.beta
                    config_keys.append(name.replace(".value", "", 1))
                else:
                    keys.append(name)
            out.append({"section": section["name"], "type": panel["viewType"], "x": cfg.get("xAxis"),
                        "keys": keys, "config": config_keys})
    return out


def write_spec(runs: StudyRuns, out: Path, entity: str, project: str) -> dict[str, Any]:
    """results/<study>/wandb_workspace.json: the view spec and what it selects (offline)."""
    from grpo_research.files import write_text_atomic

    spec = workspace_spec(build_workspace(runs, entity, project))
    doc = {"study": runs.study, "entity": entity, "project": project, "groups": runs.groups,
           "swept": runs.swept, "runs": [d.name for d in runs.run_dirs], "hpo": runs.hpo,
           "publish": f"grpo-research dashboard --study {runs.study} --publish", "workspace": spec}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(doc, indent=1) + "\n")
    return doc


# ---------------------------------------------------------------- online (not exercised by the tests)
def publish(runs: StudyRuns, entity: str, project: str) -> str:
    """Save the study's workspace to W&B as a new view; return its URL. Needs `wandb login`
    and the runs synced; the only function of this module that talks to the network."""
    workspace = build_workspace(runs, entity, project)
    workspace.save()
    return workspace.url
