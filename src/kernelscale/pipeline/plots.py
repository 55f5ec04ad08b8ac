"""Per-dataset figures from run folders (matplotlib, Agg backend).

* ``metric_vs_time.png``: test error (RMSE for regression) against training wall time, one line
  per run, the trivial baseline and the best exact-kernel result as reference lines; beside it
  fit time and predict time (whole test set) per algorithm.
* ``objective_vs_time.png``: training objective (RB-CG: its CG residual) against training time,
  one panel per ``objective_signature``, titled with the values the runs used (what ``"auto"``
  chose); runs with no curve are named under the panels. Curves of >= 50 per-batch values are
  drawn as a running mean over the faint raw values; a head of first steps towering over the
  rest is left above the axis (``_robust_ylim``); the axis label says so.

Colours and markers are fixed per algorithm across all figures (``algorithm_style``).
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

from . import registry  # noqa: E402
from .chosen import format_value  # noqa: E402
from .tables import best_exact_kernel, exact_kernel_label  # noqa: E402
from .tracking import run_folders  # noqa: E402

# One colour and one marker per registered algorithm, the same in every figure (mostly
# Trubetskoy's 20 distinct colours); members of a family differ in hue and marker.
ALGORITHM_STYLES: dict[str, tuple[str, str]] = {
    "dsg": ("#4363d8", "o"), "udsg": ("#f58231", "s"), "cdsg": ("#3cb44b", "^"),
    "eigenpro": ("#e6194b", "D"), "eigenpro_rf": ("#911eb4", "v"), "kernel_sgd": ("#9a6324", "P"),
    "rb_cg": ("#f032e6", "X"), "rb_cd": ("#42d4f4", "*"),
    "rff_sgd": ("#6b8e23", "<"), "rff_svrg": ("#000075", ">"), "nystrom": ("#469990", "h"),
    "exact_krr": ("#a9a9a9", "d"), "libsvm": ("#000000", "p"),
    "pegasos": ("#800000", "8"), "norma": ("#e6ab02", "H"),
}
_MARKERS = tuple(m for _, m in ALGORITHM_STYLES.values())
_PALETTE = tuple(c for c, _ in ALGORITHM_STYLES.values())


def _stable_index(name: str, n: int) -> int:
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % n


def algorithm_style(name: str, estimator: str | None = None) -> tuple[str, str]:
    """(colour, marker) of algorithm ``name`` in every figure. A registered name has its own
    (``ALGORITHM_STYLES``); a config entry of a registered ``estimator`` under another name
    (``paper_dsg_medium``) takes that estimator's colour and a marker of its own name; any
    other name a colour and marker from a stable hash of the name."""
    if name in ALGORITHM_STYLES:
        return ALGORITHM_STYLES[name]
    if estimator in ALGORITHM_STYLES:
        colour, own = ALGORITHM_STYLES[estimator]
        others = [m for m in _MARKERS if m != own]  # never mistaken for the estimator itself
        return colour, others[_stable_index(name, len(others))]
    return (_PALETTE[_stable_index(name, len(_PALETTE))],
            _MARKERS[_stable_index(name[::-1], len(_MARKERS))])


def _style(run: dict) -> tuple[str, str]:
    return algorithm_style(run["final"]["algorithm"], run["final"].get("estimator"))


def _ticks_in(lo: float, hi: float, subs) -> int:
    return sum(lo <= k * 10.0 ** e <= hi for e in range(int(np.floor(np.log10(lo))),
                                                        int(np.ceil(np.log10(hi))) + 1)
               for k in subs)


def _tick_beyond(v: float, subs, up: bool) -> float:
    """The smallest k * 10^e (k in ``subs``) at or above ``v`` > 0 (``up``), else the largest at
    or below it."""
    e = int(np.floor(np.log10(v)))
    cands = [k * 10.0 ** x for x in ((e, e + 1) if up else (e - 1, e)) for k in subs]
    if up:
        return min(c for c in cands if c >= v * (1 - 1e-9))
    return max(c for c in cands if c <= v * (1 + 1e-9))


def _readable_log_axis(ax, axis: str = "x", dense: bool = False) -> None:
    """Log scale labelled with plain numbers (0.05, 2, 100) at 1-2-5 steps, else 1-2-3-5, else
    every digit (whichever first gives three labels; decades only beyond three decades), the
    limits widened to the next labelled value on each side. ``dense``: within 1.3 decades,
    labels at 1, 1.5, 2, 3, 4, 5, 7. A range under 1.5x stays linear, with plain labels."""
    getattr(ax, f"set_{axis}scale")("log")
    a = getattr(ax, f"{axis}axis")
    lo, hi = getattr(ax, f"get_{axis}lim")()
    if not (lo > 0 and hi > lo) or hi / lo < 1.5:
        getattr(ax, f"set_{axis}scale")("linear")
        if lo > 0 and hi > lo:  # plain numbers with the digits that differ, no offset label
            digits = min(15, int(np.ceil(-np.log10((hi - lo) / hi))) + 2)
            a.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.{digits}g}"))
        return
    if np.log10(hi) - np.log10(lo) > 3:  # finer labels would collide
        subs = (1.0,)
    else:
        subs = next((c for c in ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0))
                     if _ticks_in(lo, hi, c) >= 3), tuple(float(k) for k in range(1, 10)))
    lo, hi = _tick_beyond(lo, subs, up=False), _tick_beyond(hi, subs, up=True)
    getattr(ax, f"set_{axis}lim")(lo, hi)
    if dense and np.log10(hi / lo) <= 1.3:
        subs = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
    a.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
    a.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
    a.set_minor_locator(ticker.LogLocator(base=10, subs=np.arange(2, 10) * 1.0, numticks=30))
    a.set_minor_formatter(ticker.NullFormatter())


def _load(run_dir: Path) -> dict:
    final = json.loads((run_dir / "final.json").read_text())
    params = json.loads((run_dir / "params.json").read_text()) \
        if (run_dir / "params.json").is_file() else {}
    metrics = pd.read_csv(run_dir / "metrics.csv")
    hist = pd.read_csv(run_dir / "history.csv") if (run_dir / "history.csv").is_file() else None
    return {"final": final, "params": params, "metrics": metrics, "history": hist}


def _chosen(run: dict, key: str):
    """The value a run used for setting ``key``: what its estimator chose (``final.json``'s
    ``chosen``) where it recorded one, else the parameter as given."""
    chosen = run["final"].get("chosen") or {}
    return chosen[key] if key in chosen else run["params"].get("params", {}).get(key)


def objective_signature(run: dict) -> tuple:
    """What defines a run's training curve: the quantity (objective, or the relative residual
    of a CG solver) and the function it is of. Runs with equal signatures minimise the same
    function, so their values share an axis; anything else is drawn apart."""
    final, p = run["final"], run["params"].get("params", {})
    try:
        cls = registry.estimator_class(final["estimator"], final["task"]).__name__
    except Exception:  # an estimator that is no longer registered: its own group
        cls = f"{final['estimator']}"
    curve = _objective_curve(run)
    quantity = curve[2] if curve is not None else "objective"
    # reg, l1_reg and n_components as chosen ("auto" is not one function), the bandwidth as given
    keys = ("loss", "reg", "l1_reg", "kernel", "bandwidth", "n_components")
    return (cls, final.get("task"), quantity,
            *((k, str(p.get(k) if k in ("loss", "kernel", "bandwidth") else _chosen(run, k)))
              for k in keys if k in p))


# history.csv columns drawn in the objective figure, in order of preference: the objective, else
# the relative residual ||r|| / ||b|| that RB-CG records (CG reports only its residual)
CURVES = (("objective", "objective"), ("residual", "relative residual"))


def _objective_curve(run: dict):
    """(training seconds, values, quantity): per iteration from history.csv (``objective``, or
    a CG solver's ``residual``), with the training time of an iteration interpolated between the
    segment ends of metrics.csv; per segment from metrics.csv's ``objective`` otherwise."""
    m, h = run["metrics"], run["history"]
    for col, quantity in CURVES:
        if h is not None and col in h.columns and h[col].notna().any() \
                and "iter" in h.columns and "iter" in m.columns and m["iter"].notna().all():
            it_end = np.concatenate([[0.0], m["iter"].to_numpy(float)])
            t_end = np.concatenate([[0.0], m["time_s"].to_numpy(float)])
            if len(m) == 1 and "time" in h.columns and h["time"].notna().all():
                # one fit: the solver's own clock, shifted so that the set-up before its first
                # iteration (features, bandwidth selection) counts and it ends at the fit time
                t = h["time"].to_numpy(float)
                t = t + max(0.0, float(m["time_s"].iloc[-1]) - t[-1])
            else:
                t = np.interp(h["iter"].to_numpy(float), it_end, t_end)
            ok = (t > 0) & h[col].notna().to_numpy()
            return t[ok], h[col].to_numpy(float)[ok], quantity
    if "objective" in m.columns and m["objective"].notna().any():
        ok = m["objective"].notna() & (m["time_s"] > 0)
        return m["time_s"][ok].to_numpy(float), m["objective"][ok].to_numpy(float), "objective"
    return None


SMOOTH_MIN_POINTS, SMOOTH_FRACTION = 50, 0.05


def _running_mean(y, fraction: float = SMOOTH_FRACTION):
    """Centred running mean over ``fraction`` of the points (at least 5; the window shrinks at
    the ends)."""
    y = np.asarray(y, float)
    half = max(2, int(round(fraction * len(y))) // 2)
    c = np.concatenate([[0.0], np.cumsum(y)])
    i = np.arange(len(y))
    lo, hi = np.maximum(0, i - half), np.minimum(len(y), i + half + 1)
    return (c[hi] - c[lo]) / (hi - lo)


HEAD_FRACTION = 0.1  # the first steps left out of the objective axis's range when they tower


def _robust_ylim(curves, log: bool) -> tuple[float, float] | None:
    """y-range of the curves without the first ``HEAD_FRACTION`` of each one's points (1st to
    99th percentile of the rest; a curve of < 10 points counts whole), or None when the full
    range is not much wider. ``log``: whether the axis will be logarithmic (ranges are compared
    in decades then)."""
    curves = [y[np.isfinite(y)] for y in map(np.asarray, curves)]
    curves = [y for y in curves if len(y)]
    if not curves:
        return None
    rest = np.concatenate([y[int(np.ceil(HEAD_FRACTION * len(y))):] if len(y) >= 10 else y
                           for y in curves])
    lo, hi = np.percentile(rest, 1), np.percentile(rest, 99)
    full_lo, full_hi = min(y.min() for y in curves), max(y.max() for y in curves)
    if not hi > lo:
        return None
    # only a head that towers over the rest: a fast first descent (DSG, EigenPro) is shown
    if log and lo > 0 and full_lo > 0:  # compare decades
        span, full = np.log10(hi / lo), np.log10(full_hi / full_lo)
        return (lo / 1.15, hi * 1.15) if full > 3 * span + 1 else None
    if full_hi - full_lo <= 4 * (hi - lo):
        return None
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def _setting_text(members: list[dict], key: str, label: str) -> str | None:
    """``label=value`` with the value(s) the runs used (chosen by "auto" where it was), e.g.
    ``reg=3.12e-05``; a range when the members differ."""
    values = [v for r in members if (v := _chosen(r, key)) is not None]
    if not values:
        return None
    shown = list(dict.fromkeys(format_value(v) for v in values))
    if len(shown) == 1:
        return f"{label}={shown[0]}"
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) == len(values):
        return f"{label}={format_value(min(nums))}..{format_value(max(nums))}"
    return f"{label}={'/'.join(shown)}"


def _legend_outside(fig, ax_or_axes) -> None:
    handles = {}  # label -> its first handle, in order
    for ax in np.atleast_1d(ax_or_axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)


def _save(fig, png) -> None:
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_metric_vs_time(runs: list[dict], dataset: str, png) -> None:
    """``metric_vs_time.png`` (see the module docstring)."""
    _save(metric_figure(runs, dataset), png)


def metric_figure(runs: list[dict], dataset: str):
    """The figure of ``plot_metric_vs_time``."""
    metric = runs[0]["final"]["metric"] if runs else "test_metric"
    label = metric.replace("test_", "test ").replace("rmse", "RMSE")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4), width_ratios=[1.6, 1])
    algos = list(dict.fromkeys(r["final"]["algorithm"] for r in runs))
    styles = {r["final"]["algorithm"]: _style(r) for r in runs}
    for r in runs:
        if metric in r["metrics"].columns:
            c, marker = _style(r)
            ax.plot(r["metrics"]["time_s"], r["metrics"][metric], color=c, marker=marker, ms=5,
                    lw=1.4, label=r["final"]["algorithm"])
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
            _readable_log_axis(ax, "y", dense=True)

    # fit and predict time per algorithm (mean over seeds): a fast fit can hide a slow predict
    for i, a in enumerate(algos):
        fs = [r["final"] for r in runs if r["final"]["algorithm"] == a]
        fit_s = np.mean([f["train_time_s"] for f in fs])
        pred_s = np.nanmean([f.get("predict_time_s") or np.nan for f in fs])
        c, marker = styles[a]
        bx.barh(i - 0.2, fit_s, height=0.38, color=c)
        bx.plot([fit_s], [i - 0.2], marker=marker, color=c, ms=6, mec="black", mew=0.5)
        if np.isfinite(pred_s):
            bx.barh(i + 0.2, pred_s, height=0.38, color=c, alpha=0.45, hatch="///",
                    edgecolor="black", linewidth=0)
    bx.set_yticks(np.arange(len(algos)), algos, fontsize=8)
    bx.invert_yaxis()
    bx.set_xlabel("seconds (log)")
    bx.set_title("fit (solid) and predict (hatched) time")
    bx.grid(alpha=0.3, axis="x")
    if algos:
        _readable_log_axis(bx, "x")
    fig.tight_layout()
    _legend_outside(fig, ax)
    return fig


def plot_objective_vs_time(runs: list[dict], dataset: str, png) -> None:
    """``objective_vs_time.png`` (see the module docstring)."""
    _save(objective_figure(runs, dataset), png)


def objective_figure(runs: list[dict], dataset: str):
    """The figure of ``plot_objective_vs_time``: one panel per ``objective_signature``."""
    groups: dict[tuple, list[dict]] = {}
    silent = []  # runs that recorded no training curve (closed-form or one-shot solvers)
    for r in runs:
        if _objective_curve(r) is not None:
            groups.setdefault(objective_signature(r), []).append(r)
        else:
            silent.append(r["final"]["algorithm"])
    n = max(len(groups), 1)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    axes = axes.ravel()
    for ax, (sig, members) in zip(axes, groups.items(), strict=False):
        quantity = sig[2]
        curves, smoothed, positive = [], False, True
        for r in members:
            t, obj, _ = _objective_curve(r)
            colour, marker = _style(r)
            positive &= bool((obj > 0).all())
            if len(obj) >= SMOOTH_MIN_POINTS:  # per-batch estimates: the trend, and faintly all
                ax.plot(t, obj, color=colour, lw=0.6, alpha=0.3)
                obj, smoothed = _running_mean(obj), True
            ax.plot(t, obj, color=colour, lw=1.3, marker=marker, ms=4,
                    markevery=max(1, len(t) // 8), label=r["final"]["algorithm"])
            curves.append(obj)
        ax.set_title(panel_title(sig, members), fontsize=8)
        ylabel = quantity + (" ||r||/||b|| (CG)" if quantity == "relative residual" else "")
        notes = [f"running mean of {SMOOTH_FRACTION:.0%} of steps"] if smoothed else []
        ylim = _robust_ylim(curves, log=positive)
        if ylim is not None:
            ax.set_ylim(*ylim)
            notes.append(f"axis fits the steps after the first {HEAD_FRACTION:.0%}")
        ax.set_ylabel(ylabel + "".join(f"\n({n})" for n in notes), fontsize=8)
        ax.grid(alpha=0.3)
        _readable_log_axis(ax, "x")
        # a one-fit solver's iterations can fill too short a stretch for a log scale
        ax.set_xlabel("training time (s" + (", log)" if ax.get_xscale() == "log" else ")"),
                      fontsize=8)
        if positive:  # the faint per-step lines too: a log axis would pin zeros to its floor
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
    if silent and groups:  # said, not left for the reader to notice a missing panel
        fig.text(0.01, -0.01, "no objective recorded: " + ", ".join(dict.fromkeys(silent)),
                 fontsize=8, ha="left", va="top")
    _legend_outside(fig, axes)
    return fig


def panel_title(sig: tuple, members: list[dict]) -> str:
    """``names / class (loss=..., reg=<chosen>, σ=<chosen>)``: the values the runs used, not
    ``auto``."""
    names = ", ".join(dict.fromkeys(r["final"]["algorithm"] for r in members))
    loss = dict(sig[3:]).get("loss")
    setting = ", ".join(x for x in (
        None if loss is None else _setting_text(members, "loss", "loss"),  # what None chose
        _setting_text(members, "reg", "reg"), _setting_text(members, "l1_reg", "l1_reg"),
        _setting_text(members, "bandwidth", "σ")) if x)
    return f"{names}\n{sig[0]}" + (f" ({setting})" if setting else "")


def plot_dataset(run_dirs, dataset: str, metric_png, objective_png) -> None:
    """Write the two figures for one dataset from its run folders (or their final.json)."""
    runs = [_load(d) for d in run_folders(run_dirs)]
    runs.sort(key=lambda r: (r["final"]["algorithm"], r["final"]["seed"]))
    plot_metric_vs_time(runs, dataset, metric_png)
    plot_objective_vs_time(runs, dataset, objective_png)
