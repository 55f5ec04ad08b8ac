"""Generator ``bayes`` (a binary problem with a known Bayes error): the exact inner formula, the
stated Bayes error against the Bayes classifier's error on generated rows, determinism per chunk,
bounded memory, the pipeline entry (meta.json) and its one-line errors, and benchmarks/gpu.py
writing the library's rows."""

from __future__ import annotations

import importlib.util
import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import yaml

from kernelscale.pipeline.data import DataError, open_prepared, prepare_dataset
from kernelscale.pipeline.data import bayes as bm
from kernelscale.pipeline.data.spec import validate_dataset_spec
from kernelscale.pipeline.data.split import test_mask

ROOT = Path(__file__).resolve().parents[1]
GPU_PROBLEM = bm.bayes_params(10**6)  # benchmarks/gpu.py's: d 20, noise 0.3, seed 0


def _full(params: dict) -> tuple[np.ndarray, np.ndarray]:
    blocks = list(bm.generate_bayes(params))
    return np.concatenate([b.X for b in blocks]), np.concatenate([b.y for b in blocks])


@pytest.mark.parametrize("mu, tau, sigma", [(0.3, 0.5, 0.3), (-1.2, 0.05, 0.3), (0.0, 2.0, 0.7),
                                            (0.02, 1e-3, 0.1), (0.4, 0.0, 0.3)])
def test_orthant_formula_equals_the_integral_over_the_gaussian_score(mu, tau, sigma):
    """E[Phi(-|mu + tau z| / sigma)] by adaptive quadrature (split where the score is 0) against
    2 T(mu / sqrt(tau^2 + sigma^2), sigma / tau), the closed form bayes_error rests on."""
    from scipy.integrate import quad
    from scipy.special import ndtr
    from scipy.stats import norm

    if tau == 0:
        direct = ndtr(-abs(mu) / sigma)
    else:
        def h(z):
            return ndtr(-abs(mu + tau * z) / sigma) * norm.pdf(z)
        zero = -mu / tau
        direct = (quad(h, -np.inf, zero, epsabs=1e-13)[0]
                  + quad(h, zero, np.inf, epsabs=1e-13)[0])
    assert bm.orthant_error(mu, tau, sigma) == pytest.approx(direct, abs=1e-11)


@pytest.mark.parametrize("params", [GPU_PROBLEM, bm.bayes_params(10**6, 5, 0.6, 7)],
                         ids=["gpu-problem", "d5-noise0.6"])
def test_bayes_classifier_error_on_200k_rows_is_the_stated_bayes_error(params):
    value, estimate = bm.bayes_error(params)
    X, y = bm.bayes_rows(params, 0, 200_000)
    wrong = bm.bayes_predict(params, X) != y
    n = len(y)
    se = math.sqrt(value * (1 - value) / n)
    print(f"stated {value:.6f} (+-{estimate:.1e}), Bayes classifier {wrong.mean():.6f}, "
          f"SE {se:.1e}")
    assert abs(wrong.mean() - value) < 3 * se
    # the rows' mean of P(wrong | x): the same expectation with a third of the spread
    p = bm.conditional_error(params, X)
    assert abs(p.mean() - value) < 3 * p.std() / math.sqrt(n)
    assert estimate < 1e-4
    # and a classifier that ignores f's x_0 x_1 term is measurably worse
    X64 = X.astype(np.float64)
    partial = bm.score(params, X) - 0.4 * X64[:, 0] * X64[:, 1] > 0
    assert np.mean(partial != y) > value + 3 * se


def test_the_gpu_problem_is_gpu_py_s_function_with_its_bayes_error():
    rng = np.random.default_rng(0)  # how benchmarks/gpu.py drew its weights
    w1, w2 = rng.standard_normal(20) / math.sqrt(20), rng.standard_normal(20) / math.sqrt(20)
    X = np.random.default_rng(1).standard_normal((100, 20)).astype(np.float32).astype(np.float64)
    f = np.sin(2.0 * X @ w1) + 0.5 * np.cos(3.0 * X @ w2) + 0.4 * X[:, 0] * X[:, 1]
    np.testing.assert_array_equal(bm.score(GPU_PROBLEM, X), f)
    # 0.0881354 at half the step; 10^7 rows of gpu.py's old stream: 0.088088 +- 0.000042
    assert bm.bayes_error(GPU_PROBLEM)[0] == pytest.approx(0.0881354, abs=2e-6)
    assert bm.bayes_error(dict(GPU_PROBLEM, noise=0.0)) == (0.0, 0.0)


def test_same_seed_same_chunk_other_seeds_differ():
    params = bm.bayes_params(50_000, 6, 0.3, seed=11)
    first = list(bm.bayes_chunks(params, 9_000))
    again = list(bm.bayes_chunks(params, 9_000))
    assert [(a, X.tobytes(), y.tobytes()) for a, X, y in first] == \
        [(a, X.tobytes(), y.tobytes()) for a, X, y in again]
    other = bm.bayes_rows(dict(params, seed=12), 0, 9_000)
    assert not np.array_equal(first[0][1], other[0])
    X, y = first[0][1], first[0][2]
    assert X.dtype == np.float32 and y.dtype == np.int8 and set(np.unique(y)) == {0, 1}


def test_a_chunk_alone_equals_the_chunk_in_a_full_run():
    params = bm.bayes_params(2 * bm.BLOCK_ROWS + 500, 5)
    X, y = _full(params)
    assert len(y) == params["n_samples"]
    for lo, hi in [(0, 10), (5_000, 16_884), (16_384, 16_884), (8_191, 8_193), (7, 7)]:
        Xc, yc = bm.bayes_rows(params, lo, hi)
        np.testing.assert_array_equal(Xc, X[lo:hi])
        np.testing.assert_array_equal(yc, y[lo:hi])
    # any chunk size gives the same rows
    chunks = list(bm.bayes_chunks(params, 3_001))
    assert [c[0] for c in chunks] == list(range(0, params["n_samples"], 3_001))
    np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), X)
    np.testing.assert_array_equal(np.concatenate([c[2] for c in chunks]), y)
    # blocks alone, in any order
    full = list(bm.generate_bayes(params))
    for block in bm.generate_bayes(params, blocks=[2, 0]):
        index = block.first_row // bm.BLOCK_ROWS
        np.testing.assert_array_equal(block.X, full[index].X)
        np.testing.assert_array_equal(block.y, full[index].y)
    # the first rows do not depend on n_samples; rows past it continue the sequence
    short = dict(params, n_samples=100)
    np.testing.assert_array_equal(_full(short)[0], X[:100])
    np.testing.assert_array_equal(bm.bayes_rows(short, 100, 9_000)[0], X[100:9_000])


def test_peak_memory_does_not_grow_with_the_number_of_chunks():
    chunk = 10_000
    params = bm.bayes_params(8 * chunk, 20)

    def peak(chunks: int, blocks: bool) -> int:
        short = dict(params, n_samples=chunks * chunk)
        tracemalloc.start()
        try:
            stream = bm.generate_bayes(short) if blocks else bm.bayes_chunks(short, chunk)
            for _ in stream:
                pass
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    for blocks in (False, True):
        two, eight = peak(2, blocks), peak(8, blocks)
        print(f"{'blocks' if blocks else 'chunks'}: peak {two / 2**20:.1f} MiB for 2, "
              f"{eight / 2**20:.1f} MiB for 8")
        assert eight < two * 1.1 + 2**20, (two, eight)
        # one chunk (float32 + int8) plus one block (float64 draws, float32 rows, labels)
        assert two < 3 * (chunk * 21 + bm.BLOCK_ROWS * 20 * 13), two


def test_prepare_records_the_bayes_error_and_writes_the_generated_rows(tmp_path):
    spec = {"task": "binary", "chunk_rows": 1_000, "split": {"test_size": 0.25, "seed": 4},
            "generator": {"name": "bayes", "n_samples": 3_000, "n_features": 20}}
    meta = prepare_dataset("b", spec, tmp_path / "b")
    _, arrays = open_prepared(tmp_path / "b")
    params = meta["spec"]["generator"]
    assert params == {"name": "bayes", "n_samples": 3_000, "n_features": 20, "noise": 0.3,
                      "seed": 0}
    assert meta["bayes_error"] == bm.bayes_error(params)[0]
    assert meta["bayes_error_info"]["abs_error_estimate"] < 1e-4
    assert meta["classes"] == [0, 1] and meta["d"] == 20
    X, y = bm.bayes_rows(params, 0, 3_000)
    is_test = test_mask(4, 0, 3_000, 0.25)
    np.testing.assert_array_equal(arrays["X_train"][:], X[~is_test])
    np.testing.assert_array_equal(arrays["y_train"][:], y[~is_test])
    np.testing.assert_array_equal(arrays["X_test"][:], X[is_test])
    saved = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert saved["bayes_error"] == meta["bayes_error"]


def _error(spec: dict) -> str:
    with pytest.raises(DataError) as err:
        validate_dataset_spec("x", spec)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("generator, extra, message", [
    ({"n_samples": 10}, {}, "datasets.x.generator: 'n_features' is a required property"),
    ({"n_samples": 10, "n_features": 3}, {},
     "datasets.x.generator.n_features: 3 is less than the minimum of 4 for generator bayes"),
    ({"n_samples": 1, "n_features": 5}, {},
     "datasets.x.generator.n_samples: 1 is less than the minimum of 2"),
    ({"n_samples": 10, "n_features": 5, "noise": -1}, {},
     "datasets.x.generator.noise: -1 is less than the minimum of 0"),
    ({"n_samples": 10, "n_features": 5, "noise": "high"}, {},
     "datasets.x.generator.noise: 'high' is not of type 'number'"),
    ({"n_samples": 10, "n_features": 5, "flip_y": 0.1}, {},
     "datasets.x.generator.flip_y: not a parameter of generator bayes"),
    ({"n_samples": 10, "n_features": 5}, {"task": "multiclass"},
     "datasets.x.task: generator bayes makes a binary task, not multiclass"),
])
def test_bad_entries_fail_in_one_line_naming_the_key(generator, extra, message):
    spec = {"task": "binary", "generator": {"name": "bayes", **generator}, **extra}
    assert _error(spec).startswith(message)


@pytest.mark.parametrize("call, message", [
    (lambda: bm.bayes_params(10, n_features=3),
     "generator.n_features: 3 is less than the minimum of 4"),
    (lambda: bm.bayes_params(10, noise=float("nan")),
     "generator.noise: must be a finite number >= 0, got nan"),
    (lambda: bm.bayes_params(0), "generator.n_samples: 0 is less than the minimum of 1"),
    (lambda: bm.check_params({"n_samples": 10, "n_features": 5, "d": 3}),
     "generator.d: not a parameter of generator bayes"),
    (lambda: list(bm.bayes_chunks({"n_samples": 10, "n_features": 4.0}, 5)),
     "generator.n_features: must be an integer, got 4.0"),
])
def test_library_callers_get_the_same_one_line_errors(call, message):
    with pytest.raises(DataError) as err:
        call()
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_gpu_benchmark_writes_the_library_rows(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "benchmarks" / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)  # cupy is imported only inside the GPU sections
    from kernelscale.io import open_zarr

    bayes_test = gpu.write_problem(tmp_path / "p.zarr", 20_000, 5_000, chunk=7_000)
    params = bm.bayes_params(20_000, gpu.D_SCALE, gpu.NOISE)
    X, y = bm.bayes_rows(params, 0, 25_000)
    np.testing.assert_array_equal(open_zarr(tmp_path / "p.zarr", "X")[:], X[:20_000])
    np.testing.assert_array_equal(open_zarr(tmp_path / "p.zarr", "y")[:], y[:20_000])
    np.testing.assert_array_equal(open_zarr(tmp_path / "p.zarr", "X_test")[:], X[20_000:])
    np.testing.assert_array_equal(open_zarr(tmp_path / "p.zarr", "y_test")[:], y[20_000:])
    assert bayes_test == pytest.approx(bm.conditional_error(params, X[20_000:]).mean(), rel=1e-12)


def test_million_config_names_a_bayes_set_of_a_million_rows():
    config = yaml.safe_load((ROOT / "config" / "million.yaml").read_text())
    spec = validate_dataset_spec("bayes_1m", config["datasets"]["bayes_1m"])
    assert spec["generator"] == {**GPU_PROBLEM, "n_samples": 1_000_000}
    assert "synth_clf_1m" not in config["datasets"]
    assert "bayes_1m" in config["experiments"][0]["datasets"]
