"""``kernelscale bench`` (``make bench``): the scale benchmark. Four measurements, one CSV each,
one Markdown report, one MLflow run.

1. time to target: every registry algorithm next to scikit-learn's SVC, Nystroem +
   RidgeClassifier / SGDClassifier and RBFSampler + SGDClassifier on the same generated data;
   target = SVC's test error + 0.3 points; iterative estimators fitted in warm-start segments,
   the test error checked after each (not counted as fit time);
2. throughput of random-Fourier feature blocks and exact kernel blocks as a fraction of the
   float32 GEMM rate measured in the same run (flops: 2 n d D for features, 2 n m d for a block);
3. cost per epoch as n grows (DSG: per iteration);
4. peak memory of out-of-core training (subprocess, zarr data) against the budget, and its
   throughput against the same run on in-memory data.

The report records the load average before and after. Usage::

    kernelscale bench                                  # all sections
    kernelscale bench --sections blocks memory --quick
    kernelscale bench --huge                           # adds n = 1e7 to the epoch-cost section

From Python: ``from kernelscale.pipeline.bench import Settings, run_benchmark``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .train_run import write_csv

SECTIONS = ("target", "blocks", "epoch", "memory")
DEFAULT_URI = "sqlite:///results/bench/mlflow.db"
EXPERIMENT = "kernelscale-bench"


@dataclass
class Settings:
    """What to run (the defaults: every section at full size)."""

    sections: tuple = SECTIONS
    n_train: int = 50_000
    n_test: int = 10_000
    n_features: int = 10
    algorithms: tuple | None = None          # None: every registered algorithm
    time_cap_s: float = 20.0                 # per algorithm in the time-to-target race
    slack: float = 0.003                     # 0.3 points
    epoch_ns: tuple = (10_000, 100_000, 1_000_000)
    huge: bool = False                       # add n = 1e7 to the epoch-cost section
    budget_mb: float = 32.0
    memory_rows: int = 2_500_000             # x 40 float32 columns = 381 MiB on disk
    memory_iters: int = 300                  # 3 timed segments of 100 batches of 2000 rows
    memory_reps: int = 3                     # rounds of (disk, disk with zarr's pool, memory)
    out_dir: str = "results/bench"
    tracking_uri: str | None = DEFAULT_URI   # None: no MLflow
    seed: int = 0


# ---- data
def generated(n: int, d: int, seed: int = 0):
    """Standardised two-class data (scikit-learn's make_classification: 2 clusters per class on
    a 6-D hypercube, 2 % flipped labels), float64."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=d, n_informative=min(d, 6),
                               n_redundant=min(2, max(0, d - 6)), flip_y=0.02, class_sep=1.0,
                               random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    return X, y


def _load():
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - not on Linux
        return float("nan")


# ---- 1. time to target
# Per-algorithm parameters for the race: one warm-start segment per fit call for iterative ones.
RACE_PARAMS: dict[str, dict] = {
    **{v: dict(batch_size=512, block_size=256, n_iter=20, bandwidth="median*0.5", t0=1000,
               engine={"dtype": "float32"}) for v in ("dsg", "udsg", "cdsg")},
    "eigenpro": dict(n_iter=20, subsample_size=2000, n_eigenvectors=100, engine={"dtype": "float32"}),
    "eigenpro_rf": dict(n_iter="1 epochs", n_components=2000, engine={"dtype": "float32"}),
    "kernel_sgd": dict(n_iter=20, subsample_size=2000, engine={"dtype": "float32"}),
    "rb_cg": dict(n_components=256),
    "rb_cd": dict(n_components=256),
    "rff_sgd": dict(n_iter="1 epochs", n_components=2000, batch_size=256, engine={"dtype": "float32"}),
    "rff_svrg": dict(n_iter="1 epochs", n_components=2000, batch_size=256, engine={"dtype": "float32"}),
    "nystrom": dict(n_components=1000, reg="1e-3/n"),
    "exact_krr": dict(reg="1e-3/n"),
    "pegasos": dict(n_iter=100, reg=1e-5, engine={"dtype": "float32"}),
    "norma": dict(n_iter=200, batch_size=64, engine={"dtype": "float32"}),
}
# libsvm *is* scikit-learn's SVC (the reference), so it is not raced against itself
SKIP = {"libsvm": "same as the SVC reference"}


def _race(make_segment, Xte, yte, target: float, cap: float, iterative: bool):
    """Fit segment after segment until the test error <= target or ``cap`` seconds of fitting."""
    fit_s, segments, best, err, reached_at = 0.0, 0, math.inf, math.nan, None
    while True:
        t = time.perf_counter()
        est = make_segment()
        fit_s += time.perf_counter() - t
        segments += 1
        err = float(np.mean(est.predict(Xte) != yte))
        best = min(best, err)
        if err <= target and reached_at is None:
            reached_at = fit_s
        if reached_at is not None or not iterative or fit_s >= cap:
            return dict(time_to_target_s=reached_at, fit_s=fit_s, test_error=err,
                        best_error=best, segments=segments, reached=reached_at is not None)


def _sklearn_entries(sigma, seed, n_train):
    """(name, factory returning a segment-fitting closure, iterative)."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import RidgeClassifier, SGDClassifier
    from sklearn.pipeline import make_pipeline

    gamma = 0.5 / sigma**2

    def nystroem_ridge(Xtr, ytr):
        model = make_pipeline(Nystroem(gamma=gamma, n_components=1000, random_state=seed),
                              RidgeClassifier(alpha=1e-3))
        return lambda: model.fit(Xtr, ytr)

    def features_sgd(transformer):
        def factory(Xtr, ytr):
            feat = transformer.fit(Xtr[:2000])
            sgd = SGDClassifier(loss="hinge", alpha=1.0 / n_train, random_state=seed)
            classes, Z = np.unique(ytr), []
            model = SimpleNamespace(predict=lambda X: sgd.predict(feat.transform(X)))

            def segment():  # one epoch of SGD per segment (features computed in the first)
                if not Z:
                    Z.append(feat.transform(Xtr).astype(np.float32))
                sgd.partial_fit(Z[0], ytr, classes=classes)
                return model
            return segment
        return factory

    return [
        ("sklearn Nystroem(1000)+Ridge", nystroem_ridge, False),
        ("sklearn Nystroem(1000)+SGD", features_sgd(Nystroem(gamma=gamma, n_components=1000,
                                                              random_state=seed)), True),
        ("sklearn RBFSampler(2000)+SGD", features_sgd(RBFSampler(gamma=gamma, n_components=2000,
                                                                  random_state=seed)), True),
    ]


def time_to_target(s: Settings, log=print) -> list[dict]:
    from sklearn.svm import SVC

    from ..kernels import median_bandwidth
    from . import registry

    X, y = generated(s.n_train + s.n_test, s.n_features, s.seed)
    Xtr, ytr, Xte, yte = X[: s.n_train], y[: s.n_train], X[s.n_train :], y[s.n_train :]
    sigma = median_bandwidth(Xtr, seed=s.seed)
    # the reference: one fit of SVC, timed and scored as a race segment
    svc = _race(lambda: SVC(C=1.0, gamma=0.5 / sigma**2, cache_size=1000).fit(Xtr, ytr), Xte, yte,
                -math.inf, 0.0, False)
    svc_s, svc_err = svc["fit_s"], svc["test_error"]
    target = svc_err + s.slack
    log(f"[target] SVC n={s.n_train}: fit {svc_s:.1f} s, test error {svc_err:.4f} -> target {target:.4f}")
    rows = [dict(algorithm="sklearn SVC (reference)", library="sklearn", reached=True,
                 time_to_target_s=svc_s, fit_s=svc_s, test_error=svc_err, best_error=svc_err,
                 segments=1, note="")]
    for name in s.algorithms or registry.ALGORITHMS:
        if name in SKIP:
            rows.append(dict(algorithm=name, library="kernelscale", reached=None, note=SKIP[name]))
            continue
        cls = registry.estimator_class(name, "classification")
        iterative = bool(getattr(cls, "iterative", False))
        # the SVC's bandwidth unless the race settings choose one (DSG family: half of it)
        params = {"bandwidth": sigma if name not in ("rb_cg", "rb_cd") else "median",
                  **RACE_PARAMS.get(name, {}), "random_state": s.seed}
        params |= {"warm_start": True} if iterative else {}
        est = registry.make_estimator(name, "classification", **{
            k: v for k, v in params.items() if k in cls().get_params()})
        try:
            res = _race(lambda est=est: est.fit(Xtr, ytr), Xte, yte, target, s.time_cap_s, iterative)
            note = ""
        except (ValueError, MemoryError, FloatingPointError) as e:  # e.g. exact_krr's max_n
            res, note = dict(reached=None), str(e).splitlines()[0][:120]
        rows.append(dict(algorithm=name, library="kernelscale", note=note, **res))
        log(f"[target] {name}: {_fmt_race(rows[-1])}")
    for label, factory, iterative in _sklearn_entries(sigma, s.seed, s.n_train):
        res = _race(factory(Xtr, ytr), Xte, yte, target, s.time_cap_s, iterative)
        rows.append(dict(algorithm=label, library="sklearn", note="", **res))
        log(f"[target] {label}: {_fmt_race(rows[-1])}")
    for r in rows:
        r.update(n_train=s.n_train, target_error=target,
                 speedup_vs_svc=(svc_s / r["time_to_target_s"]) if r.get("time_to_target_s") else None)
    return rows


def _fmt_race(r):
    if r.get("reached") is None:
        return r.get("note", "")
    tt = r["time_to_target_s"]
    return (("not reached" if tt is None else f"reached in {tt:.2f} s") + f"; fit {r['fit_s']:.2f} "
            f"s, error {r['test_error']:.4f} (best {r['best_error']:.4f}), {r['segments']} segments")


# ---- 2. throughput of feature and kernel blocks
def _best_time(fn, reps=3):
    fn()  # warm-up: caches, thread pools
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def matmul_rate(n: int = 2048) -> float:
    """float32 GEMM rate (flop/s) of this machine now: best of 3 n x n x n products."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    return 2.0 * n**3 / _best_time(lambda: A @ B)


def block_throughput(s: Settings, log=print) -> list[dict]:
    from ..kernels import FourierBlocks, make_kernel

    rate = matmul_rate()
    log(f"[blocks] float32 GEMM: {rate / 1e9:.1f} GFLOP/s")
    rows = [dict(block="float32 GEMM 2048^3", n=2048, d=2048, width=2048, gflops=rate / 1e9,
                 fraction_of_matmul=1.0)]
    rng = np.random.default_rng(s.seed)
    n, F, groups = 8192, 256, 8
    for d in (10, 128, 784):
        X = rng.standard_normal((n, d), dtype=np.float32)
        kern = make_kernel("gaussian", math.sqrt(d))
        blocks = FourierBlocks(kern, d, F, s.seed, dtype=np.float32)
        t = _best_time(lambda: blocks.features(X, 0, groups))  # noqa: B023
        flops = 2.0 * n * d * F * groups
        rows.append(dict(block="Fourier features (FourierBlocks.features)", n=n, d=d,
                         width=F * groups, gflops=flops / t / 1e9, fraction_of_matmul=flops / t / rate))
        Y = X[:2048]
        t = _best_time(lambda: kern(X, Y))  # noqa: B023
        flops = 2.0 * n * 2048 * d
        rows.append(dict(block="exact Gaussian kernel block make_kernel()(X, Y)", n=n, d=d,
                         width=2048, gflops=flops / t / 1e9, fraction_of_matmul=flops / t / rate))
    for r in rows[1:]:
        log(f"[blocks] {r['block']} d={r['d']}: {r['gflops']:.1f} GFLOP/s = "
            f"{100 * r['fraction_of_matmul']:.0f} % of GEMM")
    return rows


# ---- 3. cost per epoch as n grows
def _epoch_cost(name: str, X, y, seed: int) -> tuple[float, str]:
    """Seconds for one unit of work at this n, and what the unit is."""
    from . import registry

    if name == "dsg":
        est = registry.make_estimator("dsg", "classification", batch_size=512, block_size=256,
                                      n_iter=10, bandwidth=3.0, engine={"dtype": "float32"}, warm_start=True,
                                      random_state=seed)
        est.fit(X, y)  # set-up and the first blocks outside the timing
        t = time.perf_counter()
        est.fit(X, y)
        return (time.perf_counter() - t) / 10, "iteration (11-20)"
    if name in ("rb_cg", "rb_cd"):
        # 32 grids: at n = 1e7 the (n, R) bin hashes and the CSR features take ~8 GB
        est = registry.make_estimator(name, "classification", n_components=32, n_iter=10, tol=0.0,
                                      random_state=seed)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # max_iter reached on purpose: fixed work per n
            est.fit(X, y)
        return time.perf_counter() - t, ("features + 10 CG passes" if name == "rb_cg"
                                         else "features + 10 CD epochs")
    params = (dict(batch_size=512, subsample_size=2000, n_eigenvectors=40)
              if name == "eigenpro_rf" else dict(batch_size=256))
    est = registry.make_estimator(name, "classification", n_iter=1, n_components=1000,
                                  bandwidth=3.0, engine={"dtype": "float32"}, warm_start=True,
                                  random_state=seed, **params)
    est.fit(X, y)  # set-up (bandwidth sample, eigensystem, step size) outside the timing
    est.set_params(n_iter="1 epochs")
    t = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t, "epoch"


def epoch_costs(s: Settings, log=print) -> list[dict]:
    ns = list(s.epoch_ns) + ([10_000_000] if s.huge else [])
    rows = []
    for n in ns:
        X, y = generated(int(n), s.n_features, s.seed)
        X = X.astype(np.float32)
        for name in ("eigenpro_rf", "rff_sgd", "rff_svrg", "rb_cg", "rb_cd", "dsg"):
            sec, unit = _epoch_cost(name, X, y, s.seed)
            rows.append(dict(algorithm=name, n=int(n), seconds=sec, unit=unit,
                             us_per_row=1e6 * sec / n if name != "dsg" else None))
            log(f"[epoch] {name} n={int(n)}: {sec:.3f} s per {unit}")
        del X, y
    # exponent of a power-law fit time ~ n^p over the measured n (1 = linear)
    for name in {r["algorithm"] for r in rows}:
        pts = [(r["n"], r["seconds"]) for r in rows if r["algorithm"] == name]
        if len(pts) >= 2:
            p = float(np.polyfit(np.log([a for a, _ in pts]), np.log([b for _, b in pts]), 1)[0])
            for r in rows:
                if r["algorithm"] == name:
                    r["exponent"] = p
    return rows


# ---- 4. peak memory against the budget (subprocesses, zarr data)
_CHILD = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from kernelscale.pipeline import registry
    from kernelscale.budget import peak_rss_bytes
    from kernelscale.io import open_zarr

    path, algo, budget, n_iter, mode = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    if mode == "disk, zarr pool":  # zarr's default I/O thread pool (open_zarr's choice undone)
        import zarr
        zarr.config.set({"threading.max_workers": os.cpu_count() + 4})
    X, y = open_zarr(path, "X"), open_zarr(path, "y")
    params = dict(n_iter=n_iter, batch_size=2000, bandwidth=4.0, random_state=0,
                  engine={"dtype": "float32"})
    params.update(dict(block_size=16) if algo == "dsg" else dict(n_components=256))
    window = None
    if mode == "memory":  # the window the budget gives on disk: a 1-step probe fit says it
        probe = registry.make_estimator(algo, "regression", **{
            **params, "n_iter": 1, "engine": {"dtype": "float32", "memory_budget": budget}})
        window = probe.fit(X, y).window_rows_
        del probe
    # warm-up fit on a few rows: code that fit imports lazily is not part of the run's memory
    registry.make_estimator(algo, "regression", **{**params, "n_iter": 2, "batch_size": 50}).fit(
        np.random.default_rng(0).standard_normal((100, 3)).astype(np.float32), np.zeros(100))
    base = peak_rss_bytes()
    if mode == "memory":
        X, y = X[:], y[:]  # the whole data set in RAM; same window -> the same batches
        params["engine"] = {"dtype": "float32", "window_rows": window}
    else:
        params["engine"] = {"dtype": "float32", "memory_budget": budget}
    est = registry.make_estimator(algo, "regression", warm_start=True, **{**params, "n_iter": 1})
    t = time.perf_counter()
    est.fit(X, y)  # set-up (y, sample rows, step size) + 1 step: timed apart from streaming
    setup = time.perf_counter() - t
    # best of 3 segments: the machine is shared, and the fastest segment is the least disturbed
    seg = max(1, n_iter // 3)
    est.set_params(n_iter=seg)
    secs = []
    for _ in range(3):
        t = time.perf_counter()
        est.fit(X, y)
        secs.append(time.perf_counter() - t)
    peak = peak_rss_bytes()
    print(json.dumps(dict(base=base, peak=peak, seconds=sum(secs), setup_s=setup,
                          window_rows=est.window_rows_, rows_per_s=seg * 2000 / min(secs))))
""")


def _write_zarr(path, n: int, d: int, chunk_rows: int = 50_000):
    import zarr

    g = zarr.open_group(str(path), mode="w")
    X = g.create_array("X", shape=(n, d), chunks=(chunk_rows, d), dtype="f4", compressors=None)
    y = g.create_array("y", shape=(n,), chunks=(chunk_rows,), dtype="f4", compressors=None)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(d).astype(np.float32) / 4
    for lo in range(0, n, chunk_rows):
        hi = min(n, lo + chunk_rows)
        B = rng.standard_normal((hi - lo, d), dtype=np.float32)
        X[lo:hi] = B
        y[lo:hi] = np.sin(B @ w)


def peak_memory(s: Settings, log=print) -> list[dict]:
    d = 40
    data_mb = s.memory_rows * d * 4 / 2**20
    rows = []
    with tempfile.TemporaryDirectory(dir=s.out_dir) as tmp:
        path = Path(tmp) / "data.zarr"
        t = time.perf_counter()
        _write_zarr(path, s.memory_rows, d)
        log(f"[memory] wrote {data_mb:.0f} MiB zarr in {time.perf_counter() - t:.1f} s")
        y_mb = s.memory_rows * 8 / 2**20  # y held in memory as float64, outside the budget
        cores = os.cpu_count() or 1
        # BLAS on every core, and on all but one (left to the prefetch thread)
        for algo in ("dsg", "rff_sgd"):
            for blas in [cores] + ([cores - 1] if cores > 1 else []):
                env = {**os.environ, "OMP_NUM_THREADS": str(blas),
                       "OPENBLAS_NUM_THREADS": str(blas), "MKL_NUM_THREADS": str(blas)}
                runs: dict[str, list[dict]] = {}
                for _ in range(s.memory_reps):  # modes interleaved in each round
                    for mode in ("disk", "disk, zarr pool", "memory"):
                        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), algo,
                                              str(s.budget_mb), str(s.memory_iters), mode],
                                             capture_output=True, text=True, timeout=600, env=env)
                        if out.returncode != 0:
                            raise RuntimeError(f"memory child {algo}/{mode} failed: "
                                               f"{out.stderr.strip().splitlines()[-1]}")
                        runs.setdefault(mode, []).append(
                            json.loads(out.stdout.strip().splitlines()[-1]))
                # median throughput, largest peak over the rounds
                recs = {mode: dict(rs[0], rows_per_s=float(np.median([r["rows_per_s"] for r in rs])),
                                   peak=max(r["peak"] - r["base"] for r in rs), base=0)
                        for mode, rs in runs.items()}
                for mode, r in recs.items():
                    used = (r["peak"] - r["base"]) / 2**20
                    rows.append(dict(algorithm=algo, mode=mode, blas_threads=blas, data_mb=data_mb,
                                     budget_mb=s.budget_mb, data_over_budget=data_mb / s.budget_mb,
                                     y_mb=y_mb, peak_over_baseline_mb=used,
                                     over_budget_plus_y_mb=used - y_mb - s.budget_mb,
                                     engine={"window_rows": r["window_rows"]}, setup_s=r["setup_s"],
                                     rows_per_s=r["rows_per_s"],
                                     throughput_vs_memory=r["rows_per_s"]
                                     / recs["memory"]["rows_per_s"]))
                    log(f"[memory] {algo} {mode} blas={blas}: peak {used:.0f} MiB over baseline "
                        f"(budget {s.budget_mb:g}, y {y_mb:.0f}), {r['rows_per_s']:.0f} rows/s "
                        f"({r['rows_per_s'] / recs['memory']['rows_per_s']:.2f} of in-memory)")
    return rows


# ---- output: Markdown, MLflow (``kernelscale reproduce`` writes with these too)
def _parse(v: str):
    """A CSV cell back to int / float / bool / None / str (for tables of earlier runs)."""
    if v in ("", None):
        return None
    if v in ("True", "False"):
        return v == "True"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def markdown_table(rows: list[dict], keys=None) -> str:
    """``rows`` as a Markdown table (numbers to 4 digits); ``keys``: the columns (default: every
    key in order of first appearance)."""
    keys = keys or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_cell(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def _metrics(results: dict) -> dict[str, float]:
    """Flat numeric metrics for MLflow (names: section.subject.quantity)."""
    m = {}

    def put(key, v):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            m[key.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "_")] = float(v)

    for r in results.get("target", []):
        put(f"target.{r['algorithm']}.time_to_target_s", r.get("time_to_target_s"))
        put(f"target.{r['algorithm']}.test_error", r.get("test_error"))
    for r in results.get("blocks", []):
        kind = "gemm" if "GEMM" in r["block"] else "fourier" if "Fourier" in r["block"] else "kernel"
        put(f"blocks.{kind}.d{r['d']}.fraction_of_matmul", r["fraction_of_matmul"])
        put(f"blocks.{kind}.d{r['d']}.gflops", r["gflops"])
    for r in results.get("epoch", []):
        put(f"epoch.{r['algorithm']}.n{r['n']}.seconds", r["seconds"])
        put(f"epoch.{r['algorithm']}.exponent", r.get("exponent"))
    for r in results.get("memory", []):
        key = f"memory.{r['algorithm']}.{r['mode'].replace(', ', '_').replace(' ', '_')}" \
              f".blas{r['blas_threads']}"
        put(f"{key}.peak_over_baseline_mb", r["peak_over_baseline_mb"])
        put(f"{key}.throughput_vs_memory", r["throughput_vs_memory"])
    return m


def log_run(uri: str, experiment: str, run_name: str, params: dict, metrics=None, tags=None,
            files=()) -> str:
    """One MLflow run in ``experiment`` of the store at ``uri``: ``params`` and ``tags`` as text
    (500 characters at most), ``metrics`` and the ``files`` that exist; returns its id."""
    import mlflow

    from .tracking import init_store

    init_store(uri, experiment)  # create the database once, before any logging
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name=run_name) as run:
        mlflow.log_params({k: str(v)[:500] for k, v in params.items()})
        mlflow.set_tags({k: str(v)[:500] for k, v in (tags or {}).items()})
        mlflow.log_metrics(metrics or {})
        for f in files:
            if Path(f).is_file():
                mlflow.log_artifact(str(f))
        return run.info.run_id


def run_benchmark(s: Settings | None = None, log=print) -> dict:
    """Run the selected sections; writes ``<out_dir>/{section}.csv`` and ``bench.md`` and logs to
    MLflow when ``tracking_uri`` is set. Returns {section: rows}."""
    s = s or Settings()
    out = Path(s.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started, load0 = time.perf_counter(), _load()
    funcs = {"target": time_to_target, "blocks": block_throughput, "epoch": epoch_costs,
             "memory": peak_memory}
    results, files = {}, []
    for name in s.sections:
        t = time.perf_counter()
        results[name] = funcs[name](s, log=log)
        log(f"[{name}] done in {time.perf_counter() - t:.0f} s")
        write_csv(out / f"{name}.csv", results[name])
        files.append(out / f"{name}.csv")
    wall, load1 = time.perf_counter() - started, _load()
    titles = {"target": "Time to target (SVC test error + %.1f points)" % (100 * s.slack),
              "blocks": "Feature / kernel block throughput vs float32 GEMM",
              "epoch": "Cost per epoch as n grows (exponent: time ~ n^p)",
              "memory": "Peak RSS over baseline vs memory budget (out-of-core, subprocess)"}
    md = [f"# kernelscale benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
          f"Machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()};"
          f" load average {load0:.1f} before, {load1:.1f} after (shared machine: timings are noisy)."
          f" Wall time {wall:.0f} s.", ""]
    for name in SECTIONS:
        if name in results:
            md += [f"## {titles[name]}", "", markdown_table(results[name]), ""]
        elif (out / f"{name}.csv").is_file():  # a section run earlier: keep it in the report
            with open(out / f"{name}.csv", newline="") as f:
                earlier = [{k: _parse(v) for k, v in r.items()} for r in csv.DictReader(f)]
            md += [f"## {titles[name]} (from an earlier run)", "", markdown_table(earlier), ""]
    (out / "bench.md").write_text("\n".join(md))
    files.append(out / "bench.md")
    if s.tracking_uri:
        params = dict(asdict(s), machine=platform.node(), cpus=os.cpu_count(),
                      python=platform.python_version())
        run_id = log_run(s.tracking_uri, EXPERIMENT, f"bench-{time.strftime('%Y%m%d-%H%M%S')}",
                         params, _metrics(results), files=files)
        log(f"MLflow run {run_id} in {s.tracking_uri}")
    log(f"wrote {out / 'bench.md'} ({wall:.0f} s)")
    return results


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kernelscale bench``."""
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--n-train", type=int, default=Settings.n_train)
    p.add_argument("--n-test", type=int, default=Settings.n_test)
    p.add_argument("--algorithms", nargs="+", default=None, help="registry names (default: all)")
    p.add_argument("--time-cap", type=float, default=Settings.time_cap_s,
                   help="seconds of fitting per algorithm in the race")
    p.add_argument("--epoch-ns", type=float, nargs="+", default=list(Settings.epoch_ns))
    p.add_argument("--huge", action="store_true", help="add n = 1e7 to the epoch-cost section")
    p.add_argument("--budget-mb", type=float, default=Settings.budget_mb)
    p.add_argument("--memory-rows", type=int, default=Settings.memory_rows)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--render", action="store_true",
                   help="only rewrite bench.md from the CSVs already in --out (no runs, no MLflow)")
    p.add_argument("--out", default=Settings.out_dir)
    p.add_argument("--tracking-uri", default=DEFAULT_URI, help="MLflow URI ('' for none)")
    p.add_argument("--seed", type=int, default=0)


def settings(a) -> Settings:
    """The ``Settings`` of ``add_arguments``'s options ``a``."""
    s = Settings(sections=tuple(a.sections), n_train=a.n_train, n_test=a.n_test,
                 algorithms=tuple(a.algorithms) if a.algorithms else None, time_cap_s=a.time_cap,
                 epoch_ns=tuple(int(n) for n in a.epoch_ns), huge=a.huge, budget_mb=a.budget_mb,
                 memory_rows=a.memory_rows, out_dir=a.out, tracking_uri=a.tracking_uri or None,
                 seed=a.seed)
    if a.render:
        s.sections, s.tracking_uri = (), None
    if a.quick:
        s.n_train, s.n_test, s.time_cap_s = 3000, 1000, 3.0
        s.epoch_ns, s.memory_rows, s.memory_iters, s.memory_reps = (2000, 20000), 200_000, 20, 1
    return s


def main(argv=None) -> int:
    """``kernelscale bench`` from Python: ``main(["--quick", "--sections", "blocks"])``."""
    p = argparse.ArgumentParser(prog="kernelscale bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    run_benchmark(settings(p.parse_args(argv)))
    return 0
