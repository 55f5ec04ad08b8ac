"""Peer race: kernelscale against the libraries a user would otherwise pick — scikit-learn (SVC /
KernelRidge, ``Nystroem``, ``RBFSampler``), Falkon (Nyström + preconditioned CG), EigenPro 2 and
GPyTorch's SGPR — on the same data, machine and run, one BLAS thread per fit (``--threads``).

Data: the development sets of ``../shared/devdata`` prepared as the pipeline prepares them
(``realdata.prepared``: seeded split, training-set standardization), the generated sets of
``config/million.yaml`` cut to n rows (``bayes-<n>``, ``deformed-<n>``), or
``toy-classification`` / ``toy-regression`` (scikit-learn generators, ``--toy-rows`` rows, for
the tests).

Methods (``--methods``; a peer whose package is not importable is skipped and said so):

* kernelscale, every estimator at its registry defaults (``make_estimator(name, task,
  random_state=0)``): ``ks_nystrom`` (fitted first: its ``bandwidth_`` sigma, ``reg_`` nu and
  ``n_components_`` m are "kernelscale's settings" below), ``ks_dsg``, ``ks_eigenpro`` (kernel
  EigenPro over the training points), ``ks_eigenpro_rf``,
  ``ks_rb_cg``, ``ks_rff_sgd``. The iterative ones also give a curve: a second, warm-started fit
  in five segments of the default fit's iterations, the test error after each (kept only when its
  last iteration count equals the default fit's).
* each peer twice, ``setting`` = ``own`` (its library's defaults or documented recommendation,
  listed in ``OWN``) and ``ks`` (Gaussian kernel at sigma, regulariser nu as the peer spells it).

Each fit runs in a forked child (``realdata.run_child``: killed at ``--time-cap``); its peak
memory is the child's resident-set peak over its start (``realdata.PeakRSS``). Iterating peers
record the test error after each iteration (Falkon: its CG callback; EigenPro 2: each epoch;
SGPR: every 5 Adam steps) against the fit's own elapsed time (evaluation excluded).

Output: ``<out>/peers-<tag>.csv`` (one row per fit, its curve as ``seconds:error`` pairs),
``.md`` (machine, versions, command, a table per dataset) and ``.png`` (error against fit time,
a panel per dataset, a curve per method).

Usage (in ``.venv-peers``, ``make peers-env``)::

    python benchmarks/peers.py --data fashion-mnist kin40k protein
    python benchmarks/peers.py --data kin40k --methods ks_nystrom falkon --threads 2 --tag t2
    python benchmarks/peers.py --data bayes-100000 --methods ks_nystrom ks_dsg falkon
    python benchmarks/peers.py --data deformed-100000 --methods ks_nystrom ks_dsg falkon
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import realdata  # data preparation, forked child, peak RSS (a sibling module)

REPO = realdata.REPO
ALIASES = {"fashion-mnist": "dev_fashion_mnist", "kin40k": "dev_kin40k", "protein": "dev_protein"}
KS = ("ks_nystrom", "ks_dsg", "ks_eigenpro", "ks_eigenpro_rf", "ks_rb_cg", "ks_rff_sgd")
PEERS = ("sk_svc", "sk_krr", "sk_nystroem", "sk_rbf_sgd", "falkon", "eigenpro2", "gpytorch_sgpr")
NEEDS = {"falkon": "falkon", "eigenpro2": "eigenpro2", "gpytorch_sgpr": "gpytorch"}
OWN = {
    "sk_svc": "SVC() defaults: C=1, gamma='scale' (classification)",
    "sk_krr": "KernelRidge(kernel='rbf') defaults: alpha=1, gamma=1/d, on --krr-rows training rows "
              "(regression)",
    "sk_nystroem": "Nystroem() defaults (rbf, gamma=1/d, 100 components) + LinearSVC() / Ridge()",
    "sk_rbf_sgd": "RBFSampler(gamma='scale') (100 components) + SGDClassifier() / SGDRegressor()",
    "falkon": "Gaussian kernel at the median distance, penalty 1e-6, M = sqrt(n) ln n (Rudi et al. "
              "2017), maxiter 20 (default), float64, KeOps off, max_cpu_mem half the memory "
              "available at the start (unset, its CPU path allocates all of K_nM: 94 GB at 10^6 rows)",
    "eigenpro2": "Gaussian kernel at the median distance, automatic batch and step, --epochs epochs, "
                 "mem_gb 4, float32 (its README's CPU set-up)",
    "gpytorch_sgpr": "SGPR tutorial: 500 inducing points, ScaleKernel(RBF), Adam lr 0.1, 50 steps, "
                     "float64 (regression)",
}
TIMING = {"threads": 1, "epochs": 10, "krr_rows": 10000}


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------
def toy(name: str, rows: int):
    from sklearn.datasets import make_classification, make_regression

    if name == "toy-classification":
        X, y = make_classification(rows, 10, n_informative=6, n_classes=3, random_state=0)
        task = "multiclass"
    else:
        X, y = make_regression(rows, 8, noise=5.0, random_state=0)
        X = np.sin(X) + 0.1 * X  # a kernel's problem, not a linear one
        y = (y - y.mean()) / y.std()
        task = "regression"
    cut = int(0.7 * rows)
    mu, sd = X[:cut].mean(0), X[:cut].std(0)
    X = (X - mu) / sd
    return task, (X[:cut], y[:cut], X[cut:], y[cut:])


def bayes(name: str):
    """``bayes-<n>``: n rows of config/million.yaml's generator ``bayes`` (d 20, Bayes error
    8.81 %), the first 90 % for training and the rest for testing (rows are i.i.d.)."""
    from kernelscale.pipeline.data.bayes import bayes_params, bayes_rows

    n = int(name.removeprefix("bayes-"))
    X, y = bayes_rows(bayes_params(n, 20, 0.3, 0), 0, n)
    cut = int(0.9 * n)
    return "binary", (X[:cut], y[:cut].astype(np.int64), X[cut:], y[cut:].astype(np.int64))


def deformed(name: str, devdata: Path):
    """``deformed-<n>``: config/million.yaml's ``fmnist_deformed_1m`` cut to its first n training
    rows (the 60,000 Fashion-MNIST originals first, then their deformations, generator
    ``deformed`` at its defaults, seed 0), tested on the 10,000 original test images; pixels
    0..255 as ``fashion-mnist`` (no standardization)."""
    from kernelscale.pipeline.data.deformed import DEFAULTS, generate_deformed
    from kernelscale.pipeline.data.readers.idx import load_idx_images

    folder = devdata / "fashion-mnist"
    params = {**DEFAULTS, "n_samples": int(name.removeprefix("deformed-")),
              "path": folder / "train-images-idx3-ubyte.gz",
              "labels_path": folder / "train-labels-idx1-ubyte.gz"}
    blocks = list(generate_deformed(params))
    X = np.concatenate([b.X for b in blocks]).astype(np.float64)
    y = np.concatenate([b.y for b in blocks]).astype(np.int64)
    images, labels = load_idx_images(folder / "t10k-images-idx3-ubyte.gz",
                                     folder / "t10k-labels-idx1-ubyte.gz")
    return "multiclass", (X, y, images.reshape(len(images), -1).astype(np.float64),
                          labels.astype(np.int64))


def load(name: str, args):
    if name.startswith("toy-"):
        return toy(name, args.toy_rows)
    if name.startswith("bayes-"):
        return bayes(name)
    if name.startswith("deformed-"):
        return deformed(name, Path(args.devdata))
    ds = ALIASES.get(name, name)
    specs = realdata.load_devdata_specs(Path(args.devdata))
    if ds not in specs:
        raise SystemExit(f"peers: unknown dataset {name!r}; known: {sorted(ALIASES)} + {sorted(specs)}")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    X_tr, y_tr, X_te, y_te, _ = realdata.prepared(ds, specs[ds], cache)
    X_tr, y_tr = realdata.subsample(X_tr, y_tr, args.max_train)
    return specs[ds]["task"], (X_tr, y_tr, X_te, y_te)


def median_sigma(X, rows: int = 1000) -> float:
    Xs = X[np.random.default_rng(0).choice(X.shape[0], min(rows, X.shape[0]), replace=False)]
    sq = (Xs * Xs).sum(1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * Xs @ Xs.T, 0)
    return float(np.sqrt(np.median(d2[np.triu_indices(Xs.shape[0], 1)])))


# ---------------------------------------------------------------------------------------------
# the fits (each runs in a forked child)
# ---------------------------------------------------------------------------------------------
def _error(task, pred, y):
    if task == "regression":
        return float(np.sqrt(np.mean((np.asarray(pred, dtype=np.float64).ravel() - y) ** 2)))
    return float(np.mean(np.asarray(pred).ravel() != y))


def _onehot(y, classes):
    return (np.asarray(y)[:, None] == classes[None, :]).astype(np.float64)


def _torch_threads():
    import torch

    torch.set_num_threads(TIMING["threads"])
    return torch


def fit_kernelscale(name, task, data, ks, curve: bool):
    from kernelscale.pipeline.registry import make_estimator

    X, y, Xt, yt = data
    est = make_estimator(name.removeprefix("ks_"), task, random_state=0)
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = est.predict(Xt)
    out = {"score": _error(task, pred, yt), "fit_s": fit_s, "predict_s": time.perf_counter() - t0,
           "params": f"registry defaults; sigma {getattr(est, 'bandwidth_', float('nan')):.4g}"}
    for attr in ("bandwidth_", "reg_", "n_components_"):
        if isinstance(getattr(est, attr, None), (int, float, np.integer, np.floating)):
            out[attr.rstrip("_")] = float(getattr(est, attr))
    hist = getattr(est, "history_", None) or {}
    total = int(hist["iter"][-1]) if hist.get("iter") else 0
    if curve and getattr(est, "iterative", False) and total >= 5:
        out["curve_fn"] = (est, total)
    return out


def ks_curve(est, total, task, data, segments=5):
    """Warm-started segments of the default fit's iterations, test error after each."""
    from sklearn.base import clone

    X, y, Xt, yt = data
    seg, step = clone(est).set_params(warm_start=True), math.ceil(total / segments)
    points, elapsed, done = [], 0.0, 0
    while done < total:
        seg.set_params(n_iter=min(step, total - done))
        t0 = time.perf_counter()
        seg.fit(X, y)
        elapsed += time.perf_counter() - t0
        points.append((elapsed, _error(task, seg.predict(Xt), yt)))
        done = int(seg.history_["iter"][-1])
    return points if done == total else None


def fit_sklearn(name, setting, task, data, ks):
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge, RidgeClassifier, SGDClassifier, SGDRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC, LinearSVC

    X, y, Xt, yt = data
    n, reg = X.shape[0], ks.get("reg")
    gamma = 1.0 / (2.0 * ks["sigma"] ** 2) if setting == "ks" else None
    clf = task != "regression"
    if name == "sk_svc":
        est = SVC(cache_size=1000) if setting == "own" else \
            SVC(C=1.0 / (n * reg), gamma=gamma, cache_size=1000)
        params = "C=1, gamma='scale'" if setting == "own" else f"C=1/(n nu)={1 / (n * reg):.4g}"
    elif name == "sk_krr":
        X, y = realdata.subsample(X, y, TIMING["krr_rows"])
        est = KernelRidge(kernel="rbf") if setting == "own" else \
            KernelRidge(kernel="rbf", alpha=X.shape[0] * reg, gamma=gamma)
        params = f"{X.shape[0]} rows; " + ("alpha=1, gamma=1/d" if setting == "own"
                                           else f"alpha=n nu={X.shape[0] * reg:.4g}")
    elif name == "sk_nystroem":
        if setting == "own":
            est = make_pipeline(Nystroem(random_state=0), LinearSVC() if clf else Ridge())
            params = "100 components, gamma=1/d"
        else:
            m = int(ks.get("n_components", 1000))
            lin = RidgeClassifier(alpha=n * reg) if clf else Ridge(alpha=n * reg)
            est = make_pipeline(Nystroem(gamma=gamma, n_components=min(m, n), random_state=0), lin)
            params = f"{min(m, n)} components, Ridge alpha=n nu"
    elif name == "sk_rbf_sgd":
        if setting == "own":
            est = make_pipeline(RBFSampler(gamma="scale", random_state=0),
                                SGDClassifier(random_state=0) if clf else SGDRegressor(random_state=0))
            params = "100 components, gamma='scale'"
        else:
            m = int(ks.get("n_components", 1000))
            sgd = SGDClassifier(alpha=reg, random_state=0) if clf else \
                SGDRegressor(alpha=reg, random_state=0)
            est = make_pipeline(RBFSampler(gamma=gamma, n_components=m, random_state=0), sgd)
            params = f"{m} components, SGD alpha=nu"
    else:
        raise KeyError(name)
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = est.predict(Xt)
    return {"score": _error(task, pred, yt), "fit_s": fit_s, "predict_s": time.perf_counter() - t0,
            "params": params}


def fit_falkon(setting, task, data, ks):
    torch = _torch_threads()
    import falkon

    X, y, Xt, yt = data
    n = X.shape[0]
    classes = np.unique(y) if task != "regression" else None
    Y = _onehot(y, classes) if classes is not None else y[:, None]
    if setting == "own":
        sigma, penalty, M = median_sigma(X), 1e-6, int(min(n, math.ceil(math.sqrt(n) * math.log(n))))
    else:
        sigma, penalty, M = ks["sigma"], ks["reg"], int(min(n, ks.get("n_components", 1000)))
    yt_t = torch.from_numpy(np.ascontiguousarray(yt, dtype=np.float64))

    def err(_y, pred):  # Falkon's error_fn; our own targets, not its one-hot copy
        if classes is None:
            return float(torch.sqrt(torch.mean((pred[:, 0] - yt_t) ** 2)))
        return float(np.mean(classes[pred.argmax(1).numpy()] != yt))

    import psutil

    opts = falkon.FalkonOptions(keops_active="no", use_cpu=True,
                                max_cpu_mem=psutil.virtual_memory().available / 2)
    model = falkon.Falkon(kernel=falkon.kernels.GaussianKernel(sigma=sigma, opt=opts),
                          penalty=penalty, M=M, maxiter=20, seed=0, error_fn=err, error_every=1,
                          options=opts)
    Xtr, Ytr = torch.from_numpy(np.asarray(X, np.float64)), torch.from_numpy(Y)
    Xte = torch.from_numpy(np.asarray(Xt, np.float64))
    Yte = torch.from_numpy(_onehot(yt, classes) if classes is not None else yt[:, None])
    t0 = time.perf_counter()
    model.fit(Xtr, Ytr, Xte, Yte)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    score = err(None, model.predict(Xte))
    curve = list(zip(model.fit_times_[1:], [float(e) for e in model.val_errors_], strict=True))
    if curve:  # Falkon's own clock: preparation + CG, its callback's predictions excluded
        fit_s = curve[-1][0]
    return {"score": score, "fit_s": fit_s, "predict_s": time.perf_counter() - t0, "curve": curve,
            "params": f"sigma {sigma:.4g}, penalty {penalty:.3g}, M {M}, 20 CG iterations"}


def fit_eigenpro2(setting, task, data, ks):
    torch = _torch_threads()
    from eigenpro2.kernels import gaussian
    from eigenpro2.models import KernelModel

    X, y, Xt, yt = data
    classes = np.unique(y) if task != "regression" else None
    Y = _onehot(y, classes) if classes is not None else y[:, None]
    Yt = _onehot(yt, classes) if classes is not None else yt[:, None]
    sigma = median_sigma(X) if setting == "own" else ks["sigma"]
    def f32(a):
        return torch.from_numpy(np.asarray(a, np.float32))

    Xtr, Ytr, Xte, Yte = f32(X), f32(Y), f32(Xt), f32(Yt)
    model = KernelModel(lambda a, b: gaussian(a, b, bandwidth=sigma), Xtr, Ytr.shape[1],
                        device=torch.device("cpu"))
    evaluate, marks = model.evaluate, []

    def timed_evaluate(*a, **k):  # epoch ends: time stamps, evaluation excluded from them
        t = time.perf_counter()
        res = evaluate(*a, **k)
        marks.append((t, time.perf_counter() - t))
        return res

    model.evaluate = timed_evaluate
    t0 = time.perf_counter()
    torch.manual_seed(0)
    results = model.fit(Xtr, Ytr, Xte, Yte, epochs=TIMING["epochs"], mem_gb=4, print_every=1)
    total = time.perf_counter() - t0
    spent, stamps = 0.0, []
    for t, d in marks:  # two evaluations per epoch (training subsample, test)
        stamps.append(t - t0 - spent)
        spent += d
    fit_s = total - spent
    t0 = time.perf_counter()
    with torch.no_grad():  # EigenPro 2's predict() returns None: its forward() is the prediction
        pred = torch.vstack([model.forward(b) for b in torch.split(Xte, 4096)]).numpy()
    predict_s = time.perf_counter() - t0
    score = _error(task, pred[:, 0] if classes is None else classes[pred.argmax(1)], yt)
    # per epoch: the test evaluation is the second call; its error from EigenPro 2's own metric
    curve = []
    for e, (_, tv, _) in sorted(results.items()):
        err = (1 - tv["multiclass-acc"]) if classes is not None else math.sqrt(float(tv["mse"]))
        curve.append((stamps[2 * e], float(err)))
    return {"score": score, "fit_s": fit_s, "predict_s": predict_s, "curve": curve,
            "params": f"sigma {sigma:.4g}, {TIMING['epochs']} epochs"}


def fit_sgpr(setting, task, data, ks):
    torch = _torch_threads()
    import gpytorch

    if task != "regression":
        raise ValueError("SGPR is run on regression sets only")
    X, y, Xt, yt = data
    Xtr, ytr = torch.from_numpy(np.asarray(X, np.float64)), torch.from_numpy(np.asarray(y, np.float64))
    Xte = torch.from_numpy(np.asarray(Xt, np.float64))
    idx = np.sort(np.random.default_rng(0).choice(X.shape[0], min(500, X.shape[0]), replace=False))
    torch.manual_seed(0)

    class SGPR(gpytorch.models.ExactGP):
        def __init__(self, x, t, lik):
            super().__init__(x, t, lik)
            self.mean_module = gpytorch.means.ConstantMean()
            self.base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                self.base, inducing_points=x[idx].clone(), likelihood=lik)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    model = SGPR(Xtr, ytr, lik).double()
    steps = 50
    if setting == "ks":  # fixed hyperparameters: sigma, outputscale 1, noise n nu, no training
        model.base.base_kernel.lengthscale = ks["sigma"]
        model.base.outputscale = 1.0
        lik.noise = max(X.shape[0] * ks["reg"], 1.0001e-4)  # gpytorch's floor is 1e-4
        model.mean_module.constant.data.fill_(0.0)
        steps = 0

    def rmse():
        model.eval()
        lik.eval()
        with torch.no_grad(), gpytorch.settings.fast_pred_var():
            pred = lik(model(Xte)).mean.numpy()
        model.train()
        lik.train()
        return _error(task, pred, yt)

    model.train()
    lik.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    curve, elapsed = [], 0.0
    for i in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = -mll(model(Xtr), ytr)
        loss.backward()
        opt.step()
        elapsed += time.perf_counter() - t0
        if (i + 1) % 5 == 0 and i + 1 < steps:
            curve.append((elapsed, rmse()))
    t0 = time.perf_counter()
    score = rmse()  # the first prediction also forms the posterior's caches: counted as fit
    fit_s = elapsed + time.perf_counter() - t0
    t0 = time.perf_counter()
    rmse()
    predict_s = time.perf_counter() - t0
    curve.append((fit_s, score))
    params = (f"500 inducing points, {steps} Adam steps" if setting == "own" else
              f"500 inducing points, lengthscale {ks['sigma']:.4g}, noise {float(lik.noise):.3g}, "
              "no training")
    return {"score": score, "fit_s": fit_s, "predict_s": predict_s, "curve": curve, "params": params}


def make_fit(method, setting, ks, curve):
    """The child's work for one (method, setting): realdata.run_child's ``fit``."""

    def fit(_kind, _name, task, data):
        mem = realdata.PeakRSS()
        if method in KS:
            out = fit_kernelscale(method, task, data, ks, curve)
        elif method.startswith("sk_"):
            out = fit_sklearn(method, setting, task, data, ks)
        elif method == "falkon":
            out = fit_falkon(setting, task, data, ks)
        elif method == "eigenpro2":
            out = fit_eigenpro2(setting, task, data, ks)
        else:
            out = fit_sgpr(setting, task, data, ks)
        out["peak_mb"] = mem.stop()
        if "curve_fn" in out:
            est, total = out.pop("curve_fn")
            out["curve"] = ks_curve(est, total, task, data) or []
        return out

    return fit


# ---------------------------------------------------------------------------------------------
# the race
# ---------------------------------------------------------------------------------------------
def importable(method) -> bool:
    import importlib.util

    return NEEDS.get(method) is None or importlib.util.find_spec(NEEDS[method]) is not None


def applies(method, task) -> bool:
    if method == "sk_svc":
        return task != "regression"
    if method in ("sk_krr", "gpytorch_sgpr"):
        return task == "regression"
    return True


def race(args) -> list[dict]:
    rows, stem = [], Path(args.out) / f"peers-{args.tag}"
    methods = args.methods or list(KS + PEERS)
    if "ks_nystrom" not in methods and not args.ks_settings and any(m not in KS for m in methods):
        methods = ["ks_nystrom"] + methods  # its settings are the peers' "ks" row
    for name in args.data:
        task, data = load(name, args)
        X = data[0]
        print(f"\n== {name}: {task}, train {X.shape[0]} x {X.shape[1]}, test {data[2].shape[0]}",
              flush=True)
        ks = dict(args.ks_settings or {})
        for method in methods:
            if not applies(method, task):
                continue
            if not importable(method):
                print(f"  {method}: skipped ({NEEDS[method]} is not installed)", flush=True)
                continue
            settings = ("default",) if method in KS else tuple(args.settings)
            for setting in settings:
                if setting == "ks" and "reg" not in ks:
                    print(f"  {method}/ks: skipped (no kernelscale settings: ks_nystrom failed)")
                    continue
                res = realdata.run_child("peer", method, task, data, args.time_cap,
                                         fit=make_fit(method, setting, ks, not args.no_ks_curves))
                if method == "ks_nystrom" and res["status"] == "ok":
                    ks = {"sigma": res["bandwidth"], "reg": res["reg"],
                          "n_components": res["n_components"]}
                row = {"dataset": name, "task": task, "n_train": X.shape[0],
                       "n_test": data[2].shape[0], "d": X.shape[1], "method": method,
                       "setting": setting, "threads": args.threads,
                       "load": round(os.getloadavg()[0], 1), **res}
                rows.append(row)
                metric = "rmse" if task == "regression" else "err"
                if res["status"] == "ok":
                    print(f"  {method:15s} {setting:7s} {metric} {res['score']:.4f}  fit "
                          f"{res['fit_s']:8.2f} s  peak {res['peak_mb']:7.1f} MB  {res['params']}",
                          flush=True)
                else:
                    print(f"  {method:15s} {setting:7s} {res['status']}: {res.get('error', '')}",
                          flush=True)
                write_csv(rows, stem.with_suffix(".csv"))
    return rows


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------
COLUMNS = ("dataset", "task", "n_train", "n_test", "d", "method", "setting", "threads", "status",
           "score", "fit_s", "predict_s", "peak_mb", "load", "bandwidth", "reg", "n_components", "params",
           "error", "curve")


def write_csv(rows, path: Path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            out = {k: r.get(k, "") for k in COLUMNS}
            out["curve"] = ";".join(f"{t:.3f}:{e:.5g}" for t, e in r.get("curve") or [])
            w.writerow(out)


def read_csv(path) -> list[dict]:
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k in ("score", "fit_s", "predict_s", "peak_mb"):
                r[k] = float(r[k]) if r.get(k) else None
            r["curve"] = [tuple(map(float, p.split(":"))) for p in r.get("curve", "").split(";") if p]
            rows.append(r)
    return rows


def versions() -> str:
    import importlib.metadata as md

    out = []
    for pkg in ("kernelscale", "numpy", "scipy", "scikit-learn", "torch", "falkon", "eigenpro2",
                "gpytorch"):
        try:
            out.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            out.append(f"{pkg} (not installed)")
    return ", ".join(out)


def markdown(rows, header: str) -> str:
    lines = [header, ""]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        rs = [r for r in rows if r["dataset"] == ds]
        r0 = rs[0]
        reg = r0["task"] == "regression"
        lines += [f"### {ds} ({r0['task']}, train {r0['n_train']} x {r0['d']}, test "
                  f"{r0['n_test']}, {r0['threads']} thread(s) per fit)", "",
                  f"| method | setting | {'RMSE' if reg else 'error %'} | fit s | predict s | "
                  "peak MB | load | settings used |", "|---|---|---|---|---|---|---|---|"]
        for r in rs:
            if r["status"] == "ok":
                s = f"{r['score']:.4f}" if reg else f"{100 * r['score']:.2f}"
                lines.append(f"| {r['method']} | {r['setting']} | {s} | {r['fit_s']:.1f} | "
                             f"{r['predict_s']:.1f} | {r['peak_mb']:.0f} | {r.get('load', '')} | "
                             f"{r.get('params', '')} |")
            else:
                last = (f"; its curve's last point {r['curve'][-1][1] * (1 if reg else 100):.4g}"
                        f" at {r['curve'][-1][0]:.0f} s" if r.get("curve") else "")
                lines.append(f"| {r['method']} | {r['setting']} | {r['status']} | | | | | "
                             f"{r.get('error', '')}{last} |")
        lines.append("")
    return "\n".join(lines)


def figure(rows, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(sets), figsize=(6.5 * len(sets), 4.8), squeeze=False)
    for ax, ds in zip(axes[0], sets, strict=True):
        # finished fits, and killed ones that left a curve (drawn to their last point)
        rs = [r for r in rows if r["dataset"] == ds and (r["status"] == "ok" or r.get("curve"))]
        reg = rs and rs[0]["task"] == "regression"
        scale = 1.0 if reg else 100.0
        finals = [r["score"] if r["status"] == "ok" else r["curve"][-1][1] for r in rs]
        top = 2 * scale * min(finals, default=0.0)  # rows beyond: off the chart
        for r, final in zip(rs, finals, strict=True):
            label = r["method"] + ("" if r["setting"] == "default" else f" ({r['setting']})")
            if r["status"] != "ok":
                label += f" ({r['status']})"
            if scale * final > top > 0:
                label += f": {scale * final:.3g}, off the chart"
            style = "-" if r["method"].startswith("ks_") else "--"
            pts = list(r.get("curve") or [])
            if r["status"] == "ok" and (not pts or abs(pts[-1][1] - r["score"]) > 1e-9):
                pts.append((r["fit_s"], r["score"]))
            t, e = zip(*pts, strict=True)
            ax.plot(t, [scale * v for v in e], style, marker="o", ms=3, label=label)
        if top > 0:
            ax.set_ylim(top=min(ax.get_ylim()[1], top))
        ax.set_xscale("log")
        ax.set_xlabel("fit wall time, s")
        ax.set_ylabel("test RMSE" if reg else "test error, %")
        ax.set_title(ds)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", nargs="+", default=["fashion-mnist", "kin40k", "protein"],
                   help=f"{sorted(ALIASES)}, a devdata.yaml name, bayes-<n>, deformed-<n>, or "
                        "toy-classification / toy-regression")
    p.add_argument("--methods", nargs="*", help=f"default: all of {KS + PEERS}")
    p.add_argument("--settings", nargs="+", default=["own", "ks"], choices=("own", "ks"),
                   help="the peers' settings: their own and/or kernelscale's")
    p.add_argument("--ks-settings", type=lambda s: dict((k, float(v)) for k, v in
                                                        (kv.split("=") for kv in s.split(","))),
                   help="sigma=..,reg=..,n_components=..: kernelscale's settings without "
                        "fitting ks_nystrom here (e.g. from an earlier run)")
    p.add_argument("--no-ks-curves", action="store_true",
                   help="no second, segmented fit of kernelscale's iterative estimators")
    p.add_argument("--threads", type=int, default=1, help="BLAS / torch threads per fit")
    p.add_argument("--epochs", type=int, default=10, help="EigenPro 2's epochs")
    p.add_argument("--krr-rows", type=int, default=10000, help="KernelRidge's training rows")
    p.add_argument("--time-cap", type=float, default=900.0, help="seconds per fit")
    p.add_argument("--max-train", type=int, default=None, help="subsample training rows")
    p.add_argument("--toy-rows", type=int, default=600)
    p.add_argument("--devdata", default=str(realdata.DEFAULT_DEVDATA))
    p.add_argument("--cache", default=str(REPO / "results" / "realdata" / "data"))
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    p.add_argument("--report", nargs="*", metavar="CSV",
                   help="no race: join these runs' CSVs into the tag's csv/md/png")
    args = p.parse_args(argv)
    if args.threads < 1:
        raise SystemExit(f"peers: --threads {args.threads} must be >= 1")
    unknown = [m for m in args.methods or [] if m not in KS + PEERS]
    if unknown:
        raise SystemExit(f"peers: unknown method(s) {unknown}; known: {list(KS + PEERS)}")
    TIMING.update(threads=args.threads, epochs=args.epochs, krr_rows=args.krr_rows)
    realdata.limit_threads(args.threads)
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"peers-{args.tag}"
    if args.report:
        rows, seen = [], set()
        for r in (r for path in args.report for r in read_csv(path)):  # first file wins
            key = (r["dataset"], r["method"], r["setting"], r["threads"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
        write_csv(rows, stem.with_suffix(".csv"))
    else:
        rows = race(args)
    load_avg = os.getloadavg()[0]
    header = (f"# Peer race `{args.tag}`\n\n"
              f"{platform.node()}, {os.cpu_count()} CPUs ({realdata.cpu_name()}),"
              f" load average {load_avg:.1f} at the end; {(time.time() - t0) / 60:.1f} min in all."
              f"\n\nVersions: {versions()}.\n\nCommand: `python benchmarks/peers.py "
              f"{' '.join(argv if argv is not None else sys.argv[1:])}`\n\n"
              "Settings: `default` = kernelscale's registry defaults; `own` = the peer's own "
              "defaults or documented recommendation; `ks` = the peer at kernelscale's "
              "Nyström bandwidth sigma, regulariser nu and m. `load`: the machine's 1-minute "
              "load average as the fit ended (times on a loaded machine are longer). The peers' "
              "own settings:\n\n"
              + "\n".join(f"* {k}: {v}" for k, v in OWN.items()) + "\n\n## Per dataset\n")
    stem.with_suffix(".md").write_text(markdown(rows, header))
    if rows:
        figure(rows, stem.with_suffix(".png"))
    print(f"\nwrote {stem}.csv, .md, .png", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
