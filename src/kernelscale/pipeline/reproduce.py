"""``kernelscale reproduce`` (``make reproduce``): the seed papers' headline claims on the real
data at hand, each as a figure that states the claim, the measured ratio and whether it holds,
plus a verdict table.

Writes ``<out>/verdicts.md``, ``verdicts.csv`` and one MLflow run per claim. A claim is a
function ``claim(datasets, max_train, out, **options) -> [verdict, ...]`` (one per dataset:
``{paper, claim, dataset, n_train, n_train_full, measured, holds, rule, problem, note}``,
``holds`` True / False / None = not measurable here) writing ``<out>/<claim>.csv`` and ``.png``;
its measurements are in ``reproduce_runs``, its rule in ``RULES``. Every method of a comparison
gets one kernel, bandwidth, nu and budget (``Problem``), read back from the fitted methods and
checked by ``same_problem``. Data: a development set of ``--devdata`` (prepared, cached in
``--cache``) or a dataset prepared in ``results/data/<name>``, training rows subsampled to
``max_train`` and test rows to ``--max-test`` (seeded). One BLAS thread unless the environment
sets ``OPENBLAS_NUM_THREADS``. The claims (numbered as in the project's list of seed papers):

* paper003_dsg_equal_time: DSG against RFF-SGD and Nystrom at equal fit time (Dai, Xie, He,
  Liang, Raj, Balcan, Song, Scalable Kernel Methods via Doubly Stochastic Gradients, NIPS 2014).
* paper000_ordering: training loss against CPU time, CDSG <= UDSG <= DSG (Fast Doubly Stochastic
  Kernel Machines).
* paper002_rb_vs_rff: RB (CG) against RFF ridge at equal R, lambda = 0.01 of (Z^T Z + lambda I);
  paper002_cd_speedup: CD on RB features with 2 threads against eq. 29 (Wu, Chen, Yen, Yan,
  Revisiting Random Binning Features: Fast Convergence and Strong Parallelizability, KDD 2016).
* paper004_eigenpro_epochs: EigenPro's epochs to exact KRR's test error + slack against kernel
  SGD (Ma, Belkin, Diving into the Shallows: a Computational Perspective on Large-Scale Shallow
  Learning, NIPS 2017).

    kernelscale reproduce --config config/reproduce.yaml --out results/reproduce
    kernelscale reproduce --claims 003 000 --datasets dev_phoneme --max-train 2000
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import textwrap
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np

from . import devdata as devdata_module
from .bench import log_run, markdown_table
from .plots import _readable_log_axis, algorithm_style  # plots sets the Agg backend
from .train_run import write_csv

EXPERIMENT = "kernelscale-reproduce"
CACHE = Path("results") / "realdata" / "data"  # the development sets, prepared
PREPARED = Path("results") / "data"  # the pipeline's prepared datasets (config/papers.yaml's too)
MARK = {True: "HOLDS", False: "DOES NOT HOLD", None: "NOT MEASURABLE"}


# ---- data
class Data(SimpleNamespace):
    """task ('binary' / 'multiclass' / 'regression'), X, y, Xt, yt, n_full (training rows before
    subsampling), name."""

    @property
    def kind(self) -> str:
        return "regression" if self.task == "regression" else "classification"

    def size_note(self) -> str:
        sub = "" if len(self.X) == self.n_full else f" of {self.n_full:,} (subsampled)"
        return f"n_train {len(self.X):,}{sub}, n_test {len(self.Xt):,}"


def prepared_path(name) -> Path | None:
    """``results/data/<name>`` when the pipeline has prepared that dataset (meta.json there)."""
    path = PREPARED / name
    return path if (path / "meta.json").is_file() else None


def load(name, max_train, max_test=None, devdata=None, cache=None, seed=0) -> Data:
    """Dataset ``name`` (a devdata set, else one the pipeline prepared, read by seeded row
    indices from its zarr store), training rows subsampled to ``max_train``, test rows to
    ``max_test``; SystemExit for a name that is neither."""
    specs = devdata_module.load_devdata_specs(Path(devdata or devdata_module.default_devdata()))
    if name in specs:
        X, y, Xt, yt, _ = devdata_module.prepared(name, specs[name], Path(cache or CACHE))
        n_full = X.shape[0]
        X, y = devdata_module.subsample(X, y, max_train, seed)
        Xt, yt = devdata_module.subsample(Xt, yt, max_test, seed + 1)
        return Data(task=specs[name]["task"], X=X, y=y, Xt=Xt, yt=yt, n_full=n_full, name=name)
    if prepared_path(name) is None:
        raise SystemExit(f"reproduce: unknown dataset {name!r}: neither a devdata set "
                         f"({', '.join(sorted(specs))}) nor prepared in {PREPARED}")
    from ..stream import take_rows
    from .data.store import open_prepared

    meta, arrays = open_prepared(PREPARED / name)

    def rows(X, y, cap, s):
        n = int(X.shape[0])
        idx = (np.arange(n) if not cap or cap >= n else
               np.sort(np.random.default_rng(s).choice(n, int(cap), replace=False)))
        return np.asarray(take_rows(X, idx), dtype=np.float64), np.asarray(take_rows(y, idx))

    X, y = rows(arrays["X_train"], arrays["y_train"], max_train, seed)
    Xt, yt = rows(arrays["X_test"], arrays["y_test"], max_test, seed + 1)
    return Data(task=meta["task"], X=X, y=y, Xt=Xt, yt=yt, n_full=int(arrays["X_train"].shape[0]),
                name=name)


# ---- the problem each method of a comparison solves
class Problem(NamedTuple):
    """What one method of a comparison was given. ``nu``: the per-sample weight of the
    regulariser in (nu/2)||f||^2 + (1/N) sum loss (every estimator's ``reg_``; for coordinate
    descent ``l1_reg_``, of ||w||_1, Wu et al. 2016, eq. 23; 0 = none); the ridge lambda of
    (Z^T Z + lambda I) and KernelRidge's alpha are N nu (``kernelscale.params.reg_and_ridge``).
    ``budget``: what the comparison holds equal (R, epochs, fit time)."""

    kernel: str
    sigma: float
    nu: float
    loss: str
    budget: str


def effective(est, budget: str) -> Problem:
    """The problem a fitted kernelscale estimator solved: its resolved ``bandwidth_``, ``reg_``
    (``l1_reg_``) and loss (the ridge solvers' is the square loss)."""
    loss = (est.loss_.name if hasattr(est, "loss_") else
            est._loss_name() if hasattr(est, "_loss_name") else "square")
    nu = getattr(est, "reg_", None)
    nu = getattr(est, "l1_reg_", None) if nu is None else nu
    return Problem(est.kernel, float(est.bandwidth_), float(nu or 0.0), loss, budget)


def same_problem(problems: dict, n: int, differ=()) -> str:
    """One line stating the problem every method of ``problems`` (method -> ``Problem``) was
    given, on ``n`` training rows; ValueError naming the field and the two methods when they were
    not given the same one. ``differ``: fields the comparison declares unequal (a baseline with
    no other loss), listed per method in the line instead."""
    (first, p0), *rest = problems.items()
    for field in Problem._fields:
        for m, p in rest:
            a, b = getattr(p0, field), getattr(p, field)
            same = np.isclose(a, b, rtol=1e-9, atol=0) if isinstance(a, float) else a == b
            if field not in differ and not same:
                raise ValueError(f"unequal comparison: {first} has {field}={a!r}, {m} has "
                                 f"{field}={b!r}")
    line = (f"{p0.kernel} kernel, sigma {p0.sigma:.4g}, nu {p0.nu:.3g} (N nu = {n * p0.nu:.3g})"
            f"; {p0.budget}")
    for field in differ:
        line += f"; {field}: " + ", ".join(f"{m} {getattr(p, field)}" for m, p in problems.items())
    if "loss" not in differ:
        line += f"; {p0.loss} loss"
    return line


# each claim's verdict rule, printed beside the verdict (filled with the claim's options)
RULES = {
    "paper003_dsg_equal_time": "HOLDS when DSG's final test error <= every baseline's best error "
                               "within DSG's fit time (a baseline with no model that fast is "
                               "beaten)",
    "paper000_ordering": "HOLDS when, at the shortest final CPU time of the three, CDSG <= UDSG "
                         "(1 + {tol:g}) and UDSG <= DSG (1 + {tol:g}) in training loss",
    "paper002_rb_vs_rff": "HOLDS when RB's test error <= RFF's at more than half of the R grid",
    "paper002_cd_speedup": "HOLDS when RB's 2-thread speed-up >= 0.75 x eq. 29's; NOT MEASURABLE "
                           "when the 2-thread run got < 1.6 cores",
    "paper004_eigenpro_epochs": "HOLDS when EigenPro reaches exact KRR's test error + {slack:g} in "
                                "fewer epochs than kernel SGD (not reached in {max_epochs} = "
                                "more)",
}


def shared_sigma_nu(d: Data, kernel="gaussian") -> tuple[float, str]:
    """The bandwidth and reg every method of a comparison is given: the library's "auto" rule
    (``kernels.selection.select``, seed 0) run once on the training set, as each estimator's
    own "auto" would; reg as "alpha/n" (nu = alpha / N, the same bits as "auto")."""
    from ..kernels.selection import select

    classify = d.kind == "classification"
    Y = np.searchsorted(np.unique(d.y), d.y) if classify else d.y
    sigma, alpha = select(d.X, Y, kernel, classify, seed=0)
    return float(sigma), f"{alpha!r}/n"


def _axis(ax, xlabel, ylabel, grid=True):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if grid:
        ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _finish(out, stem, rows, fig):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"{stem}.csv", rows)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=110)
    plt.close(fig)
    print(f"wrote {out / stem}.csv / .png", flush=True)


def _claim(stem, claim, rule, figure_note, out, datasets, load_args, measure, draw, nrows=1,
           one_thread=True):
    """Claim ``stem`` on each dataset: ``measure(d) -> (csv rows, (measured, holds, note,
    problem), panel)`` (under one thread when ``one_thread``), then one figure column per dataset
    drawn by ``draw(axes_column, d, panel)``; writes ``<out>/<stem>.csv`` / ``.png`` and returns
    the verdicts. ``load_args``: ``load``'s (max_train, max_test, devdata, cache)."""
    from threadpoolctl import threadpool_limits

    paper, rows, panels = stem[5:8], [], []
    with threadpool_limits(1) if one_thread else nullcontext():
        for name in datasets:
            d = load(name, *load_args)
            r, (measured, holds, note, problem), panel = measure(d)
            rows += r
            panels.append((d, panel, {
                "paper": paper, "claim": claim, "dataset": d.name, "n_train": len(d.X),
                "n_train_full": d.n_full, "measured": measured, "holds": holds, "rule": rule,
                "problem": problem, "note": note}))
    width = max(5.2 * len(panels), 7)
    fig, axes = plt.subplots(nrows, len(panels), figsize=(width, 4.3 * nrows), squeeze=False)
    fig.suptitle(textwrap.fill(f"Paper {paper}: {claim} ({figure_note})", int(width * 12)),
                 fontsize=10)
    for j, (d, panel, v) in enumerate(panels):
        draw(axes[:, j], d, panel)
        # wrapped to the panel's width (5.2 in at 8 pt): a long measurement is not cut at the edge
        axes[0, j].set_title(f"{d.name.removeprefix('dev_')}: {MARK[v['holds']]}\n"
                             f"{textwrap.fill(v['measured'], 80)}\n{d.size_note()}", fontsize=8)
    _finish(out, stem, rows, fig)
    return [v for *_, v in panels]


# Each method's name in the library's registry, for its colour and marker (``plots.algorithm_style``);
# Wu et al.'s RFF ridge and CD on Fourier features take rff_sgd's colour with a marker of their own.
STYLE_NAMES = {"RB+CG": ("rb_cg", None), "RFF": ("rff_ridge", "rff_sgd"),
               "RB": ("rb_cd", None), "Fourier": ("rff_cd", "rff_sgd"),
               "EigenPro": ("eigenpro", None), "SGD": ("kernel_sgd", None)}


def method_style(method: str) -> dict:
    """``color`` and ``marker`` of ``method`` (a registry name such as "dsg", or a label of
    ``STYLE_NAMES``) for ``ax.plot``: fixed per method across every figure of the project."""
    colour, marker = algorithm_style(*STYLE_NAMES.get(method, (method.lower(), None)))
    return {"color": colour, "marker": marker}


# ---- paper003 (Dai et al. 2014): DSG vs random features and Nystrom at equal time
def decide_003(points: dict) -> tuple[str, bool, str]:
    """``points``: method -> [(fit_s, score), ...] with "dsg" among them. DSG's last point against
    each baseline's best score at fit time <= DSG's (lower is better)."""
    t_dsg, e_dsg = points["dsg"][-1]
    best, notes = {}, []
    for m, pts in points.items():
        if m == "dsg":
            continue
        within = [s for t, s in pts if t <= t_dsg]
        if within:
            best[m] = min(within)
        else:
            notes.append(f"{m}: no model within {t_dsg:.1f} s (fastest {min(t for t, _ in pts):.1f} s)")
    rival = min(best.values()) if best else None
    holds = rival is None or e_dsg <= rival
    cells = ", ".join(f"{m} {s:.4f}" for m, s in best.items())
    ratio = f"; DSG / best rival = {e_dsg / rival:.3f}" if rival else ""
    measured = f"at {t_dsg:.1f} s: DSG {e_dsg:.4f}" + (f" vs {cells}" if cells else "") + ratio
    return measured, holds, "; ".join(notes)


def paper003_dsg_equal_time(datasets, max_train, out, *, max_test=None, segments=4,
                            methods=("dsg", "rff_sgd", "nystrom"), devdata=None, cache=None):
    from . import reproduce_runs

    def measure(d):
        sigma, reg = shared_sigma_nu(d)
        metric = "test RMSE" if d.task == "regression" else "test error"
        rows, pts, fitted = [], {}, {}
        for m in methods:
            seen = []  # every fitted model of the curve
            pts[m] = [(t, s) for _, t, s in reproduce_runs.curve(
                m, d.kind, (d.X, d.y, d.Xt, d.yt), segments, bandwidth=sigma, reg=reg,
                on_fit=seen.append)]
            fitted[m] = got = effective(seen[-1], "equal fit time, one thread")
            rows += [dict(dataset=d.name, method=m, fit_s=round(t, 3), score=round(s, 5),
                          metric=metric, n_train=len(d.X), sigma=got.sigma, nu=got.nu,
                          loss=got.loss) for t, s in pts[m]]
            print(f"  003 {d.name} {m}: {pts[m]}", flush=True)
        # Nystrom ridge has only the square loss; DSG / RFF-SGD keep their classification loss
        problem = same_problem(fitted, len(d.X), differ=("loss",))
        return rows, (*decide_003(pts), problem), (pts, metric)

    def draw(axes, d, panel):
        pts, metric = panel
        for m, p in pts.items():
            axes[0].plot([t for t, _ in p], [s for _, s in p], "-", ms=4, label=m,
                         **method_style(m))
        axes[0].axvline(pts["dsg"][-1][0], color="k", ls=":", lw=1)
        _readable_log_axis(axes[0], "x")
        _axis(axes[0], "fit time, one thread (s)", metric)

    return _claim("paper003_dsg_equal_time", "DSG reaches a lower test error than RFF-SGD and "
                  "Nystrom at equal fit time", RULES["paper003_dsg_equal_time"], "one thread; "
                  "DSG's time = its last point, dotted", out, datasets,
                  (max_train, max_test, devdata, cache), measure, draw)


# ---- paper000 (Fast Doubly Stochastic Kernel Machines): objective vs time, CDSG <= UDSG <= DSG
def decide_000(curves: dict, tol: float) -> tuple[str, bool, float, dict]:
    """``curves``: variant -> [(time, objective), ...] for dsg, udsg, cdsg. Objectives at the
    shortest final time (interpolated); holds when CDSG <= UDSG (1 + tol) <= DSG (1 + tol)^2,
    i.e. each step of the order within ``tol`` relative."""
    t_eq = min(c[-1][0] for c in curves.values())
    at = {v: float(np.interp(t_eq, [t for t, _ in c], [o for _, o in c]))
          for v, c in curves.items()}
    r1, r2 = at["cdsg"] / at["udsg"], at["udsg"] / at["dsg"]
    holds = bool(r1 <= 1 + tol and r2 <= 1 + tol)
    measured = (f"at {t_eq:.1f} s: CDSG/UDSG = {r1:.3f}, UDSG/DSG = {r2:.3f} "
                f"(tolerance {tol:.0%})")
    return measured, holds, t_eq, at


def paper000_ordering(datasets, max_train, out, *, max_test=None, segments=6, epochs=1.0,
                      sample=5000, tol=0.01, devdata=None, cache=None):
    from .reproduce_runs import VARIANTS, run_arrays

    def measure(d):
        sigma, reg = shared_sigma_nu(d)
        recs = run_arrays(d.name, d.task, (d.X, d.y, d.Xt, d.yt), segments, epochs, sample,
                          params=dict(bandwidth=sigma, reg=reg))
        problem = same_problem({r["variant"]: Problem(r["kernel"], r["bandwidth"], r["reg"],
                                                      r["loss"], "equal CPU time, one thread")
                                for r in recs}, len(d.X))
        curves = {v: [(r["fit_s"], r["objective"]) for r in recs if r["variant"] == v]
                  for v in VARIANTS}
        measured, holds, t_eq, _ = decide_000(curves, tol)
        note = (f"loss term on {min(sample, len(d.X))} training rows; CPU time of one-thread "
                "fits")
        return recs, (measured, holds, note, problem), (curves, t_eq)

    def draw(axes, d, panel):
        curves, t_eq = panel
        for var, c in curves.items():
            axes[0].plot([t for t, _ in c], [o for _, o in c], "-", ms=4, label=var.upper(),
                         **method_style(var))
        axes[0].axvline(t_eq, color="k", ls=":", lw=1)
        _axis(axes[0], "fit time (CPU s, one thread)", "training loss (objective's data term)")

    return _claim("paper000_ordering", "training objective at equal time: CDSG <= UDSG <= DSG",
                  RULES["paper000_ordering"].format(tol=tol), f"tolerance {tol:.0%}; one "
                  "thread, CPU time; equal time dotted", out, datasets,
                  (max_train, max_test, devdata, cache), measure, draw)


# ---- paper002 (Wu et al. 2016): RB vs RFF at equal R; CD's parallel speed-up
def decide_002_rb(rows) -> tuple[str, bool]:
    """``rows`` of ``reproduce_runs.compare`` for one dataset: RB <= RFF at a majority of R."""
    rb = {r["R"]: r["test_error"] for r in rows if r["method"] == "RB+CG"}
    rf = {r["R"]: r["test_error"] for r in rows if r["method"] == "RFF"}
    Rs = sorted(rb)
    wins = sum(rb[R] <= rf[R] for R in Rs)
    ratio = float(np.median([rb[R] / rf[R] for R in Rs if rf[R] > 0] or [np.nan]))
    measured = f"RB <= RFF at {wins}/{len(Rs)} R; median RB/RFF error = {ratio:.3f}"
    return measured, wins * 2 > len(Rs)


def paper002_rb_vs_rff(datasets, max_train, out, *, max_test=None,
                       grids=(16, 32, 64, 128, 256), reg="0.01/n", tol=1e-3, devdata=None,
                       cache=None):
    from .reproduce_runs import compare

    def measure(d):
        r = compare(d.name, d.kind, d.X, d.Xt, d.y, d.yt, list(grids), reg, tol)
        for x in r:
            x["dataset"] = x.pop("data")
        for R in grids:
            problem = same_problem({x["method"]: Problem("laplacian", x["sigma"], x["nu"],
                                                         "square", f"R = {x['R']}")
                                    for x in r if x["R"] == R}, len(d.X))
        note = (f"ridge (RB by CG to tol {tol:g}, RFF solved directly); error: relative RMSE "
                "(regression) or error rate")
        problem = problem.replace(f"R = {grids[-1]}", "R = " + ", ".join(map(str, grids)))
        return r, (*decide_002_rb(r), note, problem), r

    def draw(axes, d, r):
        for meth in ("RB+CG", "RFF"):
            pts = [x for x in r if x["method"] == meth]
            for ax, x in zip(axes, ("R", "fit_s"), strict=True):
                ax.plot([p[x] for p in pts], [p["test_error"] for p in pts], "-", label=meth,
                        **method_style(meth))
        axes[0].set_xscale("log", base=2)
        _readable_log_axis(axes[1], "x")
        for ax, xlabel in zip(axes, ("R (grids / features)", "fit time (s)"), strict=True):
            _axis(ax, xlabel, "relative RMSE" if d.task == "regression" else "test error")

    return _claim("paper002_rb_vs_rff", "Random Binning reaches a lower test error than random "
                  "Fourier features at equal R", RULES["paper002_rb_vs_rff"], "top: error vs R; "
                  "bottom: vs fit time, one thread", out, datasets,
                  (max_train, max_test, devdata, cache), measure, draw, nrows=2)


def decide_002_cd(rows, min_cores=1.6, share=0.75) -> tuple[str, bool | None, str]:
    """``rows`` of ``reproduce_runs.speedups`` with tau 1 and 2: RB's 2-thread speed-up against
    ``share`` x eq. 29; None when the 2-thread RB run got fewer than ``min_cores`` cores."""
    rb2 = next(r for r in rows if r["features"] == "RB" and r["tau"] == 2)
    f2 = next((r for r in rows if r["features"] == "Fourier" and r["tau"] == 2), None)
    measured = (f"RB speed-up {rb2['speedup']:.2f}x with 2 threads (eq. 29: "
                f"{rb2['predicted']:.2f}x; cpu/wall {rb2['cpu_per_wall']:.2f})"
                + (f"; Fourier {f2['speedup']:.2f}x" if f2 else ""))
    if rb2["cpu_per_wall"] < min_cores:
        return measured, None, (f"the box gave the 2-thread run only {rb2['cpu_per_wall']:.2f} "
                                f"cores (load average {os.getloadavg()[0]:.1f}, "
                                f"{os.cpu_count()} CPUs): speed-up not measurable here")
    return measured, bool(rb2["speedup"] >= share * rb2["predicted"]), ""


def paper002_cd_speedup(datasets, max_train, out, *, max_test=None, R=64, epochs=20, reg=1e-4,
                        repeats=2, devdata=None, cache=None):
    from .reproduce_runs import speedups

    def measure(d):
        if d.task != "binary":
            raise SystemExit(f"reproduce: paper002_cd_speedup needs a binary dataset, {d.name} "
                             f"is {d.task}")
        y = np.where(d.y == np.unique(d.y)[-1], 1.0, -1.0)
        r = speedups(d.X, y, R, (1, 2), epochs, reg, "squared_hinge", repeats)
        for x in r:
            x["dataset"] = d.name
        problem = same_problem({f"{x['features']} x{x['tau']}": Problem(
            "laplacian", x["sigma"], x["nu"], x["loss"], f"R = {R}, {x['epochs']} epochs, L1")
            for x in r}, len(d.X))
        return r, (*decide_002_cd(r), problem), r

    def draw(axes, d, r):
        ax = axes[0]
        for k, feats in enumerate(("RB", "Fourier")):
            pts = [x for x in r if x["features"] == feats]
            ax.bar([x["tau"] + (k - 0.5) * 0.35 for x in pts], [x["speedup"] for x in pts],
                   width=0.35, label=f"{feats} (measured)", color=method_style(feats)["color"])
        rb = [x for x in r if x["features"] == "RB"]
        ax.plot([x["tau"] for x in rb], [x["predicted"] for x in rb], "k^--", label="RB eq. 29")
        ax.set_xticks([x["tau"] for x in rb])
        _axis(ax, "threads", "speed-up over 1 thread", grid=False)

    return _claim("paper002_cd_speedup", "coordinate descent on RB features speeds up with "
                  "threads (>= 0.75 x eq. 29, 2 threads)", RULES["paper002_cd_speedup"],
                  f"R={R}, {epochs} epochs, best of {repeats}", out, datasets,
                  (max_train, max_test, devdata, cache), measure, draw, one_thread=False)


# ---- paper004 (Ma and Belkin 2017): EigenPro vs plain kernel SGD, epochs and time to a target
def decide_004(ep: dict, sgd: dict, max_epochs: int) -> tuple[str, bool]:
    """``ep`` / ``sgd``: {"epochs": int | None, "time": float | None} to the test target."""
    def fmt(v, unit=""):
        if v is None:
            return f"not reached in {max_epochs} epochs" if unit else f">{max_epochs}"
        return f"{v:.1f}{unit}" if unit else str(v)

    e, s = ep["epochs"], sgd["epochs"]
    holds = e is not None and (s is None or e < s)
    ratio = (f"{s / e:.1f}x" if (e and s) else (f">{max_epochs / e:.1f}x" if e else "-"))
    measured = (f"epochs to target: EigenPro {fmt(e)}, SGD {fmt(s)} ({ratio}); time "
                f"{fmt(ep['time'], ' s')} vs {fmt(sgd['time'], ' s')}")
    return measured, holds


def paper004_eigenpro_epochs(datasets, max_train, out, *, max_test=None, max_epochs=15,
                             k=160, M=2000, batch=256, alpha=1.0, slack=0.005, devdata=None,
                             cache=None):
    from ..kernels import resolve_bandwidth
    from .reproduce_runs import eigenpro_against_sgd

    args = SimpleNamespace(max_epochs=max_epochs, k=k, M=M, batch=batch, alpha=alpha, slack=slack)

    def measure(d):
        if d.task == "regression":
            raise SystemExit(f"reproduce: paper004 runs on classification data, {d.name} is not")
        sigma = resolve_bandwidth("median", d.X, "euclidean", seed=0)  # one sigma for both
        res = eigenpro_against_sgd(d.name, d.X, d.y, d.Xt, d.yt, sigma, args)
        runs, target = res["results"], res["test_target"]
        # no ridge (nu 0): both iterate the square loss towards the interpolant
        problem = same_problem({lab: Problem("gaussian", r["sigma"], 0.0, "square",
                                             f"epochs of batch {r['batch']}")
                                for lab, r in runs.items()}, len(d.X))
        rows = [dict(dataset=d.name, method=lab, epoch=e, fit_s=round(t, 3), train_mse=m,
                     test_error=err, target=target)
                for lab, r in runs.items() for e, t, m, err in r["curve"]]
        hit = {lab: {"epochs": r["hit"]["test"], "time": r["hit_s"]["test"]}
               for lab, r in runs.items()}
        note = (f"target = exact KRR (alpha={alpha}) test error {target - slack:.4f} + {slack}; "
                f"EigenPro k={runs['EigenPro']['k']} (asked {k}), M={M}, batch {batch}; time "
                "includes EigenPro's set-up")
        return rows, (*decide_004(hit["EigenPro"], hit["SGD"], max_epochs), note, problem), (
            {lab: r["curve"] for lab, r in runs.items()}, target)

    def draw(axes, d, panel):
        curves, target = panel
        for label, c in curves.items():
            for ax, x in zip(axes, (0, 1), strict=True):  # test error vs epochs, vs fit time
                ax.plot([p[x] for p in c], [p[3] for p in c], "-", ms=4, label=label,
                        **method_style(label))
        for ax, xlabel in zip(axes, ("epochs", "fit time, one thread (s)"), strict=True):
            ax.axhline(target, color="k", ls="--", lw=1)
            _axis(ax, xlabel, "test error")

    return _claim("paper004_eigenpro_epochs", "EigenPro reaches the test-error target in fewer "
                  "epochs than plain kernel SGD", RULES["paper004_eigenpro_epochs"].format(
                      slack=slack, max_epochs=max_epochs), f"target dashed: exact KRR + {slack}; "
                  "top: vs epochs, bottom: vs fit time", out, datasets,
                  (max_train, max_test, devdata, cache), measure, draw, nrows=2)


CLAIMS = {f.__name__: f for f in (paper003_dsg_equal_time, paper000_ordering, paper002_rb_vs_rff,
                                  paper002_cd_speedup, paper004_eigenpro_epochs)}
VERDICT_COLUMNS = ("paper", "claim", "dataset", "n train", "measured", "verdict", "rule",
                   "problem (every compared method)", "note")


def select(names) -> list[str]:
    """Claim names from full names or the numbers in them ("002" = both paper002 claims)."""
    out = []
    for n in names:
        hit = [c for c in CLAIMS if c == n or c.startswith(f"paper{n}_")]
        if not hit:
            raise SystemExit(f"reproduce: unknown claim {n!r}; known: {', '.join(CLAIMS)}")
        out += [c for c in hit if c not in out]
    return out


def verdicts_markdown(verdicts, header="") -> str:
    def cells(v):
        n = f"{v['n_train']:,}" + (f" of {v['n_train_full']:,}"
                                   if v["n_train_full"] != v["n_train"] else "")
        return (v["paper"], v["claim"], v["dataset"], n, v["measured"], f"**{MARK[v['holds']]}**",
                v["rule"], v["problem"], v["note"])

    rows = [dict(zip(VERDICT_COLUMNS, cells(v), strict=True)) for v in verdicts]
    return header + "\n" + markdown_table(rows, VERDICT_COLUMNS) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kernelscale reproduce``."""
    p.add_argument("--config", help="config/reproduce.yaml: claims, datasets and sizes")
    p.add_argument("--claims", nargs="+", help="claim names or paper numbers (003 000 002 004)")
    p.add_argument("--datasets", nargs="+", help="override every claim's datasets")
    p.add_argument("--max-train", type=int, help="override every claim's training subsample")
    p.add_argument("--max-test", type=int, default=None)
    p.add_argument("--out", default=str(Path("results") / "reproduce"))
    p.add_argument("--devdata", default=None,
                   help="folder of devdata.yaml (default: $KERNELSCALE_DEVDATA, else "
                        "../shared/devdata)")
    p.add_argument("--cache", default=str(CACHE), help="prepared development sets")
    p.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db",
                   help="MLflow URI ('' for none)")
    p.add_argument("--experiment", default=None)


def main(argv=None) -> int:
    """``kernelscale reproduce`` from Python: ``main(["--claims", "002", ...])``."""
    p = argparse.ArgumentParser(prog="kernelscale reproduce", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    argv = list(sys.argv[1:] if argv is None else argv)
    return run(p.parse_args(argv), "kernelscale reproduce " + " ".join(argv))


def run(a, command: str | None = None) -> int:
    """Run the claims of ``add_arguments``'s options ``a``; ``command`` goes into verdicts.md
    (default: this process's command line)."""
    from threadpoolctl import threadpool_limits

    # one BLAS thread unless the environment chose (numpy's BLAS read its count when loaded)
    chosen = "OPENBLAS_NUM_THREADS" in os.environ
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    command = command or "kernelscale " + " ".join(sys.argv[1:])
    cfg = {}
    if a.config:
        import yaml

        cfg = yaml.safe_load(Path(a.config).read_text()) or {}
    claims_cfg = cfg.get("claims") or {}
    names = select(a.claims) if a.claims else list(claims_cfg) or list(CLAIMS)
    max_test = a.max_test if a.max_test is not None else cfg.get("max_test")
    experiment = a.experiment or cfg.get("experiment") or EXPERIMENT
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    started, load0 = time.perf_counter(), os.getloadavg()[0]
    verdicts = []
    for name in names:
        opts = dict(claims_cfg.get(name) or {})
        listed, optional = opts.pop("datasets", None), opts.pop("optional_datasets", None) or []
        datasets, max_train = a.datasets, a.max_train or opts.pop("max_train", 5000)
        opts.pop("max_train", None)
        if not datasets:  # config/papers.yaml's datasets join once the pipeline prepared them
            for o in optional:
                if prepared_path(o) is None:
                    print(f"reproduce: {name}: {o} skipped (not prepared: run the pipeline "
                          f"with config/papers.yaml to download it)", flush=True)
            datasets = list(listed or []) + [o for o in optional if prepared_path(o)]
        if not datasets:
            raise SystemExit(f"reproduce: no datasets for {name} (config or --datasets)")
        t = time.perf_counter()
        print(f"== {name}: {datasets}, max_train {max_train}, {opts}", flush=True)
        with nullcontext() if chosen else threadpool_limits(1, user_api="blas"):
            vs = CLAIMS[name](datasets, max_train, out, max_test=max_test, devdata=a.devdata,
                              cache=a.cache, **opts)
        wall = time.perf_counter() - t
        for v in vs:
            v["claim_id"], v["wall_s"] = name, round(wall, 1)
        verdicts += vs
        if a.tracking_uri:
            settings = dict(opts, datasets=datasets, max_train=max_train, max_test=max_test,
                            wall_s=round(wall, 1), machine=platform.node(), cpus=os.cpu_count())
            tags = {"paper": vs[0]["paper"] if vs else "", "claim": name,
                    "rule": vs[0]["rule"] if vs else ""}
            tags |= {f"{k}.{v['dataset']}": v[k] for v in vs for k in ("measured", "problem")}
            rid = log_run(a.tracking_uri, experiment, name, settings, tags=tags,
                          metrics={f"holds.{v['dataset']}": float(v["holds"]) for v in vs
                                   if v["holds"] is not None},
                          files=[out / f"{name}.csv", out / f"{name}.png"])
            print(f"MLflow run {rid} ({experiment}, {a.tracking_uri})", flush=True)
        print(f"== {name} done in {wall:.0f} s", flush=True)
    wall = time.perf_counter() - started
    write_csv(out / "verdicts.csv", verdicts)
    header = (f"# Seed papers' claims on devdata ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})"
              f"\n\n{platform.node()}, {os.cpu_count()} CPUs, load average {load0:.1f} before / "
              f"{os.getloadavg()[0]:.1f} after; wall time {wall:.0f} s. Training sets subsampled "
              f"(n train column); test sets to {max_test or 'all'} rows. Figures: "
              + ", ".join(f"[{n}]({n}.png)" for n in names) + ".\n\n"
              f"Command: `{command}`\n")
    (out / "verdicts.md").write_text(verdicts_markdown(verdicts, header))
    print(f"wrote {out / 'verdicts.md'} ({wall:.0f} s)")
    return 0
