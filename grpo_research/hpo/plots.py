"""Optuna study plots as PNG files (optuna.visualization.matplotlib; matplotlib only).

Each plot is written even when Optuna cannot draw it yet (e.g. parameter importances need
two completed trials): the PNG then says why, so the report and the pipeline's declared
outputs never miss a file.
"""
from __future__ import annotations

import warnings
from pathlib import Path

PLOTS = ("optimization_history", "param_importances", "parallel_coordinate", "slice", "intermediate_values")
Y_LABEL = "held-out accuracy (greedy, final)"


def _figure_of(ax):
    import numpy as np

    first = np.ravel(ax)[0] if isinstance(ax, np.ndarray) else ax
    return first.figure


def _placeholder(path: Path, title: str, message: str) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.2))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_study_plots(study, out_dir: str | Path, title: str = "") -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as ovm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    makers = {
        "optimization_history": lambda: ovm.plot_optimization_history(study, target_name=Y_LABEL),
        "param_importances": lambda: ovm.plot_param_importances(study),
        "parallel_coordinate": lambda: ovm.plot_parallel_coordinate(study, target_name=Y_LABEL),
        "slice": lambda: ovm.plot_slice(study, target_name=Y_LABEL),
        "intermediate_values": lambda: ovm.plot_intermediate_values(study),
    }
    paths = {}
    for name in PLOTS:
        path = out / f"{name}.png"
        nice = name.replace("_", " ")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ax = makers[name]()
                fig = _figure_of(ax)
                if name == "intermediate_values":
                    for a in fig.axes:
                        a.set_xlabel("generated samples")
                        a.set_ylabel("held-out accuracy (greedy)")
                if name == "param_importances":
                    for a in fig.axes:
                        a.set_xlabel("importance of the parameter for the final accuracy (PED-ANOVA, sums to 1)")
                w, h = fig.get_size_inches()
                fig.set_size_inches(max(w, 8), max(h, 4.5))
                fig.suptitle(f"{title}: {nice}" if title else nice, fontsize=11)
                if name not in ("slice", "parallel_coordinate"):  # these place their colour bar themselves
                    fig.tight_layout()
                fig.savefig(path, dpi=110, bbox_inches="tight")
                plt.close(fig)
            except (ValueError, RuntimeError, ZeroDivisionError, IndexError, optuna.exceptions.OptunaError) as e:
                plt.close("all")
                _placeholder(path, f"{title}: {nice}", f"Not drawn yet: {e}")
        paths[name] = path
    return paths
