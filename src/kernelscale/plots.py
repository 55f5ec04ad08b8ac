"""Per-dataset figures from run folders (matplotlib, Agg backend: no display needed).

* test metric vs training wall time (one line per algorithm x seed)
* objective vs iteration (from ``history.csv`` when the solver records it, else per segment)
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

_STYLES = ("-", "--", ":", "-.")


def _style(i: int) -> str:
    """A new line style after every 20 lines (``_color`` has 20 colours)."""
    return _STYLES[(i // 20) % len(_STYLES)]


def _color(i: int):
    """20 distinct colours: the default cycle has 10, fewer than the algorithms a run compares."""
    return plt.get_cmap("tab20")(i % 20)


def _load(run_dir: Path):
    final = json.loads((run_dir / "final.json").read_text())
    metrics = pd.read_csv(run_dir / "metrics.csv")
    hist = pd.read_csv(run_dir / "history.csv") if (run_dir / "history.csv").is_file() else None
    return final, metrics, hist


def plot_dataset(run_dirs, dataset: str, metric_png, objective_png) -> None:
    """Write the two figures for one dataset from its run folders."""
    runs = []
    for d in run_dirs:
        d = Path(d)
        if d.name == "final.json":
            d = d.parent
        runs.append(_load(d))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    metric = runs[0][0]["metric"] if runs else "test metric"
    for i, (final, m, _) in enumerate(runs):
        label = f"{final['algorithm']} (seed {final['seed']})"
        if metric in m.columns:
            ax.plot(m["time_s"], m[metric], marker="o", ms=3, ls=_style(i), color=_color(i),
                    label=label)
    ax.set_xlabel("training wall time (s)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(f"{dataset}: {metric.replace('_', ' ')} vs time")
    if ax.lines:
        ax.set_xscale("symlog", linthresh=0.1)
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(metric_png, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (final, m, hist) in enumerate(runs):
        label = f"{final['algorithm']} (seed {final['seed']})"
        src = hist if hist is not None and "objective" in hist.columns else m
        xcol = "iter" if "iter" in src.columns and src["iter"].notna().any() else "step"
        if "objective" in src.columns and src["objective"].notna().any():
            ax.plot(src[xcol], src["objective"], ls=_style(i), color=_color(i), label=label)
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(f"{dataset}: objective vs iteration")
    if ax.lines:
        ax.set_yscale("log") if all((ln.get_ydata() > 0).all() for ln in ax.lines) else None
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no algorithm recorded an objective", ha="center", va="center",
                transform=ax.transAxes)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(objective_png, dpi=110)
    plt.close(fig)
