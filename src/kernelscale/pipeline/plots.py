"""Per-dataset figures from run folders (matplotlib, Agg backend: no display needed).

* ``metric_vs_time.png``: test error (RMSE for regression) against training wall time, one colour
  per algorithm (every seed a line), the trivial baseline and the best exact-kernel result as
  reference lines; beside it fit time and predict time (whole test set) per algorithm.
* ``objective_vs_time.png``: training objective against training time, one panel per group of
  runs whose objectives are the same function (same estimator class, loss, regulariser, kernel,
  bandwidth and feature count, see ``objective_signature``): different losses or regularisers on
  one axis would compare numbers that mean different things.

Colours are fixed per algorithm name across all figures (``algorithm_color``); legends sit
outside the axes; log axes are labelled at 1-2-5 steps.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import ticker  # noqa: E402

from .tables import best_exact_kernel, exact_kernel_label  # noqa: E402

_PALETTE = plt.get_cmap("tab20").colors  # 20 colours: more than the registered algorithms


def algorithm_color(name: str):
    """The colour of algorithm ``name`` in every figure: registered names take the registry's
    order (distinct colours for all of them), other names a stable hash of the name."""
    from . import registry

    names = list(registry.ALGORITHMS)
    if name in names and names.index(name) < len(_PALETTE):
        return _PALETTE[names.index(name)]
    h = int(hashlib.sha1(name.encode()).hexdigest(), 16)
    return _PALETTE[h % len(_PALETTE)]


def _ticks_in(lo: float, hi: float, subs) -> int:
    return sum(lo <= k * 10.0 ** e <= hi for e in range(int(np.floor(np.log10(lo))),
                                                        int(np.ceil(np.log10(hi))) + 1)
               for k in subs)


def _readable_log_axis(ax, axis: str = "x") -> None:
    """Log scale labelled with plain numbers (0.05, 2, 100) at 1-2-5 steps, or at every digit
    when that leaves fewer than three labels, instead of one 10^k label per decade that leaves a
    short range with a single tick. A range too narrow for a log scale (< 1.5x: e.g. an objective
    that does not move) stays linear, with an offset label."""
    getattr(ax, f"set_{axis}scale")("log")
    a = getattr(ax, f"{axis}axis")
    lo, hi = getattr(ax, f"get_{axis}lim")()
    if not (lo > 0 and hi > lo) or hi / lo < 1.5:
        getattr(ax, f"set_{axis}scale")("linear")
        if lo > 0 and hi > lo:  # plain numbers with the digits that differ, no offset label
            digits = min(15, int(np.ceil(-np.log10((hi - lo) / hi))) + 2)
            a.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.{digits}g}"))
        return
    decades = np.log10(hi) - np.log10(lo)
    if decades > 3:  # 1-2-5 labels would collide
        subs = (1.0,)
    elif _ticks_in(lo, hi, (1.0, 2.0, 5.0)) >= 3:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = tuple(float(k) for k in range(1, 10))
    a.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
    a.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
    a.set_minor_locator(ticker.LogLocator(base=10, subs=np.arange(2, 10) * 1.0, numticks=30))
    a.set_minor_formatter(ticker.NullFormatter())


def _load(run_dir: Path) -> dict:
    run_dir = Path(run_dir)
    if run_dir.name == "final.json":
        run_dir = run_dir.parent
    final = json.loads((run_dir / "final.json").read_text())
    params = json.loads((run_dir / "params.json").read_text()) \
        if (run_dir / "params.json").is_file() else {}
    metrics = pd.read_csv(run_dir / "metrics.csv")
    hist = pd.read_csv(run_dir / "history.csv") if (run_dir / "history.csv").is_file() else None
    return {"final": final, "params": params, "metrics": metrics, "history": hist}


def objective_signature(run: dict) -> tuple:
    """What defines a run's training objective. Runs with equal signatures minimise the same
    function, so their objective values share an axis; anything else is drawn apart."""
    from . import registry

    final, p = run["final"], run["params"].get("params", {})
    try:
        cls = registry.estimator_class(final["estimator"], final["task"]).__name__
    except Exception:  # an estimator that is no longer registered: its own group
        cls = f"{final['estimator']}"
    keys = ("loss", "reg", "kernel", "bandwidth", "n_components")
    return (cls, final.get("task"), *((k, str(p.get(k))) for k in keys if k in p))


def _objective_curve(run: dict):
    """(training seconds, objective): per iteration from history.csv, with the training time of
    an iteration interpolated between the segment ends of metrics.csv; per segment otherwise."""
    m, h = run["metrics"], run["history"]
    if h is not None and "objective" in h.columns and h["objective"].notna().any() \
            and "iter" in h.columns and "iter" in m.columns and m["iter"].notna().all():
        it_end = np.concatenate([[0.0], m["iter"].to_numpy(float)])
        t_end = np.concatenate([[0.0], m["time_s"].to_numpy(float)])
        t = np.interp(h["iter"].to_numpy(float), it_end, t_end)
        ok = (t > 0) & h["objective"].notna().to_numpy()
        return t[ok], h["objective"].to_numpy(float)[ok]
    if "objective" in m.columns and m["objective"].notna().any():
        ok = m["objective"].notna() & (m["time_s"] > 0)
        return m["time_s"][ok].to_numpy(float), m["objective"][ok].to_numpy(float)
    return None


def _legend_outside(fig, ax_or_axes, extra=()) -> None:
    handles, labels = {}, []
    for ax in np.atleast_1d(ax_or_axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    for h, lab in extra:
        handles[lab] = h
        labels.append(lab)
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)


def plot_metric_vs_time(runs: list[dict], dataset: str, png) -> None:
    metric = runs[0]["final"]["metric"] if runs else "test_metric"
    label = metric.replace("test_", "test ").replace("rmse", "RMSE")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4), width_ratios=[1.6, 1])
    algos = list(dict.fromkeys(r["final"]["algorithm"] for r in runs))
    for r in runs:
        f, m = r["final"], r["metrics"]
        if metric not in m.columns:
            continue
        c = algorithm_color(f["algorithm"])
        ax.plot(m["time_s"], m[metric], color=c, marker="o", ms=3, lw=1.4,
                label=f["algorithm"])
    base = next((r["final"] for r in runs if r["final"].get("baseline_value") is not None), None)
    if base is not None:
        ax.axhline(base["baseline_value"], color="black", ls="--", lw=1,
                   label=f"trivial baseline: {base.get('baseline', '')}")
    best = best_exact_kernel(r["final"] for r in runs)  # the tables' reference row, too
    if best is not None:
        ax.axhline(best["value"], color="0.4", ls=":", lw=1.2,
                   label=exact_kernel_label(best["algorithm"]))
    ax.set_xlabel("training wall time (s, log)")
    ax.set_ylabel(f"{label} (lower is better)")
    ax.set_title(f"{dataset}: {label} vs training time")
    ax.grid(alpha=0.3, which="major")
    if ax.lines:
        _readable_log_axis(ax, "x")
        ys = np.concatenate([np.asarray(ln.get_ydata(), float) for ln in ax.lines])
        ys = ys[np.isfinite(ys)]
        # a baseline far above the curves would squash them on a linear axis
        if len(ys) and ys.min() > 0 and ys.max() / ys.min() > 4:
            _readable_log_axis(ax, "y")

    # fit and predict time per algorithm (mean over seeds): a fast fit can hide a slow predict
    rows = []
    for a in algos:
        fs = [r["final"] for r in runs if r["final"]["algorithm"] == a]
        rows.append((a, np.mean([f["train_time_s"] for f in fs]),
                     np.nanmean([f.get("predict_time_s") or np.nan for f in fs])))
    y = np.arange(len(rows))
    for i, (a, fit_s, pred_s) in enumerate(rows):
        c = algorithm_color(a)
        bx.barh(i - 0.2, fit_s, height=0.38, color=c)
        if np.isfinite(pred_s):
            bx.barh(i + 0.2, pred_s, height=0.38, color=c, alpha=0.45, hatch="///",
                    edgecolor="black", linewidth=0)
    bx.set_yticks(y, [a for a, _, _ in rows], fontsize=8)
    bx.invert_yaxis()
    bx.set_xlabel("seconds (log)")
    bx.set_title("fit (solid) and predict (hatched) time")
    bx.grid(alpha=0.3, axis="x")
    if rows:
        _readable_log_axis(bx, "x")
    fig.tight_layout()
    _legend_outside(fig, ax)
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_objective_vs_time(runs: list[dict], dataset: str, png) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        if _objective_curve(r) is not None:
            groups.setdefault(objective_signature(r), []).append(r)
    n = max(len(groups), 1)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    axes = axes.ravel()
    for ax, (sig, members) in zip(axes, groups.items(), strict=False):
        for r in members:
            t, obj = _objective_curve(r)
            ax.plot(t, obj, color=algorithm_color(r["final"]["algorithm"]), lw=1.3,
                    label=r["final"]["algorithm"])
        names = ", ".join(dict.fromkeys(r["final"]["algorithm"] for r in members))
        setting = ", ".join(f"{k}={'default' if v == 'None' else v}" for k, v in sig[2:]
                            if k in ("loss", "reg"))
        ax.set_title(f"{names}\n{sig[0]}" + (f" ({setting})" if setting else ""), fontsize=8)
        ax.set_xlabel("training time (s, log)", fontsize=8)
        ax.set_ylabel("objective", fontsize=8)
        ax.grid(alpha=0.3)
        _readable_log_axis(ax, "x")
        if all((ln.get_ydata() > 0).all() for ln in ax.lines):
            _readable_log_axis(ax, "y")
        ax.tick_params(labelsize=7)
    for ax in axes[len(groups):]:
        ax.axis("off")
    if not groups:
        axes[0].text(0.5, 0.5, "no algorithm recorded an objective", ha="center", va="center",
                     transform=axes[0].transAxes)
    fig.suptitle(f"{dataset}: training objective vs time (one panel per objective: same "
                 "estimator, loss and regulariser)", fontsize=9)
    fig.tight_layout()
    _legend_outside(fig, axes)
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_dataset(run_dirs, dataset: str, metric_png, objective_png) -> None:
    """Write the two figures for one dataset from its run folders (or their final.json)."""
    runs = [_load(Path(d)) for d in run_dirs]
    runs.sort(key=lambda r: (r["final"]["algorithm"], r["final"]["seed"]))
    plot_metric_vs_time(runs, dataset, metric_png)
    plot_objective_vs_time(runs, dataset, objective_png)
