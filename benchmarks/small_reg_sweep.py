"""Issue 25.2's sweep: does any DSG fit return a silent, meaningless model?

Standardized make_friedman1 (5,000 rows: 4,000 train / 1,000 test), DSGRegressor at
bandwidth x reg x variant x precondition; a fit is *silent* when it returns (no error) with
test R^2 < -1 or training R^2 < 0. One row per fit, appended as it finishes:

    python benchmarks/small_reg_sweep.py --out sweep.csv [--n-iter 100] [--reg 1e-6 1e-3 0.1 1]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-iter", type=int, default=100)
    ap.add_argument("--reg", nargs="+", type=float, default=[1e-6, 1e-3, 0.1, 1.0])
    ap.add_argument("--bandwidth", nargs="+", type=float, default=[0.1, 0.3, 1.0, 3.0])
    args = ap.parse_args(argv)
    from sklearn.datasets import make_friedman1
    from sklearn.metrics import r2_score
    from sklearn.preprocessing import StandardScaler

    from kernelscale.estimators.dsg import DSGRegressor

    X, y = make_friedman1(n_samples=5000, n_features=10, random_state=0)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    Xtr, ytr, Xte, yte = X[:4000], y[:4000], X[4000:], y[4000:]
    silent = 0
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bandwidth", "reg", "variant", "precondition", "outcome", "r2_train",
                    "r2_test", "seconds"])
        for bw, reg, variant, pre in itertools.product(
                args.bandwidth, args.reg, ["dsg", "udsg", "cdsg"], ["auto", False, True, "eigenpro"]):
            t0 = time.perf_counter()
            est = DSGRegressor(variant=variant, bandwidth=bw, reg=reg, precondition=pre,
                               n_iter=args.n_iter, random_state=0)
            try:
                est.fit(Xtr, ytr)
                r2tr, r2te = r2_score(ytr, est.predict(Xtr)), r2_score(yte, est.predict(Xte))
                bad = not (np.isfinite(r2te) and r2te >= -1 and r2tr >= 0)
                silent += bad
                outcome = "SILENT" if bad else "learned"
            except FloatingPointError:
                r2tr = r2te = float("nan")
                outcome = "error"
            w.writerow([bw, reg, variant, pre, outcome, f"{r2tr:.4f}", f"{r2te:.4f}",
                        f"{time.perf_counter() - t0:.1f}"])
            f.flush()
    print(f"silent fits: {silent}")


if __name__ == "__main__":
    main()
