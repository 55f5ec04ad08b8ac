"""Parallel randomized coordinate descent speed-up vs threads, RB vs Fourier (Wu et al., Fig. 6).

Runs the same L1-regularised CD (``kernelscale.solvers.rb_cd.l1_cd``, Alg. 2) for a fixed number of
epochs (tol = 0, so every run does the same work) on
* RB features (sparse: R non-zeros per row out of D columns), and
* dense random Fourier features of the same kernel and the same R (stored as a dense CSC matrix so
  the identical CD code runs on both),
with tau = 1, 2, ... threads, and prints time, speed-up over tau = 1, the objective reached, and the
paper's predicted speed-up tau / (1 + (R - 1)(tau - 1)/(D - 1)) (eq. 29).

    .venv/bin/python benchmarks/cd_speedup.py [--n 20000] [--grids 64] [--epochs 20] [--threads 1 2]

The box this runs on may be shared: the load average is printed with the results, and the column
``cpu/wall`` (process CPU seconds over wall seconds) shows how many cores a run actually got --
a tau = 2 run with cpu/wall near 1 did not get two cores and its speed-up says nothing.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import make_classification

from kernelscale.kernels import FourierBlocks, make_kernel, resolve_bandwidth
from kernelscale.kernels.random_binning import RandomBinning
from kernelscale.solvers.rb_cd import l1_cd


def predicted(tau, R, D):
    return tau / (1 + (R - 1) * (tau - 1) / max(D - 1, 1))


def speedups(X, y, R, threads=(1, 2), epochs=20, reg=1e-4, loss="squared_hinge", repeats=3):
    """CD on RB and on dense Fourier features of the same Laplacian kernel and R, at each thread
    count (y in {-1, +1}); prints the table and returns one row per (features, tau)."""
    sigma = resolve_bandwidth("median", X, "cityblock")
    Z_rb = RandomBinning("laplacian", sigma, R, 0).fit_transform(X)
    Z_rf = sp.csc_matrix(FourierBlocks(make_kernel("laplacian", sigma), X.shape[1], R, 0)
                         .features(X, 0))
    print(f"n={X.shape[0]} d={X.shape[1]} R={R} sigma={sigma:.3g} loss={loss} lambda={reg} "
          f"epochs={epochs} cpus={os.cpu_count()}")
    l1_cd(Z_rb[:200], y[:200], reg, loss=loss, max_iter=1, n_jobs=2)  # numba warm-up

    print(f"{'features':>9} {'D':>7} {'nnz':>9} {'tau':>4} {'time s':>8} {'speedup':>8} "
          f"{'eq.29':>6} {'cpu/wall':>8} {'objective':>11}")
    rows = []
    for name, Z in (("RB", Z_rb), ("Fourier", Z_rf)):
        D = Z.shape[1]
        base = None
        for tau in threads:
            best, obj, util = np.inf, None, 0.0
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                _, hist, _ = l1_cd(Z, y, reg, loss=loss, tol=0.0, max_iter=epochs,
                                   n_jobs=tau, seed=0)
                wall = time.perf_counter() - t0
                if wall < best:
                    best, util = wall, (time.process_time() - c0) / wall
                obj = hist["objective"][-1]
            base = best if base is None else base
            rows.append(dict(features=name, D=D, nnz=int(Z.nnz), tau=tau, sigma=sigma, nu=reg,
                             loss=loss, epochs=epochs, wall_s=best,
                             speedup=base / best, predicted=predicted(tau, R, D),
                             cpu_per_wall=util, objective=float(obj)))
            print(f"{name:>9} {D:>7} {Z.nnz:>9} {tau:>4} {best:>8.3f} {base / best:>8.2f} "
                  f"{predicted(tau, R, D):>6.2f} {util:>8.2f} {obj:>11.6f}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--grids", type=int, default=64, help="R for both feature maps")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--reg", type=float, default=1e-4)
    ap.add_argument("--loss", default="squared_hinge")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3, help="best-of repeats per setting")
    args = ap.parse_args(argv)

    X, y = make_classification(args.n, args.d, n_informative=args.d // 2, random_state=0)
    speedups(X, 2.0 * y - 1.0, args.grids, args.threads, args.epochs, args.reg, args.loss,
             args.repeats)
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
