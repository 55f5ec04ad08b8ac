"""What the per-row f cache (``kernelscale.solvers.row_cache``) saves: the DSG family at its
registry defaults on a development set, with and without the cache, in the same run.

For each variant and each setting: fit time, test error, and the mean time of a step in each
epoch (from the fit's history): without the cache a step evaluates f over all blocks so far and
costs more every epoch; with it a step after the first epoch costs about one epoch of changes.
One thread per fit; the data are prepared as in ``benchmarks/realdata.py`` (its cache).

    python benchmarks/dsg_row_cache.py --dataset dev_fashion_mnist --variants dsg udsg cdsg \
        --out benchmarks/results/dsg-row-cache
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def fit_one(variant: str, task: str, data, use_cache: bool) -> dict:
    from kernelscale.pipeline.registry import make_estimator
    from kernelscale.solvers.dsg import DSGSolver

    X, y, Xt, yt = data
    DSGSolver.use_row_cache = use_cache
    est = make_estimator(variant, task, random_state=0)
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = np.asarray(est.predict(Xt))
    predict_s = time.perf_counter() - t0
    if task == "regression":
        score = float(np.sqrt(np.mean((pred.astype(np.float64) - yt) ** 2)))
    else:
        score = float(np.mean(pred != yt))
    # mean step time per epoch (history times are cumulative, one per step)
    times = np.diff(np.concatenate([[0.0], np.asarray(est.history_["time"], dtype=float)]))
    per_epoch = int(est._per_epoch)
    epochs = [float(times[i:i + per_epoch].mean()) for i in range(0, len(times), per_epoch)]
    return {"variant": variant, "row_cache": use_cache, "fit_s": round(fit_s, 2),
            "predict_s": round(predict_s, 2), "score": score, "n_iter": int(est.n_iter_),
            "n_blocks": int(est.n_blocks_), "steps_per_epoch": per_epoch,
            "step_s_by_epoch": json.dumps([round(v, 3) for v in epochs])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="dev_fashion_mnist")
    p.add_argument("--variants", nargs="*", default=["dsg", "udsg", "cdsg"])
    p.add_argument("--devdata", default=str(REPO.parent / "shared" / "devdata"))
    p.add_argument("--cache", default=str(REPO / "results" / "realdata" / "data"))
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "dsg-row-cache"))
    args = p.parse_args(argv)

    import threadpoolctl
    from realdata import load_devdata_specs, prepared

    threadpoolctl.threadpool_limits(1)
    spec = load_devdata_specs(Path(args.devdata))[args.dataset]
    X, y, Xt, yt, _ = prepared(args.dataset, spec, Path(args.cache))
    rows = []
    for variant in args.variants:
        for use in (False, True):
            rec = {"dataset": args.dataset, **fit_one(variant, spec["task"], (X, y, Xt, yt), use)}
            print(json.dumps(rec), flush=True)
            rows.append(rec)
    out = Path(args.out).with_suffix(".csv")
    new = not out.is_file()
    with out.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
