"""GPU benchmark (issue 11): block throughput against the device's own GEMM rate, and one
10,000,000-point problem streamed from zarr on the device's disk.

Sections (``--sections``):

* ``blocks``: the float32 GEMM rate and the device-to-device copy bandwidth, measured here; then
  random Fourier feature blocks (``FourierBlocks.features``: X W + b, cos, scale) and exact
  Gaussian kernel blocks (``make_kernel("gaussian")(X, Y)``) at several input dimensions d.
  Each is reported as matmul-equivalent flop/s (2 n d D for features, 2 n m d for a kernel block)
  over the GEMM rate, and against the time floor max(flops / GEMM rate, bytes written /
  bandwidth): at small d a block is bound by writing its output, not by arithmetic.
* ``scale``: 10^7 training rows (d = 20, float32, 100k-row chunks, uncompressed) written to zarr
  on local disk: generator ``bayes`` (kernelscale.pipeline.data.bayes, the pipeline's too), a
  binary target 1[f(x) + 0.3 e > 0] with f known, so the Bayes error is known: of the
  distribution (``bayes_error_population``) and of the test rows given their x (``bayes_error``,
  the mean of Phi(-|f(x)| / 0.3)); then DSG, CDSG, EigenPro-RF and RFF-SGD trained out of core on
  the GPU under ``memory_budget``; wall time, peak GPU memory (the cupy pool's bytes, polled every
  2 ms) and the test error on 200k held-out rows (rows n .. n + 199,999 of the same stream).

* ``huge``: ``--n`` (e.g. 10^8) ``bayes`` rows written once to ``--workdir`` by parallel
  processes, the disk's cold read rate, then one DSG-family estimator at its defaults in
  warm-started segments of ``--segment-epochs`` passes until ``--scale-cap`` seconds, each segment
  checkpointed (a pickle in ``--workdir``: a later call resumes) and recorded (test error, GPU pool
  and host RSS peaks, bytes read from disk); finally f over all blocks for one batch with the
  fused sum and with the feature matrices formed.
* ``rff-batch``: RFF-SGD on the first ``--rff-rows`` rows of that data at each ``--rff-batches``
  batch size for ``--rff-cap`` seconds: steps/s and the test error after each pass.

Timings: CUDA work is synchronised before each clock read; medians of repeated runs after a
warm-up. TF32 is off unless ``CUPY_TF32=1`` is set (cupy's default): the GEMM rate is plain FP32.

    python benchmarks/gpu.py --sections blocks scale --out benchmarks/results --tag 2026-11-24-h100
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def _cp():
    import cupy

    return cupy


def _sync():
    _cp().cuda.Device().synchronize()


def _median_time(fn, reps: int = 10, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    _sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        _sync()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def device_info() -> dict:
    cp = _cp()
    p = cp.cuda.runtime.getDeviceProperties(0)
    free, total = cp.cuda.runtime.memGetInfo()
    return dict(gpu=p["name"].decode(), sm_count=p["multiProcessorCount"],
                memory_gib=round(total / 2**30, 1), cupy=cp.__version__,
                cuda_runtime=cp.cuda.runtime.runtimeGetVersion(),
                driver=cp.cuda.runtime.driverGetVersion(),
                tf32=os.environ.get("CUPY_TF32", "0"), host=platform.node(),
                cpus=os.cpu_count())


def gemm_rate(n: int = 8192) -> float:
    cp = _cp()
    rng = cp.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=cp.float32)
    b = rng.standard_normal((n, n), dtype=cp.float32)
    c = cp.empty((n, n), dtype=cp.float32)
    return 2.0 * n**3 / _median_time(lambda: cp.matmul(a, b, out=c))


def copy_bandwidth(nbytes: int = 2 * 2**30) -> float:
    cp = _cp()
    a = cp.random.default_rng(0).random(nbytes // 4, dtype=cp.float32)
    b = cp.empty_like(a)
    return 2.0 * nbytes / _median_time(lambda: b.__setitem__(Ellipsis, a))  # read + write


def blocks(log=print) -> list[dict]:
    cp = _cp()
    from kernelscale.kernels import FourierBlocks, make_kernel

    rate, bw = gemm_rate(), copy_bandwidth()
    log(f"[blocks] float32 GEMM {rate / 1e12:.1f} TFLOP/s, copy {bw / 1e12:.2f} TB/s (read+write)")
    rows = [dict(kind="gemm", d=8192, rows=8192, cols=8192, seconds=2 * 8192**3 / rate,
                 tflops=rate / 1e12, frac_gemm=1.0, frac_floor=1.0)]
    k = make_kernel("gaussian", 1.0)
    rng = np.random.default_rng(0)
    for d in (16, 64, 256, 784, 2048):
        n, F, nblocks = 16384, 512, 16  # 8192 features: one DSG prediction group
        X = cp.asarray(rng.standard_normal((n, d)), dtype=cp.float32)
        fb = FourierBlocks(k, d, F, seed=0, xp=cp, dtype=np.float32)
        fb.features(X, 0, nblocks)  # parameters cached on the device, as in training
        sec = _median_time(lambda fb=fb, X=X, k=nblocks: fb.features(X, 0, k))
        flops, out_bytes = 2.0 * n * d * F * nblocks, 4.0 * n * F * nblocks
        floor = max(flops / rate, out_bytes / bw * 2)  # GEMM output written + read by the pass
        rows.append(dict(kind="fourier features", d=d, rows=n, cols=F * nblocks, seconds=sec,
                         tflops=flops / sec / 1e12, frac_gemm=flops / sec / rate,
                         frac_floor=floor / sec))
        Y = X[: n // 2]
        sec = _median_time(lambda X=X, Y=Y: k(X, Y))
        flops, out_bytes = 2.0 * n * (n // 2) * d, 4.0 * n * (n // 2)
        floor = max(flops / rate, out_bytes / bw * 2)
        rows.append(dict(kind="gaussian kernel", d=d, rows=n, cols=n // 2, seconds=sec,
                         tflops=flops / sec / 1e12, frac_gemm=flops / sec / rate,
                         frac_floor=floor / sec))
        for r in rows[-2:]:
            log(f"[blocks] {r['kind']:16s} d={d:5d}: {r['seconds'] * 1e3:7.2f} ms  "
                f"{r['tflops']:6.2f} TFLOP/s = {r['frac_gemm']:.2f} of GEMM, "
                f"{r['frac_floor']:.2f} of the floor")
        del X, Y, fb
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def dsg_profile(log=print) -> None:
    """Where a DSG iteration's time goes on the GPU at 200 blocks (n = 50,000, d = 100, B = 2048,
    F = 512, float32): device time of the prediction over all blocks vs the wall time, and a host
    profile."""
    import cProfile
    import pstats

    from cupyx.profiler import benchmark as cupy_bench

    from kernelscale.estimators import DSGClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50_000, 100)).astype(np.float32)
    y = (np.sin(X[:, :5].sum(axis=1)) > 0).astype(int)
    clf = DSGClassifier(n_iter=200, batch_size=2048, block_size=512, engine={"dtype": "float32", "device": "gpu"}, random_state=0, bandwidth="median", warm_start=True)
    clf.fit(X, y)
    cp = _cp()
    Xb = cp.asarray(X[:2048])
    log(str(cupy_bench(clf.model_.decision, (Xb,), n_repeat=20, name="decision, 200 blocks")))
    clf.set_params(n_iter=20)
    prof = cProfile.Profile()
    prof.enable()
    clf.fit(X, y)
    _sync()
    prof.disable()
    import io

    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
    log(buf.getvalue())


# -- scale --------------------------------------------------------------------------------------

D_SCALE, NOISE = 20, 0.3


def _write_rows(job):
    """Rows lo .. hi - 1 of the stream into arrays (name, "y" + name[1:]) from row ``first``."""
    import zarr

    from kernelscale.pipeline.data.bayes import bayes_chunks, conditional_error

    path, name, params, chunk, first, lo, hi = job
    g = zarr.open_group(str(path), mode="r+")
    bayes = 0.0
    for row, X, y in bayes_chunks(params, chunk, lo, hi):
        g[name][row - first:row - first + len(X)] = X
        g["y" + name[1:]][row - first:row - first + len(y)] = y
        if name == "X_test":  # P(label != Bayes prediction | x) for each test row, exactly
            bayes += float(conditional_error(params, X).sum())
    return bayes


def write_problem(path: Path, n: int, n_test: int, chunk: int = 100_000, seed: int = 0,
                  workers: int = 1):
    """Generator ``bayes``'s rows 0 .. n - 1 (train) and n .. n + n_test - 1 (test) to zarr,
    chunk by chunk (one chunk and one 8192-row block in memory per process; ``workers``
    processes, each a run of whole chunks). Returns the Bayes error of the test rows given
    their x."""
    import multiprocessing as mp

    import zarr

    from kernelscale.pipeline.data.bayes import bayes_params

    params = bayes_params(n, D_SCALE, NOISE, seed)
    g = zarr.open_group(str(path), mode="w")
    jobs = []
    for name, lo, rows in (("X", 0, n), ("X_test", n, n_test)):
        g.create_array(name, shape=(rows, D_SCALE), chunks=(chunk, D_SCALE), dtype="f4",
                       compressors=None)
        g.create_array("y" + name[1:], shape=(rows,), chunks=(chunk,), dtype="i1",
                       compressors=None)
        per = max(chunk, -(-rows // chunk // max(1, workers)) * chunk)
        jobs += [(path, name, params, chunk, lo, a, min(lo + rows, a + per))
                 for a in range(lo, lo + rows, per)]
    if workers <= 1:
        bayes_test = sum(_write_rows(j) for j in jobs)
    else:
        with mp.get_context("fork").Pool(workers) as pool:
            bayes_test = sum(pool.map(_write_rows, jobs))
    return bayes_test / n_test


class GpuPeak:
    """Largest cupy memory-pool size seen (polled): the GPU memory a fit held at its peak."""

    def __init__(self, every_s: float = 0.002):
        self.pool = _cp().get_default_memory_pool()
        self.every = every_s
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self):
        self.pool.free_all_blocks()
        self.base = self.pool.used_bytes()
        self.peak = self.pool.total_bytes()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.pool.total_bytes())
            time.sleep(self.every)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.pool.total_bytes())


SCALE_ESTIMATORS = ("dsg", "udsg", "cdsg", "eigenpro_rf", "rff_sgd")
ITERATIVE = ("dsg", "udsg", "cdsg")
ONE_FIT = ("nystrom",)  # not warm-startable: one fit, its one pass (or CG passes) over the rows


def race(X, y, Xte, yte, names, *, bayes: float, budget_mb: float, cap_s: float,
         caps: dict | None = None, bandwidth="auto", segment_epochs: float = 0.25, max_epochs: float = 8.0,
         target: float = 0.005, extra: dict | None = None, log=print,
         on_row=None) -> list[dict]:
    """Each estimator at its defaults (``bandwidth`` aside) on the GPU, streamed from the zarr
    arrays ``X, y`` under ``memory_budget=budget_mb``, fitted in warm-started segments of
    ``segment_epochs`` epochs (DSG family; one epoch for the others) until ``cap_s`` seconds of
    fitting (``caps[name]`` where given), ``max_epochs`` epochs, or the test error within ``target`` of ``bayes`` (when given:
    the time to get there is recorded). Fit time includes reading the data; the test error after
    each segment is measured outside it. ``on_row(rows)`` after each estimator: the rows so far
    survive a step killed at its time limit."""
    from kernelscale.pipeline import registry
    from kernelscale.solvers.dsg import auto_sizes

    n, d = X.shape
    rows = []
    for name in names:
        iterative = name in ITERATIVE
        engine = {"device": "gpu", "memory_budget": budget_mb, "dtype": "float32"}
        one_fit = name in ONE_FIT
        est = registry.make_estimator(name, "classification", engine=engine, random_state=0,
                                      bandwidth=bandwidth, **({} if one_fit else
                                                              {"warm_start": True}))
        if iterative:
            B = min(n, auto_sizes(n, d)[1])
            per_segment = max(1, int(np.ceil(segment_epochs * n / B)))
            est.set_params(n_iter=per_segment)
        elif not one_fit:
            est.set_params(n_iter="1 epochs")
        fit_s, epochs, curve, reached = 0.0, 0.0, [], None
        cap = (caps or {}).get(name, cap_s)
        with GpuPeak() as peak:
            while fit_s < cap and epochs < max_epochs - 1e-9:
                t = time.perf_counter()
                est.fit(X, y)
                fit_s += time.perf_counter() - t
                epochs = (est.n_iter_ * est.batch_size_ / n) if iterative else epochs + 1
                err = float(np.mean(est.predict(Xte) != yte))
                curve.append((round(fit_s, 1), round(epochs, 3), err, round(peak.peak / 2**20)))
                log(f"[race] {name}: {fit_s:.0f} s, {epochs:.2f} passes, test error "
                    f"{100 * err:.2f} %" + (f" (Bayes {100 * bayes:.2f} %)" if bayes else "")
                    + f", GPU peak so far {peak.peak / 2**20:.0f} MiB (pool now "
                    f"{peak.pool.used_bytes() / 2**20:.0f} MiB in use of "
                    f"{peak.pool.total_bytes() / 2**20:.0f})")
                if bayes is not None and reached is None and err <= bayes + target:
                    reached = fit_s
                    break
                if one_fit:
                    break
        t = time.perf_counter()
        err = float(np.mean(est.predict(Xte) != yte))
        pred_s = time.perf_counter() - t
        chosen = {k: getattr(est, k, None) for k in ("batch_size_", "block_size_", "n_blocks_",
                                                     "n_components_", "bandwidth_", "reg_",
                                                     "eta0_", "window_rows_", "n_iter_")}
        rows.append(dict(estimator=name, n_train=n, d=d, fit_s=round(fit_s, 1), passes=epochs,
                         test_error=err, bayes_error=bayes, time_to_target_s=reached,
                         predict_s=round(pred_s, 2), n_test=len(yte),
                         gpu_peak_mib=round(peak.peak / 2**20), budget_mb=budget_mb,
                         bandwidth=bandwidth, chosen=json.dumps({k: (float(v) if isinstance(
                             v, (float, np.floating)) else v) for k, v in chosen.items()
                             if v is not None}),
                         curve=json.dumps(curve), **(extra or {})))
        log(f"[race] {name}: done, {fit_s:.0f} s, {epochs:.2f} passes, test error {100 * err:.2f} %,"
            f" GPU peak {peak.peak / 2**20:.0f} MiB, {rows[-1]['chosen']}")
        if on_row is not None:
            on_row(rows)
        del est
        _cp().get_default_memory_pool().free_all_blocks()
    return rows


def scale(n: int, n_test: int, budget_mb: float, cap_s: float, names, workdir, log=print,
          **race_kw):
    from kernelscale.io import open_zarr
    from kernelscale.pipeline.data.bayes import bayes_error, bayes_params

    path = Path(workdir) / "scale.zarr"
    t = time.perf_counter()
    bayes = write_problem(path, n, n_test)
    gen_s = time.perf_counter() - t
    bayes_population = bayes_error(bayes_params(n, D_SCALE, NOISE))[0]  # ~4 s, not in gen_s
    log(f"[scale] wrote {n:,} + {n_test:,} rows x {D_SCALE} to {path} in {gen_s:.0f} s "
        f"(Bayes error of the test rows {100 * bayes:.2f} %, of the distribution "
        f"{100 * bayes_population:.3f} %)")
    X, y = open_zarr(path, "X"), open_zarr(path, "y")[:]  # labels: 10 MB at 10^7 rows
    Xte, yte = open_zarr(path, "X_test")[:], open_zarr(path, "y_test")[:]
    rows = race(X, y, Xte, yte, names, bayes=bayes, budget_mb=budget_mb, cap_s=cap_s, log=log,
                extra={"bayes_error_population": bayes_population}, **race_kw)
    return rows, gen_s


# -- 10^8 rows: a checkpointed, resumable DSG run with where its time goes (issue 41) ----------


def drop_page_cache() -> bool:
    """Write back and drop the OS page cache (root only), so that the next read is the disk's."""
    import subprocess

    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _io_read_bytes() -> int:
    """Bytes this process read from the block device (/proc/self/io read_bytes)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _rss_peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def read_rate(X, rows_per_read: int = 1_000_000) -> tuple[float, float]:
    """(seconds, bytes/s) to read every row of the zarr array X in windows, page cache dropped."""
    cold = drop_page_cache()
    t = time.perf_counter()
    total = 0
    for lo in range(0, X.shape[0], rows_per_read):
        total += X[lo:lo + rows_per_read].nbytes
    sec = time.perf_counter() - t
    return sec, total / sec if cold else float("nan")


def fused_vs_formed(est, X_batch, log=print) -> dict:
    """Device time of f on one training batch over all of the model's blocks, with the fused
    sum (``FourierBlocks.weighted_sum``) and with the feature matrices formed."""
    cp = _cp()
    from kernelscale.kernels import _fused

    model = est.model_
    Xb = cp.asarray(X_batch, dtype=model.blocks.dtype)
    t_h2d = _median_time(lambda: cp.asarray(X_batch), reps=5, warmup=1)
    fused = _median_time(lambda: model.decision(Xb), reps=3, warmup=1)
    keep = _fused.fourier_sum
    _fused.fourier_sum = lambda *a, **k: False
    try:
        formed = _median_time(lambda: model.decision(Xb), reps=2, warmup=1)
    finally:
        _fused.fourier_sum = keep
    row = dict(rows=len(X_batch), blocks=model.n_blocks, features=model.n_blocks * model.blocks.F,
               h2d_s=t_h2d, fused_s=fused, formed_s=formed,
               fused_pairs_per_s=len(X_batch) * model.n_blocks * model.blocks.F / fused)
    log(f"[huge] f over {model.n_blocks} blocks for {len(X_batch):,} rows: fused {fused:.3f} s, "
        f"formed {formed:.3f} s ({formed / fused:.1f} x); host->device copy {t_h2d * 1e3:.1f} ms")
    return row


def huge(n: int, n_test: int, budget_mb: float, cap_s: float, name: str, workdir, out: Path,
         tag: str, segment_epochs: float = 0.1, log=print) -> list[dict]:
    """``name`` (DSG family) at its defaults on n ``bayes`` rows written once to
    ``workdir/huge.zarr`` (kept: a later call resumes), streamed from disk under
    ``memory_budget=budget_mb``, in warm-started segments of ``segment_epochs`` passes until
    ``cap_s`` seconds of fitting in this call. After each segment: the estimator is pickled to
    ``workdir`` (the checkpoint a later call resumes from) and one row is added to
    ``out/gpu-huge-<tag>.jsonl``: steps, passes, fit seconds, test error, GPU pool peak, host
    RSS peak and the bytes read from disk."""
    import pickle

    from kernelscale.io import open_zarr
    from kernelscale.pipeline import registry
    from kernelscale.pipeline.data.bayes import bayes_error, bayes_params
    from kernelscale.solvers.dsg import auto_sizes

    workdir = Path(workdir)
    path, marker = workdir / "huge.zarr", workdir / "huge.json"
    if not marker.exists():
        t = time.perf_counter()
        bayes = write_problem(path, n, n_test, workers=max(1, (os.cpu_count() or 2) - 2))
        gen_s = time.perf_counter() - t
        population = bayes_error(bayes_params(n, D_SCALE, NOISE))[0]
        X = open_zarr(path, "X")
        read_s, rate = read_rate(X)
        meta = dict(n=n, n_test=n_test, bayes_test=bayes, bayes_population=population,
                    gen_s=gen_s, read_s=read_s, read_bytes_per_s=rate, bytes=X.nbytes)
        marker.write_text(json.dumps(meta))
        log(f"[huge] wrote {n:,} + {n_test:,} rows in {gen_s:.0f} s; read back cold in "
            f"{read_s:.1f} s ({rate / 1e9:.2f} GB/s); Bayes error of the test rows "
            f"{100 * bayes:.2f} %")
    meta = json.loads(marker.read_text())
    (out / f"gpu-huge-{tag}-data.json").write_text(json.dumps(meta))
    if cap_s <= 0:  # the data alone
        return []
    X, y = open_zarr(path, "X"), open_zarr(path, "y")[:]
    Xte, yte = open_zarr(path, "X_test")[:], open_zarr(path, "y_test")[:]
    ckpt, rows_path = workdir / f"{name}.pkl", out / f"gpu-huge-{tag}.jsonl"
    if ckpt.exists():
        with open(ckpt, "rb") as f:
            est, fit_total = pickle.load(f)
        log(f"[huge] resumed {name} from {ckpt}: {est.n_iter_} steps, {fit_total:.0f} s")
    else:
        engine = {"device": "gpu", "memory_budget": budget_mb, "dtype": "float32"}
        est = registry.make_estimator(name, "classification", engine=engine, random_state=0,
                                      warm_start=True)
        fit_total = 0.0
    B = min(n, auto_sizes(n, D_SCALE)[1])
    per_pass = -(-n // B)
    est.set_params(n_iter=max(1, int(round(segment_epochs * per_pass))))
    drop_page_cache()  # the first segment of this call reads from the disk
    spent, rows = 0.0, []
    while spent < cap_s:
        io0, t = _io_read_bytes(), time.perf_counter()
        with GpuPeak() as peak:
            est.fit(X, y)
            _sync()
        seg = time.perf_counter() - t
        spent += seg
        fit_total += seg
        read = _io_read_bytes() - io0
        t = time.perf_counter()
        err = float(np.mean(est.predict(Xte) != yte))
        pred_s = time.perf_counter() - t
        steps = int(est.n_iter_)
        row = dict(estimator=name, n=n, steps=steps, passes=steps * B / n, blocks=est.n_blocks_,
                   segment_s=round(seg, 2), fit_s=round(fit_total, 1), test_error=err,
                   bayes_test=meta["bayes_test"], predict_s=round(pred_s, 2),
                   gpu_pool_peak_mib=round(peak.peak / 2**20), host_rss_peak_mib=round(
                       _rss_peak_mib()), disk_read_mb=round(read / 2**20),
                   disk_read_mb_per_s=round(read / 2**20 / seg, 1),
                   batch_size=B, block_size=est.block_size_, per_pass=per_pass,
                   window_rows=getattr(est, "window_rows_", None))
        rows.append(row)
        with open(rows_path, "a") as f:
            f.write(json.dumps(row) + "\n")
        with open(ckpt, "wb") as f:
            pickle.dump((est, fit_total), f)
        log(f"[huge] {name}: {steps} steps = {row['passes']:.3f} passes, {row['blocks']} blocks,"
            f" segment {seg:.1f} s (fit {fit_total:.0f} s), test error {100 * err:.2f} % "
            f"(Bayes {100 * meta['bayes_test']:.2f} %), GPU pool {row['gpu_pool_peak_mib']} MiB,"
            f" host RSS {row['host_rss_peak_mib']} MiB, disk {row['disk_read_mb']} MB")
    bench = fused_vs_formed(est, X[:B], log)
    with open(out / f"gpu-huge-{tag}-fused.json", "w") as f:
        json.dump(bench, f)
    return rows


def rff_batches(n: int, batches, cap_s: float, workdir, out: Path, tag: str,
                log=print) -> list[dict]:
    """RFF-SGD (defaults but ``batch_size``) on the first n rows of ``workdir/huge.zarr``, one
    pass per fit, until ``cap_s`` fit seconds each: steps per second and the test error."""
    from kernelscale.io import open_zarr
    from kernelscale.pipeline import registry

    path = Path(workdir) / "huge.zarr"
    X, y = open_zarr(path, "X")[:n], open_zarr(path, "y")[:n]
    Xte, yte = open_zarr(path, "X_test")[:], open_zarr(path, "y_test")[:]
    rows = []
    for B in batches:
        est = registry.make_estimator("rff_sgd", "classification", random_state=0,
                                      warm_start=True, batch_size=int(B), n_iter="1 epochs",
                                      engine={"device": "gpu", "dtype": "float32"})
        fit_s, passes, curve = 0.0, 0, []
        while fit_s < cap_s:
            t = time.perf_counter()
            est.fit(X, y)
            _sync()
            fit_s += time.perf_counter() - t
            passes += 1
            err = float(np.mean(est.predict(Xte) != yte))
            curve.append((round(fit_s, 2), passes, err))
        row = dict(n=n, batch_size=int(B), passes=passes, fit_s=round(fit_s, 2),
                   steps_per_s=round(est.n_iter_ / fit_s, 1), test_error=err,
                   eta0=float(est.eta0_), n_components=int(est.n_components_),
                   curve=json.dumps(curve))
        rows.append(row)
        with open(out / f"gpu-rff-batch-{tag}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        log(f"[rff] B={B}: {passes} passes in {fit_s:.1f} s, {row['steps_per_s']} steps/s, "
            f"eta0 {row['eta0']:.3g}, test error {100 * err:.2f} %, curve {curve}")
        del est
        _cp().get_default_memory_pool().free_all_blocks()
    return rows


# -- deformed Fashion-MNIST ----------------------------------------------------------------------


def _deformed_worker(job):
    params, index, path, fashion = job
    import zarr

    from kernelscale.pipeline.data.deformed import BLOCK_ROWS, deformed_block
    from kernelscale.pipeline.data.readers.idx import load_idx_images

    global _IMAGES
    if "_IMAGES" not in globals():
        _IMAGES = load_idx_images(fashion / "train-images-idx3-ubyte.gz",
                                  fashion / "train-labels-idx1-ubyte.gz")
    X, y = deformed_block(params, index, *_IMAGES)
    g = zarr.open_group(str(path), mode="r+")
    lo = index * BLOCK_ROWS
    g["X"][lo:lo + len(X)] = X / np.float32(255)  # one 8192-row chunk per block: no overlap
    g["y"][lo:lo + len(X)] = y.astype(np.int8)
    return index


def write_deformed(path: Path, n: int, fashion: Path, workers: int) -> float:
    """Generator ``deformed`` (the pipeline's MNIST-8M construction) on Fashion-MNIST: n rows
    (the 60,000 originals first) to zarr, pixels / 255 as float32, one 8192-row chunk per block,
    blocks written by ``workers`` processes (each block a pure function of (seed, block))."""
    import multiprocessing as mp

    import zarr

    from kernelscale.pipeline.data.deformed import BLOCK_ROWS, DEFAULTS, n_blocks

    params = dict(DEFAULTS, n_samples=n)
    g = zarr.open_group(str(path), mode="w")
    g.create_array("X", shape=(n, 784), chunks=(BLOCK_ROWS, 784), dtype="f4", compressors=None)
    g.create_array("y", shape=(n,), chunks=(BLOCK_ROWS,), dtype="i1", compressors=None)
    t = time.perf_counter()
    jobs = [(params, i, path, fashion) for i in range(n_blocks(params))]
    with mp.get_context("fork").Pool(workers) as pool:
        for _ in pool.imap_unordered(_deformed_worker, jobs):
            pass
    return time.perf_counter() - t


def deformed(n: int, budget_mb: float, cap_s: float, names, workdir, fashion: Path, log=print,
             **race_kw):
    from kernelscale.io import open_zarr
    from kernelscale.pipeline.data.readers.idx import load_idx_images

    path = Path(workdir) / "deformed.zarr"
    gen_s = write_deformed(path, n, fashion, max(1, (os.cpu_count() or 2) - 1))
    log(f"[deformed] wrote {n:,} rows x 784 to {path} in {gen_s:.0f} s")
    Xte, yte = load_idx_images(fashion / "t10k-images-idx3-ubyte.gz",
                               fashion / "t10k-labels-idx1-ubyte.gz")
    Xte = Xte.reshape(len(Xte), -1).astype(np.float32) / np.float32(255)
    X, y = open_zarr(path, "X"), open_zarr(path, "y")[:]
    rows = race(X, y, Xte, yte.astype(np.int64), names, bayes=None, budget_mb=budget_mb,
                cap_s=cap_s, log=log, extra={"data": f"fashion-deformed-{n}"}, **race_kw)
    return rows, gen_s


def _write(rows, path: Path):
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)


def _md(rows) -> str:
    keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k != "curve"]

    def cell(v):
        return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))

    return "\n".join(["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
                     + ["| " + " | ".join(cell(r.get(k)) for k in keys) + " |" for r in rows])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", nargs="*", default=["blocks", "scale"])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--n-test", type=int, default=200_000)
    p.add_argument("--budget-mb", type=float, default=1024.0)
    p.add_argument("--scale-cap", type=float, default=60.0, help="fit seconds per estimator")
    p.add_argument("--estimators", nargs="*", default=list(SCALE_ESTIMATORS))
    p.add_argument("--caps", nargs="*", default=[], metavar="NAME=SECONDS",
                   help="fit-time caps per estimator (else --scale-cap)")
    p.add_argument("--bandwidth", default="auto", help="every estimator's bandwidth")
    p.add_argument("--segment-epochs", type=float, default=0.25,
                   help="DSG family: epochs per warm-started segment (one point of the curve)")
    p.add_argument("--max-epochs", type=float, default=8.0)
    p.add_argument("--deformed-n", type=int, default=1_000_000)
    p.add_argument("--fashion", type=Path, default=Path(".devdata/fashion-mnist"))
    p.add_argument("--workdir", default=None, help="where the zarr data goes (default: a temp dir)")
    p.add_argument("--rff-rows", type=int, default=2_000_000)
    p.add_argument("--rff-batches", type=int, nargs="*", default=[64, 512, 4096, 32768])
    p.add_argument("--rff-cap", type=float, default=12.0)
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--tag", default=time.strftime("%Y-%m-%d") + "-gpu")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = device_info()
    print("[env] " + json.dumps(info), flush=True)
    md = [f"# GPU benchmark `{args.tag}`\n", "Device: " + ", ".join(f"{k} {v}" for k, v in
                                                                   info.items()) + "\n",
          f"Command: `python benchmarks/gpu.py {' '.join(argv or [])}`\n"]
    if "blocks" in args.sections:
        rows = blocks(lambda s: print(s, flush=True))
        _write(rows, out / f"gpu-blocks-{args.tag}.csv")
        md += ["## Blocks (float32)\n", _md(rows), ""]
    if "dsg-profile" in args.sections:
        dsg_profile(lambda s: print(s, flush=True))
    race_kw = dict(caps={k: float(v) for k, v in (c.split("=") for c in args.caps)},
                   bandwidth=args.bandwidth, segment_epochs=args.segment_epochs,
                   max_epochs=args.max_epochs)
    if "scale" in args.sections:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            rows, gen_s = scale(args.n, args.n_test, args.budget_mb, args.scale_cap,
                                args.estimators, tmp, lambda s: print(s, flush=True),
                                on_row=lambda r: _write(r, out / f"gpu-scale-{args.tag}.csv"),
                                **race_kw)
        _write(rows, out / f"gpu-scale-{args.tag}.csv")
        md += [f"## {args.n:,} points streamed from zarr (generated in {gen_s:.0f} s)\n", _md(rows),
               ""]
    if "huge" in args.sections:
        huge(args.n, args.n_test, args.budget_mb, args.scale_cap, args.estimators[0],
             args.workdir or "/tmp/huge", out, args.tag, args.segment_epochs,
             lambda s: print(s, flush=True))
    if "rff-batch" in args.sections:
        rff_batches(args.rff_rows, args.rff_batches, args.rff_cap, args.workdir or "/tmp/huge",
                    out, args.tag, lambda s: print(s, flush=True))
    if "deformed" in args.sections:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            rows, gen_s = deformed(args.deformed_n, args.budget_mb, args.scale_cap,
                                   args.estimators, tmp, args.fashion,
                                   lambda s: print(s, flush=True),
                                   on_row=lambda r: _write(r, out / f"gpu-deformed-{args.tag}.csv"),
                                   **race_kw)
        _write(rows, out / f"gpu-deformed-{args.tag}.csv")
        md += [f"## Fashion-MNIST deformed, {args.deformed_n:,} rows (generated in {gen_s:.0f} s)\n",
               _md(rows), ""]
    (out / f"gpu-{args.tag}.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out}/gpu-{args.tag}.md", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
