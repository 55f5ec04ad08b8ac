"""The measurements behind the claims of ``kernelscale reproduce`` (``reproduce.py`` decides and
draws them): test error against one-thread fit time per method; training loss against CPU time
for DSG, UDSG and CDSG; Random Binning against random Fourier features at equal R; parallel
coordinate descent's speed-up; EigenPro's epochs to a target against plain kernel SGD.

Papers: Dai, Xie, He, Liang, Raj, Balcan, Song, Scalable Kernel Methods via Doubly Stochastic
Gradients, NIPS 2014; Fast Doubly Stochastic Kernel Machines (UDSG, CDSG); Wu, Chen, Yen, Yan,
Revisiting Random Binning Features: Fast Convergence and Strong Parallelizability, KDD 2016;
Ma, Belkin, Diving into the Shallows: a Computational Perspective on Large-Scale Shallow
Learning, NIPS 2017.
"""

from __future__ import annotations

import os
import time

import numpy as np
import scipy.sparse as sp

from ..estimators.eigenpro import EigenProClassifier
from ..estimators.exact import ExactKRRRegressor
from ..estimators.random_binning import RBClassifier, RBRegressor
from ..kernels import FourierBlocks, make_kernel, resolve_bandwidth
from ..kernels.random_binning import RandomBinning
from ..params import reg_and_ridge
from ..solvers.dsg import VARIANTS, auto_iterations, auto_sizes
from ..solvers.rb_cd import l1_cd


def _score(task, y, pred, relative=False) -> float:
    """RMSE (``relative``: over the standard deviation of ``y``) for regression, else the error
    rate of ``pred`` against ``y``."""
    pred = np.asarray(pred)
    if task != "regression":
        return float(np.mean(pred != y))
    rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
    return float(rmse / np.std(y)) if relative else rmse


# ---- test error against fit time (Dai et al. 2014: DSG against random features and Nystrom)
def curve(name, task, data, segments, on_fit=None, **params):
    """(fraction, fit seconds, score) points of method ``name`` on ``data`` = (X, y, X_test,
    y_test): its "auto" work in ``segments`` warm-started fits (Nystrom: 1/4, 1/2 and all of its
    "auto" centres, fitted apart); ``params`` (e.g. the bandwidth and reg every compared method
    shares) go to each estimator, ``on_fit(est)`` sees each fit."""
    from .registry import estimator_class, make_estimator

    X, y, Xt, yt = data
    n, d = X.shape
    if name == "nystrom":
        from ..estimators._kernel_common import n_features_rule

        m = n_features_rule(n, "auto", floor=500)  # Nystrom's n_components="auto"
        fits = [(frac, make_estimator(name, task, random_state=0, **params, **(
            {} if frac == 1.0 else {"n_components": max(100, int(frac * m))})))
            for frac in (0.25, 0.5, 1.0)]
    else:
        if name in VARIANTS:
            from ..solvers.dsg import new_block_share

            total = auto_iterations(n, auto_sizes(n, d)[1], new_block_share(name))
            n_iter = -(-total // segments)
        else:
            n_iter = f"{estimator_class(name, task)._auto_epochs / segments:g} epochs"
        est = make_estimator(name, task, random_state=0, warm_start=True, **params, n_iter=n_iter)
        fits = [(s / segments, est) for s in range(1, segments + 1)]
    points, total = [], 0.0
    for frac, est in fits:
        t = time.perf_counter()
        est.fit(X, y)
        fit_s = time.perf_counter() - t
        total = fit_s if name == "nystrom" else total + fit_s  # warm segments add up
        points.append((frac, total, _score(task, yt, est.predict(Xt))))
        if on_fit:
            on_fit(est)
    return points


# ---- training loss against CPU time: DSG, UDSG, CDSG (Fast Doubly Stochastic Kernel Machines)
def training_loss(est, X, y) -> float:
    """Mean loss of the fitted model on (X, y), the data term of the objective (Dai et al. 2014,
    eq. 1)."""
    u = np.asarray(est.decision_function(X) if hasattr(est, "classes_") else est.predict(X),
                   dtype=np.float64)
    u = u.reshape(len(u), -1)
    if hasattr(est, "classes_"):
        Y = est._coder.encode_index(np.searchsorted(est.classes_, y), np, np.float64)
    else:
        Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    return float(np.asarray(est.loss_.value(u, Y)).mean())


def run_arrays(name, task, data, segments: int, epochs: float, sample: int, params=None):
    """DSG, UDSG and CDSG on ``data`` = (X, y, X_test, y_test), ``epochs`` x the registry's
    "auto" iterations in ``segments`` warm-started fits each, interleaved: one record per
    (segment, variant) with its CPU time so far, its training loss on ``sample`` seeded rows and
    its test score (RMSE, or error in %); ``params`` (e.g. the bandwidth and reg the three share)
    go to every variant."""
    from .registry import make_estimator

    X, y, X_te, y_te = data
    rows = np.sort(np.random.default_rng(0).choice(X.shape[0], min(sample, X.shape[0]),
                                                   replace=False))
    Xs, ys = X[rows], y[rows]
    ests = {v: make_estimator(v, task, random_state=0, engine={"device": "cpu"}, warm_start=True,
                              **(params or {})) for v in VARIANTS}
    clock = dict.fromkeys(VARIANTS, 0.0)
    # the registry default n_iter="auto" at the "auto" sizes
    total = max(segments, int(round(epochs * auto_iterations(X.shape[0], auto_sizes(*X.shape)[1]))))
    records = []
    for seg in range(segments):
        for v, est in ests.items():
            est.set_params(n_iter=total // segments + (1 if seg < total % segments else 0))
            t0 = time.process_time()
            est.fit(X, y)
            clock[v] += time.process_time() - t0
            score = _score(task, y_te, est.predict(X_te))
            score = score if task == "regression" else 100.0 * score
            rec = {"dataset": name, "task": task, "variant": v, "iter": int(est.n_iter_),
                   "n_blocks": int(est.n_blocks_), "fit_s": round(clock[v], 3),
                   "objective": training_loss(est, Xs, ys), "test": score,
                   "reg": est.reg_, "bandwidth": est.bandwidth_, "loss": est.loss_.name,
                   "kernel": est.kernel}
            records.append(rec)
            print(f"  {name:14s} {v:5s} iter {rec['iter']:4d}  {rec['fit_s']:8.1f} s  "
                  f"objective {rec['objective']:.5f}  test {score:.4f}", flush=True)
    return records


# ---- Random Binning against random Fourier features at equal R (Wu et al. 2016)
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
    """RB+CG and RFF ridge at each R of ``grids`` on one dataset: one row per (R, method) with its
    test error (relative RMSE, or error rate), the sigma and ridge lambda each solver was given
    and nu = lambda / N. ``reg``: nu, or "x/n" (nu = x / N)."""
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
        rows.append(dict(data=name, R=R, method="RB+CG", D=est.n_features_out_,
                         kappa=round(est.kappa_, 2),
                         test_error=_score(task, yte, est.predict(Xte), relative=True), fit_s=fit_s,
                         iters=est.n_iter_, sigma=est.bandwidth_, nu=est.ridge_ / len(Xtr),
                         ridge=est.ridge_))
        pred, fit_s_f = fourier_ridge(task, Xtr, Xte, ytr, sigma, R, ridge, seed)
        rows.append(dict(data=name, R=R, method="RFF", D=R, kappa="",
                         test_error=_score(task, yte, pred, relative=True), fit_s=fit_s_f, iters="",
                         sigma=sigma, nu=ridge / len(Xtr), ridge=ridge))
        for r in rows[-2:]:
            print(f"{r['R']:>6} {r['method']:>8} {r['D']:>8} {r['kappa']!s:>8} "
                  f"{r['test_error']:>9.4f} {r['fit_s']:>8.3f}")
    return rows


def predicted(tau, R, D):
    """Wu et al. 2016, eq. 29: the speed-up of parallel coordinate descent with ``tau`` threads
    on R non-zeros per row out of D columns."""
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


# ---- EigenPro against plain kernel SGD (Ma and Belkin 2017)
def eigenpro_against_sgd(name, Xtr, ytr, Xte, yte, bandwidth, args):
    """Epochs (and fit seconds) of EigenPro and of the same loop without its preconditioner
    (``n_eigenvectors=0``: plain kernel SGD) until the training MSE reaches exact kernel ridge's
    and the test error exact kernel ridge's + ``args.slack``; the same kernel, bandwidth, batch,
    data order and step-size rule (eta from lambda_{k+1} for EigenPro, from lambda_1 for SGD:
    Ma and Belkin 2017, sec. 4). ``args``: max_epochs, k, M, batch, alpha, slack."""
    onehot = np.eye(len(np.unique(ytr)))[np.searchsorted(np.unique(ytr), ytr)]
    krr = ExactKRRRegressor(reg=f"{args.alpha}/n", bandwidth=bandwidth, random_state=0,
                            engine={"device": "cpu"}).fit(Xtr, onehot)
    train_target = float(np.mean((krr.predict(Xtr) - onehot) ** 2))
    test_target = float(np.mean(np.unique(ytr)[krr.predict(Xte).argmax(1)] != yte)) + args.slack

    results = {}
    for label, k in (("EigenPro", args.k), ("SGD", 0)):
        est = EigenProClassifier(bandwidth=bandwidth, n_eigenvectors=k,
                                 subsample_size=min(args.M, len(Xtr)), batch_size=args.batch,
                                 n_iter="1 epochs", warm_start=True, random_state=0,
                                 engine={"device": "cpu"})
        hit = {"train": None, "test": None}
        hit_s = {"train": None, "test": None}  # fit seconds (set-up included) at the hit
        curve = []  # (epoch, fit seconds so far, train MSE, test error)
        t0 = time.perf_counter()
        setup, fit_s = None, 0.0
        for epoch in range(1, args.max_epochs + 1):
            t1 = time.perf_counter()
            est.fit(Xtr, ytr)
            fit_s += time.perf_counter() - t1
            if setup is None:
                setup = time.perf_counter() - t0 - est.history_["time"][-1]
            F = est._decision(Xtr)
            mse = float(np.mean((F - onehot) ** 2))
            err = float(np.mean(est.predict(Xte) != yte))
            curve.append((epoch, fit_s, mse, err))
            if hit["train"] is None and mse <= train_target:
                hit["train"], hit_s["train"] = epoch, fit_s
            if hit["test"] is None and err <= test_target:
                hit["test"], hit_s["test"] = epoch, fit_s
            if all(v is not None for v in hit.values()):
                break
        results[label] = r = dict(hit=hit, hit_s=hit_s, curve=curve, k=est.n_eigenvectors_,
                                  eta=est.eta_, s_per_epoch=est.history_["time"][-1] / epoch,
                                  setup=setup, sigma=est.bandwidth_, batch=est.batch_size_)
        print(f"  {name} ({len(Xtr)} rows) {label}: epochs to train MSE <= {train_target:.4f}: "
              f"{hit['train'] or f'>{epoch}'}, to test error <= {test_target:.4f}: "
              f"{hit['test'] or f'>{epoch}'}; k={r['k']}, eta={r['eta']:.3g}, "
              f"{r['s_per_epoch']:.2f} s/epoch + {r['setup']:.2f} s set-up", flush=True)
    return dict(results=results, train_target=train_target, test_target=test_target)
