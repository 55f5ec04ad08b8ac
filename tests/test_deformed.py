"""Generator ``deformed`` (MNIST-8M's construction on IDX images): the deformation against its
scipy.ndimage definition, determinism per block, originals first, labels, range, memory, the
pipeline entry and its errors. A tiny synthetic IDX set runs everywhere; the checks on the real
Fashion-MNIST files skip when ../shared/devdata is absent (KERNELSCALE_DEVDATA overrides it)."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import yaml

from kernelscale.pipeline.data import DataError, open_prepared, prepare_dataset
from kernelscale.pipeline.data import deformed as dm
from kernelscale.pipeline.data.readers.idx import load_idx_images
from kernelscale.pipeline.data.spec import validate_dataset_spec

ROOT = Path(__file__).resolve().parents[1]
DEVDATA = Path(os.environ.get("KERNELSCALE_DEVDATA", ROOT.parent / "shared" / "devdata"))
FASHION = DEVDATA / "fashion-mnist"
N_SOURCE = 40


def _write_idx(path: Path, array: np.ndarray) -> Path:
    """IDX file of unsigned bytes (gzipped when the name ends in .gz)."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I",
                                                                        *array.shape)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())
    return path


def _blobs(n: int, seed: int, size: int = 28) -> np.ndarray:
    """Images of three Gaussian bumps each, 0..255: smooth, centred, zero at the border."""
    g = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    out = np.zeros((n, size, size))
    for i in range(n):
        for _ in range(3):
            cy, cx = g.uniform(size / 3, 2 * size / 3, size=2)
            s = g.uniform(2, 4) * size / 28
            out[i] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    return np.rint(255 * out / out.max(axis=(1, 2), keepdims=True)).astype(np.uint8)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The generator's file keys for 40 training and 12 test images of 28 x 28, 4 classes."""
    root = tmp_path_factory.mktemp("idx")
    return {
        "path": str(_write_idx(root / "train-images.gz", _blobs(N_SOURCE, 0))),
        "labels_path": str(_write_idx(root / "train-labels.gz", np.arange(N_SOURCE) % 4)),
        "test_path": str(_write_idx(root / "test-images", _blobs(12, 1))),
        "test_labels_path": str(_write_idx(root / "test-labels", np.arange(12)[::-1] % 4)),
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict:
    """As ``tiny`` with 12 x 12 images: for the tests that generate many 8192-row blocks."""
    root = tmp_path_factory.mktemp("idx12")
    return {
        "path": str(_write_idx(root / "train-images", _blobs(N_SOURCE, 0, size=12))),
        "labels_path": str(_write_idx(root / "train-labels", np.arange(N_SOURCE) % 4)),
        "test_path": str(_write_idx(root / "test-images", _blobs(3, 1, size=12))),
        "test_labels_path": str(_write_idx(root / "test-labels", np.arange(3))),
    }


def _params(files: dict, n: int, **extra) -> dict:
    spec = validate_dataset_spec("t", {"task": "multiclass", "generator": {
        "name": "deformed", "n_samples": n, **files, **extra}})
    return spec["generator"]


@pytest.mark.parametrize("rotation", [0.0, 15.0])
def test_fast_deformation_equals_the_scipy_definition(tiny, rotation):
    images, _ = load_idx_images(tiny["path"], tiny["labels_path"])
    images = np.repeat(images, 8, axis=0)  # 320 rows: several sub-blocks of 128
    params = dict(dm.DEFAULTS, max_rotation=rotation)
    fast = dm.deform(images, np.random.default_rng(5), params, rounded=False)
    ref = dm.deform_reference(images, np.random.default_rng(5), params, rounded=False)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-8)
    rounded = dm.deform(images, np.random.default_rng(5), params)
    assert rounded.dtype == np.float32
    np.testing.assert_array_equal(rounded, np.rint(fast))


def test_no_deformation_is_the_identity_and_a_shift_moves_whole_pixels(tiny):
    images, _ = load_idx_images(tiny["path"], tiny["labels_path"])
    flat = images.reshape(len(images), -1).astype(np.float32)
    still = dict(dm.DEFAULTS, alpha=0.0, max_shift=0)
    np.testing.assert_array_equal(dm.deform(images, np.random.default_rng(0), still), flat)
    shifted = dm.deform(images, np.random.default_rng(1), dict(still, max_shift=1))
    shifts, _ = dm._draw_pose(np.random.default_rng(1), len(images), still | {"max_shift": 1})
    padded = np.pad(images, ((0, 0), (1, 1), (1, 1)))
    for row, (dy, dx), image in zip(shifted, shifts.astype(int), padded, strict=True):
        # output pixel (y, x) is source pixel (y + dy, x + dx); 0 outside
        np.testing.assert_array_equal(row.reshape(28, 28),
                                      image[1 + dy:29 + dy, 1 + dx:29 + dx])
    assert len({tuple(s) for s in shifts.astype(int)}) > 4  # several of the 9 shifts occur


def test_same_seed_same_bytes_other_blocks_and_seeds_differ(small):
    params = _params(small, 2 * dm.BLOCK_ROWS, seed=11)
    first = [b.X for b in dm.generate_deformed(params)]
    again = [b.X for b in dm.generate_deformed(params)]
    assert [a.tobytes() for a in first] == [b.tobytes() for b in again]
    # block 1 starts at source 32 (8192 = 204 x 40 + 32), as row 72 of block 0: rows of the same
    # sources, other deformations
    assert not np.array_equal(first[0][72:], first[1][:-72])
    other = next(dm.generate_deformed(dict(params, seed=12), blocks=[1])).X
    assert not np.array_equal(first[1], other)


def test_a_block_alone_equals_the_block_in_a_full_run(small):
    params = _params(small, 2 * dm.BLOCK_ROWS + 500)
    full = list(dm.generate_deformed(params))
    assert [len(b) for b in full] == [dm.BLOCK_ROWS, dm.BLOCK_ROWS, 500]
    alone = list(dm.generate_deformed(params, blocks=[2, 0]))  # any order: resumable
    for block, index in zip(alone, [2, 0], strict=True):
        assert block.first_row == full[index].first_row == index * dm.BLOCK_ROWS
        np.testing.assert_array_equal(block.X, full[index].X)
        np.testing.assert_array_equal(block.y, full[index].y)


def test_originals_first_labels_follow_the_source_and_range(tiny):
    images, labels = load_idx_images(tiny["path"], tiny["labels_path"])
    n = 2000
    (block,) = list(dm.generate_deformed(_params(tiny, n)))
    flat = images.reshape(N_SOURCE, -1).astype(np.float32)
    np.testing.assert_array_equal(block.X[:N_SOURCE], flat)  # rows 0..N-1: the originals
    np.testing.assert_array_equal(block.y, labels[np.arange(n) % N_SOURCE])
    X = block.X[N_SOURCE:]
    assert X.min() >= 0 and X.max() <= 255 and np.array_equal(X, np.rint(X))
    change = np.abs(X - flat[np.arange(N_SOURCE, n) % N_SOURCE]).mean(axis=1)
    assert change.min() > 0  # every deformed row differs from its source ...
    assert 5 < change.mean() < 25  # ... by a few grey levels on average (13 measured)
    # ... and stays nearer to it than to the other sources (similar blobs) on average
    distances = np.abs(X[:400, None, :] - flat[None, :, :]).mean(axis=2)
    own = distances[np.arange(400), np.arange(N_SOURCE, N_SOURCE + 400) % N_SOURCE]
    others = (distances.sum(axis=1) - own) / (N_SOURCE - 1)
    assert (own < others).mean() > 0.95, (own.mean(), others.mean())  # 0.985: 12 vs 24 levels


def test_peak_memory_does_not_grow_with_the_number_of_blocks(small):
    def peak(blocks: int) -> int:
        params = _params(small, blocks * dm.BLOCK_ROWS)
        tracemalloc.start()
        try:
            for _ in dm.generate_deformed(params):
                pass
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    two, eight = peak(2), peak(8)
    print(f"peak {two / 2**20:.1f} MiB for 2 blocks, {eight / 2**20:.1f} MiB for 8")
    block_bytes = dm.BLOCK_ROWS * 12 * 12 * 4
    assert eight < two * 1.1 + 2**20, (two, eight)
    assert two < 4 * block_bytes, (two, block_bytes)


def test_prepare_writes_deformed_train_and_the_original_test_set(tiny, tmp_path):
    spec = {"task": "multiclass", "chunk_rows": 64,
            "generator": {"name": "deformed", "n_samples": 300, "seed": 3, **tiny}}
    meta = prepare_dataset("tiny8m", spec, tmp_path / "tiny8m")
    _, arrays = open_prepared(tmp_path / "tiny8m")
    test_images, test_labels = load_idx_images(tiny["test_path"], tiny["test_labels_path"])
    train_images, _ = load_idx_images(tiny["path"], tiny["labels_path"])
    assert meta["n_train"] == 300 and meta["n_test"] == 12 and meta["d"] == 784
    assert meta["split"] == {"test_file": True} and meta["classes"] == [0, 1, 2, 3]
    np.testing.assert_array_equal(arrays["X_test"][:], test_images.reshape(12, -1))
    np.testing.assert_array_equal(arrays["y_test"][:], test_labels)
    np.testing.assert_array_equal(arrays["X_train"][:N_SOURCE], train_images.reshape(40, -1))
    expected = next(dm.generate_deformed(meta["spec"]["generator"]))
    np.testing.assert_array_equal(arrays["X_train"][:], expected.X)
    assert [f["role"] for f in meta["source"]["files"]] == ["train", "train_labels", "test",
                                                             "test_labels"]
    assert all(len(f["sha256"]) == 64 for f in meta["source"]["files"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def _error(spec: dict) -> str:
    with pytest.raises(DataError) as err:
        validate_dataset_spec("x", spec)
    assert "\n" not in str(err.value)
    return str(err.value)


FILES = {"path": "a", "labels_path": "b", "test_path": "c", "test_labels_path": "d"}


@pytest.mark.parametrize("generator, extra, message", [
    ({"n_samples": 0, **FILES}, {}, "datasets.x.generator.n_samples: 0 is less than the minimum "
                                    "of 1"),
    ({"n_samples": 10, "path": "a", "labels_path": "b", "test_path": "c"}, {},
     "datasets.x.generator: 'test_labels_path' is a required property"),
    ({"n_samples": 10, "n_features": 784, **FILES}, {},
     "datasets.x.generator.n_features: not a parameter of generator deformed"),
    ({"n_samples": 10, "sigma": 0, **FILES}, {}, "datasets.x.generator.sigma: 0 is less than or "
                                                 "equal to the minimum of 0"),
    ({"n_samples": 10, "max_shift": 1.5, **FILES}, {},
     "datasets.x.generator.max_shift: 1.5 is not of type 'integer'"),
    ({"n_samples": 10, "alpha": -1, **FILES}, {}, "datasets.x.generator.alpha: -1 is less than"),
    ({"n_samples": 10, **FILES}, {"split": {"test_size": 0.1}},
     "datasets.x.split: not used with generator deformed"),
    ({"n_samples": 10, **FILES}, {"task": "regression"},
     "datasets.x.task: generator deformed makes a classification task"),
])
def test_bad_entries_fail_in_one_line_naming_the_key(generator, extra, message):
    spec = {"task": "multiclass", "generator": {"name": "deformed", **generator}, **extra}
    assert _error(spec).startswith(message)


def test_other_generators_still_need_features_and_two_rows():
    assert _error({"task": "binary", "generator": {"name": "classification", "n_samples": 9}}
                  ).startswith("datasets.x.generator: 'n_features' is a required property")
    assert _error({"task": "binary", "generator": {
        "name": "classification", "n_samples": 1, "n_features": 2}}).startswith(
        "datasets.x.generator.n_samples: 1 is less than the minimum of 2")
    assert _error({"task": "binary", "generator": {
        "name": "classification", "n_samples": 9, "n_features": 2, "path": "a"}}).startswith(
        "datasets.x.generator.path: not a parameter of generator classification")


def test_missing_or_mismatched_files_are_named(tiny, tmp_path):
    def fails(files: dict, **extra) -> str:
        spec = {"task": "multiclass", "generator": {"name": "deformed", "n_samples": 50,
                                                    **files, **extra}}
        with pytest.raises(DataError) as err:
            prepare_dataset("x", spec, tmp_path / "x")
        assert not (tmp_path / "x").exists()
        return str(err.value)

    missing = str(tmp_path / "nowhere.gz")
    assert fails({**tiny, "test_labels_path": missing}) == (
        f"datasets.x.generator.test_labels_path: file not found: {missing}")
    small = _write_idx(tmp_path / "small", _blobs(12, 2, size=20))
    assert fails({**tiny, "test_path": str(small)}).startswith(
        "datasets.x.generator.test_path: images are 20x20, the training images 28x28")
    flat = _write_idx(tmp_path / "flat", np.zeros((40, 784), dtype=np.uint8))
    assert fails({**tiny, "path": str(flat)}) == (
        "datasets.x.generator.path: flat is not a set of byte images (n x rows x cols): type "
        "|u1, 2 dimensions")
    assert fails(tiny, max_shift=28).startswith(
        "datasets.x.generator.max_shift: 28 pixels is not smaller than the 28x28 images")


def test_rule_inputs_are_the_four_files(tiny):
    from kernelscale.pipeline.data import rule_helpers

    config = {"datasets": {"d8m": {"task": "multiclass", "generator": {
        "name": "deformed", "n_samples": 10, **tiny}}}}
    assert rule_helpers.prepare_inputs(config, "d8m") == [tiny[k] for k in dm.FILE_KEYS]
    assert rule_helpers.prepare_resources(config, "d8m")["mem_mb"] > 900


def test_million_config_is_valid_over_config_yaml():
    """config/million.yaml merged over config.yaml passes the schema and the name checks (files
    are not read: it validates without the dev data) and names 10^6-row sets."""
    from kernelscale.pipeline.cli import main

    files = [str(ROOT / "config.yaml"), str(ROOT / "config" / "million.yaml")]
    assert main(["check-config", *files, "--schema",
                 str(ROOT / "workflow/schemas/config.schema.yaml")]) == 0
    config = yaml.safe_load((ROOT / "config" / "million.yaml").read_text())
    for name, spec in config["datasets"].items():
        assert validate_dataset_spec(name, spec)["generator"]["n_samples"] == 1_000_000, name


fashion = pytest.mark.skipif(not (FASHION / "train-images-idx3-ubyte.gz").is_file(),
                             reason=f"no Fashion-MNIST in {FASHION}")


def _fashion_params(n: int) -> dict:
    return _params({"path": str(FASHION / "train-images-idx3-ubyte.gz"),
                    "labels_path": str(FASHION / "train-labels-idx1-ubyte.gz"),
                    "test_path": str(FASHION / "t10k-images-idx3-ubyte.gz"),
                    "test_labels_path": str(FASHION / "t10k-labels-idx1-ubyte.gz")}, n)


@fashion
def test_fashion_mnist_block_across_the_originals_end():
    params = _fashion_params(1_000_000)
    images, labels = load_idx_images(params["path"], params["labels_path"])
    flat = images.reshape(60_000, -1)
    block = next(dm.generate_deformed(params, blocks=[7]))  # rows 57,344 .. 65,535
    rows = np.arange(block.first_row, block.first_row + len(block))
    source = rows % 60_000
    np.testing.assert_array_equal(block.y, labels[source])
    originals = rows < 60_000
    np.testing.assert_array_equal(block.X[originals], flat[source[originals]])
    X, src = block.X[~originals], flat[source[~originals]].astype(np.float32)
    assert X.min() >= 0 and X.max() <= 255 and np.array_equal(X, np.rint(X))
    change = np.abs(X - src).mean(axis=1)
    assert (change > 0).mean() > 0.99
    assert 20 < change.mean() < 40  # grey levels; 29 measured (a 1-pixel shift alone: 21)
    corr = [np.corrcoef(a, b)[0, 1] for a, b in zip(X[:500], src[:500], strict=True)]
    assert np.median(corr) > 0.6  # 0.74 measured


@fashion
def test_fashion_mnist_test_set_is_the_original(tmp_path):
    from kernelscale.pipeline.data.sources import open_source

    spec = validate_dataset_spec("f", {"task": "multiclass", "generator": _fashion_params(10)})
    source = open_source("f", spec)
    test_images, test_labels = load_idx_images(spec["generator"]["test_path"],
                                               spec["generator"]["test_labels_path"])
    blocks = list(source.test(4096, None))
    assert sum(len(b) for b in blocks) == 10_000
    np.testing.assert_array_equal(np.concatenate([b.X for b in blocks]),
                                  test_images.reshape(10_000, -1))
    np.testing.assert_array_equal(np.concatenate([b.y for b in blocks]), test_labels)
