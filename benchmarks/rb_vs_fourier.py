"""Random Binning vs random Fourier features at equal R (Wu et al., KDD 2016, Fig. 5 in small).

Both approximate the same Laplacian kernel exp(-||x - x'||_1 / sigma) (sigma: median L1 distance) and
are trained as ridge regression of the same objective (nu/2)||w||^2 + (1/N) sum 1/2 (f(x_i) - y_i)^2:
one ``--reg`` in the library's convention (nu, or "x/n" for nu = x / N), converted once into the
ridge lambda = N nu of both systems (paper 002's lambda = 0.01 of (Z^T Z + lambda I): "0.01/n").
RB by CG on the sparse N x D matrix (``RBRegressor`` / ``RBClassifier``, given ``reg`` itself), Fourier
by a direct solve of (Phi^T Phi + lambda I) W = Phi^T Y on the dense N x R matrix from
``kernelscale.kernels.FourierBlocks``. Classification is one-vs-all ridge on {-1, +1} targets for
both. Prints test error and train time per R; ``--out`` writes a CSV (with each method's nu and
lambda).

    .venv/bin/python benchmarks/rb_vs_fourier.py [--grids 16 32 64 128 256 512] [--out rb_vs_rff.csv]
"""

from __future__ import annotations

import argparse
import csv
import time

import numpy as np
from sklearn.datasets import load_digits, make_friedman1
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelscale.estimators._params import reg_and_ridge
from kernelscale.estimators.random_binning import RBClassifier, RBRegressor
from kernelscale.kernels import FourierBlocks, make_kernel, resolve_bandwidth


def datasets(seed: int):
    """(name, task, X_train, X_test, y_train, y_test)."""
    X, y = make_friedman1(n_samples=10000, n_features=10, noise=0.5, random_state=seed)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed)
    yield "friedman1 (n=8000, d=10)", "regression", Xtr, Xte, ytr, yte
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    yield "digits (n=1257, d=64, 10 classes)", "classification", Xtr, Xte, ytr, yte


def test_error(task, y, pred):
    if task == "regression":
        return float(np.sqrt(np.mean((pred - y) ** 2)) / np.std(y))  # relative RMSE
    return float(np.mean(pred != y))  # error rate


def fourier_ridge(task, Xtr, Xte, ytr, sigma, R, ridge, seed):
    """Ridge on R random Fourier features of the Laplacian kernel, solved directly:
    (P^T P + ``ridge`` I) W = P^T Y, ``ridge`` = N nu (``reg_and_ridge``)."""
    t0 = time.perf_counter()
    blocks = FourierBlocks(make_kernel("laplacian", sigma), Xtr.shape[1], R, seed)
    P = blocks.features(Xtr, 0)
    if task == "regression":
        mu = ytr.mean()
        Y = (ytr - mu)[:, None]
    else:
        classes = np.unique(ytr)
        Y = np.where(ytr[:, None] == classes[None, :], 1.0, -1.0)
    W = np.linalg.solve(P.T @ P + ridge * np.eye(R), P.T @ Y)
    fit_s = time.perf_counter() - t0
    S = blocks.features(Xte, 0) @ W
    pred = S[:, 0] + mu if task == "regression" else classes[S.argmax(axis=1)]
    return pred, fit_s


def compare(name, task, Xtr, Xte, ytr, yte, grids, reg="0.01/n", tol=1e-3, seed=0) -> list[dict]:
    """RB+CG and RFF ridge at each R of ``grids`` on one dataset: one row per (R, method), with
    the sigma and ridge lambda each solver was given and nu = lambda / N. ``reg``: nu, or "x/n"
    (nu = x / N)."""
    rows = []
    sigma = resolve_bandwidth("median", Xtr, "cityblock", seed=seed)
    nu, ridge = reg_and_ridge(reg, len(Xtr))  # the one conversion, RB's own
    print(f"\n{name}: sigma (median L1) = {sigma:.3g}, nu = {nu:.3g}, lambda = N nu = {ridge:.3g}")
    print(f"{'R':>6} {'method':>8} {'D':>8} {'kappa':>8} {'test err':>9} {'fit s':>8}")
    Est = RBRegressor if task == "regression" else RBClassifier
    for R in grids:
        t0 = time.perf_counter()
        est = Est(bandwidth=sigma, n_components=R, reg=reg, tol=tol,
                  random_state=seed).fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
        err = test_error(task, yte, est.predict(Xte))
        rows.append(dict(data=name, R=R, method="RB+CG", D=est.n_features_out_,
                         kappa=round(est.kappa_, 2), test_error=err, fit_s=fit_s,
                         iters=est.n_iter_, sigma=est.bandwidth_, nu=est.ridge_ / len(Xtr),
                         ridge=est.ridge_))
        pred, fit_s_f = fourier_ridge(task, Xtr, Xte, ytr, sigma, R, ridge, seed)
        rows.append(dict(data=name, R=R, method="RFF", D=R, kappa="",
                         test_error=test_error(task, yte, pred), fit_s=fit_s_f, iters="",
                         sigma=sigma, nu=ridge / len(Xtr), ridge=ridge))
        for r in rows[-2:]:
            print(f"{r['R']:>6} {r['method']:>8} {r['D']:>8} {r['kappa']!s:>8} "
                  f"{r['test_error']:>9.4f} {r['fit_s']:>8.3f}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grids", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512])
    ap.add_argument("--reg", type=lambda s: s if "/" in s else float(s), default="0.01/n",
                    help='nu of both methods, or "x/n" (nu = x / N; paper: lambda = 0.01)')
    ap.add_argument("--tol", type=float, default=1e-3, help="CG tolerance (paper: 1e-3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="CSV file for the table")
    args = ap.parse_args(argv)

    rows = []
    for name, task, Xtr, Xte, ytr, yte in datasets(args.seed):
        rows += compare(name, task, Xtr, Xte, ytr, yte, args.grids, args.reg, args.tol, args.seed)
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
