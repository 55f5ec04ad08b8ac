"""Where the streamed methods stop on the `bayes` problem (issue 21, point 2), on the CPU:

* ``ridge``: ridge regression on D random Fourier features solved exactly (the normal equations,
  accumulated over row chunks), the best any optimiser on those D features can reach, at the
  bandwidth the "auto" selection picks and at half of it, for nu in {1e-6, 1e-4, 1e-2};
* ``eigenpro``: EigenPro-RF at its defaults but D (``--features``, "auto" its default), one line
  a pass (warm-started fits), with the tail average and/or the last iterate (``--average``);
* ``dsg``: DSG at its defaults, four passes, at several n: the excess error over the Bayes error
  of the test rows against n (the learning curve);
* ``rb``: RB-CG at its defaults but the number of grids R (``--features``), and at half the
  selected bandwidth.

The problem is benchmarks/gpu.py's and config/million.yaml's: x ~ N(0, I_20), noise 0.3
(``kernelscale.pipeline.data.bayes``). Test rows follow the training rows in the generator's
sequence. One line a result, e.g.::

    python benchmarks/bayes_capacity.py ridge 200000 --features 2000 6000
    python benchmarks/bayes_capacity.py eigenpro 200000 --features 2000 5460 --passes 4
    python benchmarks/bayes_capacity.py eigenpro 200000 --features auto --average on off
    python benchmarks/bayes_capacity.py dsg 12500 50000 200000
    python benchmarks/bayes_capacity.py rb 200000 --features 256 1024

Results: benchmarks/results/bayes-capacity-2026-11-26.md, eigenpro-rf-averaging.md.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from kernelscale import DSGClassifier
from kernelscale.estimators.eigenpro import EigenProClassifier
from kernelscale.estimators.random_binning import RBClassifier
from kernelscale.pipeline.data.bayes import bayes_params, bayes_rows, conditional_error

D_FEATURES = 20
NOISE = 0.3
SELECTED_SIGMA = 6.239264339248102  # "auto"'s choice on bayes_1m (EigenPro-RF, RFF-SGD, DSG)


def rows(n: int, n_test: int):
    P = bayes_params(n + n_test, D_FEATURES, NOISE, 0)
    X, y = bayes_rows(P, 0, n)
    Xt, yt = bayes_rows(P, n, n + n_test)
    return X, y, Xt, yt, float(conditional_error(P, Xt).mean())


def ridge(n, n_test, features, chunk=20000):
    X, y, Xt, yt, bayes = rows(n, n_test)
    print(f"n={n}: Bayes error of the {n_test} test rows {bayes:.4f}", flush=True)
    rng = np.random.default_rng(1)
    for D in features:
        for sigma in (SELECTED_SIGMA, SELECTED_SIGMA / 2):
            W = rng.standard_normal((D_FEATURES, D)) / sigma
            b = rng.uniform(0, 2 * np.pi, D)
            t = time.perf_counter()
            G, r = np.zeros((D, D)), np.zeros(D)
            for lo in range(0, n, chunk):
                Z = np.sqrt(2.0 / D) * np.cos(X[lo:lo + chunk] @ W + b)
                G += Z.T @ Z
                r += Z.T @ (2.0 * y[lo:lo + chunk] - 1)
            Zt = np.sqrt(2.0 / D) * np.cos(Xt @ W + b)
            for nu in (1e-6, 1e-4, 1e-2):
                c = np.linalg.solve(G + nu * n * np.eye(D), r)
                err = np.mean((Zt @ c > 0) != yt)
                print(f"ridge D={D} sigma={sigma:.2f} nu={nu:g}: test error {err:.4f} "
                      f"({time.perf_counter() - t:.0f} s)", flush=True)


def eigenpro(n, n_test, features, passes, averages=(True,)):
    X, y, Xt, yt, bayes = rows(n, n_test)
    print(f"n={n}: Bayes error of the {n_test} test rows {bayes:.4f}", flush=True)
    for D in features:
        for average in averages:
            est = EigenProClassifier(method="rff", n_components=D, random_state=0,
                                     n_iter="1 epochs", warm_start=True, average=average,
                                     engine={"n_jobs": 1})
            t = time.perf_counter()
            for p in range(passes):
                est.fit(X, y)
                err = np.mean(est.predict(Xt) != yt)
                print(f"EigenPro-RF D={est.n_components_} average={average} pass {p + 1}: test "
                      f"error {err:.4f} ({time.perf_counter() - t:.0f} s; eta {est.eta_:.4g}, "
                      f"m {est.batch_size_})", flush=True)


def dsg(ns, n_test, passes):
    for n in ns:
        X, y, Xt, yt, bayes = rows(n, n_test)
        X, Xt = X.astype(np.float32), Xt.astype(np.float32)
        est = DSGClassifier(random_state=0, n_iter="1 epochs", warm_start=True,
                            engine={"n_jobs": 1})
        t = time.perf_counter()
        for p in range(passes):
            est.fit(X, y)
            err = np.mean(est.predict(Xt) != yt)
            print(f"DSG n={n} pass {p + 1}: test error {err:.4f} (Bayes {bayes:.4f}, excess "
                  f"{err - bayes:.4f}); {time.perf_counter() - t:.0f} s; sigma "
                  f"{est.bandwidth_:.2f} B={est.batch_size_} F={est.block_size_} "
                  f"blocks {est.n_blocks_}", flush=True)


def rb(n, n_test, grids):
    X, y, Xt, yt, bayes = rows(n, n_test)
    print(f"n={n}: Bayes error of the {n_test} test rows {bayes:.4f}", flush=True)
    sigma = None
    for R in grids:
        for half in (False, True):
            if half and sigma is None:
                continue
            t = time.perf_counter()
            est = RBClassifier(n_components=R, bandwidth=sigma / 2 if half else "auto",
                               random_state=0, engine={"n_jobs": 1}).fit(X, y)
            sigma = sigma or est.bandwidth_
            err = np.mean(est.predict(Xt) != yt)
            print(f"RB-CG R={R} sigma={est.bandwidth_:.2f} reg={est.reg_:.3g}: test error "
                  f"{err:.4f} ({time.perf_counter() - t:.0f} s; {est.n_features_out_} bins, "
                  f"{est.n_iter_} CG iterations)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("ridge", "eigenpro", "dsg", "rb"))
    ap.add_argument("n", type=int, nargs="+", help="training rows (dsg: several)")
    ap.add_argument("--features", nargs="+", default=["2000"],
                    type=lambda v: v if v == "auto" else int(v))
    ap.add_argument("--average", nargs="+", default=["on"], choices=("on", "off"),
                    help="eigenpro: the tail average (on, the default) and/or the last iterate")
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--n-test", type=int, default=50000)
    a = ap.parse_args()
    if a.what == "ridge":
        ridge(a.n[0], a.n_test, a.features)
    elif a.what == "eigenpro":
        eigenpro(a.n[0], a.n_test, a.features, a.passes, [v == "on" for v in a.average])
    elif a.what == "rb":
        rb(a.n[0], a.n_test, a.features)
    else:
        dsg(a.n, a.n_test, a.passes)


if __name__ == "__main__":
    main()
