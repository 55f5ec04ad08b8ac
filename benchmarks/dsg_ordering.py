"""Paper 000's comparison (its Fig. 1 and 2): training objective against wall time for DSG, UDSG
and CDSG, here on the real devdata sets.

The three variants run at their registry defaults (``random_state=0``), so they solve the same
problem: the same automatically selected bandwidth and nu, the same loss, batch B and block F.
Each variant trains in warm-started segments (the iteration counter, step schedule and batches
continue across segments exactly as in one long fit); after each segment the benchmark, with the
clock stopped, measures

* the training objective's loss term: the mean loss over a fixed sample of up to 5,000 training
  rows (logistic / softmax / square, whichever the variant minimises; see below), and
* the test error (classification, %) or RMSE (regression).

Time is the process's CPU time with one BLAS thread, the prefetch thread included: on an idle
machine that is the wall time of a one-core fit, and unlike wall time it does not depend on what
else the machine runs. Segments of the three variants are interleaved all the same.

Why the loss and not the regularised objective: DSG's iterate is a sum of random cosine features,
which are not functions of the Gaussian RKHS, so ||f||_H of the iterate is not defined (paper 003
analyses it through its projection h_t); with nu = alpha / n the term is small at the solution
anyway. The loss term is the part of the objective that can be measured.
Paper 000 reports CDSG <= UDSG <= DSG in objective at equal time (UDSG can lose to DSG in the
worst case its Theorem 4 describes). Output: ``benchmarks/results/dsg-ordering-<tag>.{csv,png,md}``.

    python benchmarks/dsg_ordering.py --datasets dev_phoneme dev_satimage dev_kin40k
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread: CPU time = one-core wall time

import numpy as np  # noqa: E402
import realdata  # noqa: E402  (the race's data loading, same cache; a sibling module)

VARIANTS = ("dsg", "udsg", "cdsg")
COLOURS = {"dsg": "#1f77b4", "udsg": "#ff7f0e", "cdsg": "#2ca02c"}


def training_loss(est, X, y) -> float:
    """Mean loss of the fitted model on (X, y), the data term of paper 003's objective (eq. 1)."""
    u = np.asarray(est.decision_function(X) if hasattr(est, "classes_") else est.predict(X),
                   dtype=np.float64)
    u = u.reshape(len(u), -1)
    if hasattr(est, "classes_"):
        idx = np.searchsorted(est.classes_, y)
        Y = est._coder.encode_index(idx, np, np.float64)
    else:
        Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    return float(np.asarray(est.loss_.value(u, Y)).mean())


def run_dataset(name, spec, cache, segments: int, epochs: float, sample: int):
    X, y, X_te, y_te, _ = realdata.prepared(name, spec, cache)
    return run_arrays(name, spec["task"], (X, y, X_te, y_te), segments, epochs, sample)


def run_arrays(name, task, data, segments: int, epochs: float, sample: int, params=None):
    """``run_dataset`` on arrays already loaded (X, y, X_test, y_test), e.g. a subsample;
    ``params`` (e.g. the bandwidth and reg the three variants share) go to every variant."""
    from kernelscale.estimators.dsg import auto_iterations, auto_sizes
    from kernelscale.pipeline.registry import make_estimator

    X, y, X_te, y_te = data
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(X.shape[0], min(sample, X.shape[0]), replace=False))
    Xs, ys = X[rows], y[rows]
    ests, clock = {}, {}
    total = None
    records = []
    for seg in range(segments):
        for v in VARIANTS:
            if v not in ests:
                est = make_estimator(v, task, random_state=0, engine={"device": "cpu"},
                                     **(params or {}))
                est.set_params(warm_start=True)
                ests[v], clock[v] = est, 0.0
                if total is None:  # the registry default n_iter="auto" at the "auto" sizes
                    n_auto = auto_iterations(X.shape[0], auto_sizes(*X.shape)[1])
                    total = max(segments, int(round(epochs * n_auto)))
            est = ests[v]
            n_seg = total // segments + (1 if seg < total % segments else 0)
            est.set_params(n_iter=n_seg)
            t0 = time.process_time()
            est.fit(X, y)
            clock[v] += time.process_time() - t0
            pred = est.predict(X_te)
            score = (float(np.sqrt(np.mean((pred - y_te) ** 2))) if task == "regression"
                     else 100.0 * float(np.mean(pred != y_te)))
            rec = {"dataset": name, "task": task, "variant": v, "iter": int(est.n_iter_),
                   "n_blocks": int(est.n_blocks_), "fit_s": round(clock[v], 3),
                   "objective": training_loss(est, Xs, ys), "test": score,
                   "reg": est.reg_, "bandwidth": est.bandwidth_, "loss": est.loss_.name,
                   "kernel": est.kernel}
            records.append(rec)
            print(f"  {name:14s} {v:5s} iter {rec['iter']:4d}  {rec['fit_s']:8.1f} s  "
                  f"objective {rec['objective']:.5f}  test {score:.4f}", flush=True)
    return records


def plot(records, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["dataset"] for r in records))
    fig, axes = plt.subplots(2, len(names), figsize=(max(4.2 * len(names), 6.5), 6.4),
                             squeeze=False)
    for j, name in enumerate(names):
        rs = [r for r in records if r["dataset"] == name]
        task, loss = rs[0]["task"], rs[0]["loss"]
        for v in VARIANTS:
            pts = [r for r in rs if r["variant"] == v]
            t = [r["fit_s"] for r in pts]
            axes[0, j].plot(t, [r["objective"] for r in pts], "o-", ms=3, color=COLOURS[v],
                            label=v.upper())
            axes[1, j].plot(t, [r["test"] for r in pts], "o-", ms=3, color=COLOURS[v],
                            label=v.upper())
        axes[0, j].set_title(f"{name.removeprefix('dev_')} ({loss} loss)", fontsize=10)
        axes[0, j].set_ylabel("training loss (objective's data term)")
        axes[1, j].set_ylabel("test RMSE" if task == "regression" else "test error (%)")
        axes[1, j].set_xlabel("fit time (CPU s, one thread)")
        for ax in axes[:, j]:
            ax.grid(alpha=0.3)
    axes[0, 0].legend(frameon=False)
    fig.suptitle("DSG / UDSG / CDSG at their defaults: training loss and test error vs time",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ordering_table(records) -> str:
    """Each variant's last point, and every variant's loss at the shortest final time of the
    three (interpolated), which decides the order."""
    lines = ["| dataset | loss | iterations | DSG | UDSG | CDSG | at equal time "
             "(s) DSG / UDSG / CDSG | order at equal time |",
             "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["dataset"] for r in records):
        rs = [r for r in records if r["dataset"] == name]
        last = {v: [r for r in rs if r["variant"] == v][-1] for v in VARIANTS}
        t_eq = min(last[v]["fit_s"] for v in VARIANTS)
        at = {}
        for v in VARIANTS:
            pts = [r for r in rs if r["variant"] == v]
            at[v] = float(np.interp(t_eq, [r["fit_s"] for r in pts],
                                    [r["objective"] for r in pts]))
        order = " ≤ ".join(v.upper() for v in sorted(VARIANTS, key=lambda v: at[v]))
        cells = [f"{last[v]['objective']:.4f} ({last[v]['fit_s']:.0f} s, "
                 f"{'RMSE' if rs[0]['task'] == 'regression' else 'err %'} "
                 f"{last[v]['test']:.3f})" for v in VARIANTS]
        lines.append(f"| {name} | {rs[0]['loss']} | {last['dsg']['iter']} | " + " | ".join(cells)
                     + f" | {t_eq:.0f}: " + " / ".join(f"{at[v]:.4f}" for v in VARIANTS)
                     + f" | {order} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devdata", default=str(realdata.DEFAULT_DEVDATA))
    p.add_argument("--datasets", nargs="*", default=["dev_phoneme", "dev_satimage", "dev_kin40k"])
    p.add_argument("--segments", type=int, default=10)
    p.add_argument("--epochs", type=float, default=2.0,
                   help="iterations as a multiple of the default n_iter='auto'")
    p.add_argument("--sample", type=int, default=5000, help="training rows for the objective")
    p.add_argument("--cache", default=str(realdata.REPO / "results" / "realdata" / "data"))
    p.add_argument("--out", default=str(realdata.REPO / "benchmarks" / "results"))
    p.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    args = p.parse_args(argv)
    if args.segments < 1 or args.epochs <= 0 or args.sample < 1:
        p.error("--segments, --epochs and --sample must be positive")
    specs = realdata.load_devdata_specs(Path(args.devdata))
    unknown = [d for d in args.datasets if d not in specs]
    if unknown:
        p.error(f"unknown dataset(s) {unknown}; known: {sorted(specs)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"dsg-ordering-{args.tag}"
    records = []
    for name in args.datasets:
        records += run_dataset(name, specs[name], Path(args.cache), args.segments, args.epochs,
                               args.sample)
        with open(f"{stem}.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(records[0]))
            w.writeheader()
            w.writerows(records)
        plot(records, Path(f"{stem}.png"))
        Path(f"{stem}.md").write_text(
            "# DSG / UDSG / CDSG: training loss vs time (paper 000, Fig. 1)\n\n"
            "Loss on a fixed 5,000-row training sample; time = CPU seconds of a one-thread fit "
            "(see the script's docstring for both choices).\n\n"
            f"Command: `python benchmarks/dsg_ordering.py {' '.join(argv or sys.argv[1:])}`\n\n"
            + ordering_table(records) + f"\n![plot]({Path(f'{stem}.png').name})\n")
    print(f"wrote {stem}.csv / .png / .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
