"""Epochs to reach a target error: EigenPro vs the same loop without preconditioner (plain SGD).

Same kernel, bandwidth, batch size, data order and step-size rule (paper 004 §4: eta from
lambda_{k+1} for EigenPro, from lambda_1 for SGD); only the preconditioner differs. Targets come
from exact kernel ridge regression (KRLS, the paper's reference) on the same one-hot targets:

* train: training MSE <= the KRLS training MSE (alpha = ``--alpha``);
* test:  test classification error <= the KRLS test error + ``--slack``.

Usage: ``python benchmarks/eigenpro_vs_sgd.py [--max-epochs 40] [--n 2000] [--alpha 1.0] [--no-digits]``.
Prints one table row per (dataset, target).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kernelscale import ExactKRRRegressor
from kernelscale.estimators.eigenpro import EigenProClassifier


def generated(n: int, seed: int = 0):
    """Two classes split by a discontinuous rule in 5-D (the case paper 004 §2 singles out)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n + n // 2, 5))
    y = (np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.3 * X[:, 2] > 0).astype(int)
    flip = rng.random(len(y)) < 0.02
    y = np.where(flip, 1 - y, y)
    return X[:n], y[:n], X[n:], y[n:], "median*0.5"


def digits(seed: int = 0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, random_state=seed)
    return Xtr, ytr, Xte, yte, "median"


def run(name, Xtr, ytr, Xte, yte, bandwidth, args):
    onehot = np.eye(len(np.unique(ytr)))[np.searchsorted(np.unique(ytr), ytr)]
    krr = ExactKRRRegressor(reg=f"{args.alpha}/n", bandwidth=bandwidth, random_state=0,
                            engine={"device": "cpu"}).fit(Xtr, onehot)
    train_target = float(np.mean((krr.predict(Xtr) - onehot) ** 2))
    test_target = float(np.mean(np.unique(ytr)[krr.predict(Xte).argmax(1)] != yte)) + args.slack

    results = {}
    for label, k in (("EigenPro", args.k), ("SGD", 0)):
        est = EigenProClassifier(bandwidth=bandwidth, n_eigenvectors=k,
                                 subsample_size=min(args.M, len(Xtr)), batch_size=args.batch,
                                 n_iter="1 epochs", warm_start=True, random_state=0, engine={"device": "cpu"})
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
        results[label] = dict(hit=hit, hit_s=hit_s, curve=curve, k=est.n_eigenvectors_, eta=est.eta_,
                              s_per_epoch=est.history_["time"][-1] / epoch, setup=setup,
                              sigma=est.bandwidth_, batch=est.batch_size_)

    for target, value in (("train MSE", train_target), ("test error", test_target)):
        key = "train" if target == "train MSE" else "test"
        e, s = results["EigenPro"]["hit"][key], results["SGD"]["hit"][key]
        ratio = f"{s / e:.1f}x" if (e and s) else (f">{args.max_epochs / e:.1f}x" if e else "-")
        fmt = lambda v: str(v) if v is not None else f">{args.max_epochs}"  # noqa: E731
        print(f"| {name} | {len(Xtr)} | {target} <= {value:.4f} | {fmt(e)} | {fmt(s)} | {ratio} |")
    ep, sg = results["EigenPro"], results["SGD"]
    print(f"|   ({name}: EigenPro k={ep['k']}, eta={ep['eta']:.3g}, {ep['s_per_epoch']:.2f} s/epoch "
          f"+ {ep['setup']:.2f} s set-up; SGD eta={sg['eta']:.3g}, {sg['s_per_epoch']:.2f} s/epoch) | | | | | |")
    return dict(results=results, train_target=train_target, test_target=test_target)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="training rows of the generated problem")
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--batch", type=int, default=256, help="mini-batch m (paper: 256)")
    ap.add_argument("--k", type=int, default=160, help="eigendirections (paper: 160)")
    ap.add_argument("--M", type=int, default=4800, help="subsample size (paper: 4800)")
    ap.add_argument("--alpha", type=float, default=1.0, help="KRLS ridge for the targets")
    ap.add_argument("--slack", type=float, default=0.0, help="allowed excess test error")
    ap.add_argument("--no-digits", action="store_true")
    args = ap.parse_args()
    print("| data | n | target | EigenPro epochs | SGD epochs | speed-up |")
    print("|---|---|---|---|---|---|")
    run("generated", *generated(args.n), args)
    if not args.no_digits:
        run("digits", *digits(), args)


if __name__ == "__main__":
    main()
