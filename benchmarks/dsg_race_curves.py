"""Issue 20, point 2: test error against fit time on one core, a curve per method.

The DSG family, EigenPro-RF and RFF-SGD at their registry defaults, each fit cut into
``--segments`` warm-started segments of its "auto" iterations (the same model as one fit; the
error is measured after each segment, outside the fit time); Nystrom, which is not iterative,
at a quarter, a half and all of its "auto" centres (one fit each). Data: the development sets
prepared as in ``benchmarks/realdata.py`` (its cache). One thread per fit.

    python benchmarks/dsg_race_curves.py --datasets dev_fashion_mnist dev_kin40k dev_protein \
        --out benchmarks/results/dsg-race-curves
    python benchmarks/dsg_race_curves.py --datasets dev_kin40k dev_protein --methods dsg udsg cdsg \
        --keep-from benchmarks/results/dsg-race-curves-regression.csv \
        --out benchmarks/results/dsg-race-curves-regression   # refit only the DSG family

writes ``<out>.csv`` and ``<out>.png`` (one panel per dataset; SVC's / exact KRR's score as a
line where ``--references`` gives it).
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

ITERATIVE = ("dsg", "udsg", "cdsg", "eigenpro_rf", "rff_sgd")


def _auto_epochs(est) -> float | None:
    """Epochs of the estimator's n_iter="auto" (None for the DSG family: its own rule)."""
    from kernelscale.estimators import eigenpro

    if est.__class__.__module__.endswith("eigenpro"):
        return float(eigenpro.AUTO_EPOCHS)
    return getattr(type(est), "_auto_epochs", None)


def _segment_params(name, est, n, d, segments):
    if name in ("dsg", "udsg", "cdsg"):
        from kernelscale.estimators.dsg import auto_iterations, auto_sizes, new_block_share

        total = auto_iterations(n, auto_sizes(n, d)[1], new_block_share(name))
        return {"n_iter": -(-total // segments)}
    return {"n_iter": f"{_auto_epochs(est) / segments:g} epochs"}


def curve(name, task, data, segments, on_fit=None, **params):
    """(fraction, fit seconds, score) points of method ``name``; ``params`` (e.g. the bandwidth
    and reg every compared method shares) go to each estimator, ``on_fit(est)`` sees each fit."""
    from kernelscale.pipeline.registry import make_estimator

    X, y, Xt, yt = data
    n, d = X.shape

    def score(est):
        p = np.asarray(est.predict(Xt))
        return float(np.sqrt(np.mean((p - yt) ** 2))) if task == "regression" else float(np.mean(p != yt))

    points = []
    if name == "nystrom":
        from kernelscale.estimators._kernel_common import n_features_rule

        m = n_features_rule(n, "auto", floor=500)  # Nystrom's n_components="auto"
        for frac in (0.25, 0.5, 1.0):
            est = make_estimator(name, task, random_state=0, **params,
                                 **({} if frac == 1.0 else {"n_components": max(100, int(frac * m))}))
            t = time.perf_counter()
            est.fit(X, y)
            points.append((frac, time.perf_counter() - t, score(est)))
            if on_fit:
                on_fit(est)
        return points
    base = make_estimator(name, task, random_state=0)
    est = make_estimator(name, task, random_state=0, warm_start=True, **params,
                         **_segment_params(name, base, n, d, segments))
    total = 0.0
    for s in range(1, segments + 1):
        t = time.perf_counter()
        est.fit(X, y)
        total += time.perf_counter() - t
        points.append((s / segments, total, score(est)))
        if on_fit:
            on_fit(est)
    return points


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=["dev_fashion_mnist", "dev_kin40k", "dev_protein"])
    p.add_argument("--methods", nargs="+", default=["dsg", "udsg", "cdsg", "eigenpro_rf", "rff_sgd", "nystrom"])
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--references", nargs="*", default=[], metavar="DATASET=SCORE",
                   help="SVC(C=10) error or exact KRR RMSE to draw as a line")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "dsg-race-curves"))
    p.add_argument("--keep-from", metavar="CSV",
                   help="an earlier curves file: its rows for the methods not in --methods are "
                        "kept (to refit only some methods)")
    p.add_argument("--devdata", default=None, help="devdata.yaml (default: realdata's)")
    p.add_argument("--cache", default=str(REPO / "results" / "realdata" / "data"))
    args = p.parse_args(argv)

    import realdata
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    specs = realdata.load_devdata_specs(Path(args.devdata) if args.devdata
                                        else realdata.DEFAULT_DEVDATA)
    cache = Path(args.cache)
    kept = []
    if args.keep_from:
        with open(args.keep_from, newline="") as f:
            kept = [dict(r, fraction=float(r["fraction"]), fit_s=float(r["fit_s"]),
                         score=float(r["score"])) for r in csv.DictReader(f)
                    if r["method"] not in args.methods and r["dataset"] in args.datasets]
    rows = []
    for ds in args.datasets:
        spec = specs[ds]
        Xtr, ytr, Xte, yte, _ = realdata.prepared(ds, spec, cache)
        task = "regression" if spec["task"] == "regression" else "classification"
        rows += [r for r in kept if r["dataset"] == ds]
        for name in args.methods:
            for frac, fit_s, sc in curve(name, task, (Xtr, ytr, Xte, yte), args.segments):
                row = dict(dataset=ds, method=name, fraction=frac, fit_s=round(fit_s, 2),
                           score=round(sc, 5), metric="rmse" if task == "regression" else "error")
                rows.append(row)
                print(row, flush=True)
            out = Path(args.out)
            with open(out.with_suffix(".csv"), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
    plot(rows, dict(r.split("=") for r in args.references), Path(args.out).with_suffix(".png"))
    return 0


def plot(rows, refs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernelscale.pipeline.plots import algorithm_style

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, ds in zip(axes[0], datasets, strict=True):
        sub = [r for r in rows if r["dataset"] == ds]
        for m in dict.fromkeys(r["method"] for r in sub):
            pts = [r for r in sub if r["method"] == m]
            c, mk = algorithm_style(m)  # each method's colour and marker in every figure
            ax.plot([r["fit_s"] for r in pts], [r["score"] for r in pts], marker=mk, color=c, label=m)
        if ds in refs:
            ax.axhline(float(refs[ds]), color="k", ls="--", lw=1, label="SVC / exact KRR")
        ax.set_xscale("log")
        ax.set_xlabel("fit time, one core (s)")
        ax.set_ylabel("test RMSE" if sub[0]["metric"] == "rmse" else "test error")
        ax.set_title(ds.removeprefix("dev_"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
