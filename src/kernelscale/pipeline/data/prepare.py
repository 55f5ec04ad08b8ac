"""Prepare a dataset: source -> checked, split, standardized, PCA-projected chunked Zarr.

Two streaming passes over the source, so memory depends on the block size, never on n:

1. *scan*: check every row (finite features, labels that fit the task), count train/test rows,
   find the feature count and the classes, and accumulate the moments of the training rows
   (their PCA part on the dask cluster under ``spread.use_client``: the same numbers);
2. *write*: read the source again, map labels to class indices, transform each block
   (:class:`Transform`), split it and append the rows to the arrays of :mod:`.store`
   (``preprocess.sparse``: CSR stores).

Everything is written into a temporary folder that replaces ``out_dir`` by one rename at the
end, ``meta.json`` last, so ``out_dir`` is either the previous complete result or the new one.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse
from sklearn.preprocessing import normalize

from ... import __version__
from ...spread.cluster import client_from_setting, current_client, n_threads, use_client
from . import store
from .errors import DataError
from .labels import LabelCheck, check_finite
from .progress import progress
from .sources import Source, open_source
from .spec import validate_dataset_spec
from .split import test_mask
from .stats import RunningMoments, block_moments, pca_from_moments, standardizer

log = logging.getLogger("kernelscale.pipeline.data")

# Values per read block (16 MiB of float32); blocks get fewer rows when rows are wide.
READ_BLOCK_VALUES = 1 << 22
# Rows per block while the width is still unknown (LIBSVM without n_features).
UNKNOWN_WIDTH_BLOCK_ROWS = 8192
# A d x d scatter matrix is accumulated for PCA; beyond this width it would not fit comfortably.
MAX_PCA_WIDTH = 20_000


@dataclass
class Scan:
    """What the first pass learned about the data."""

    n_train: int
    n_test: int
    width: int
    classes: np.ndarray | None
    moments: RunningMoments | None


@dataclass
class Transform:
    """Standardization and PCA fitted on the training rows, applied block by block, then (with
    ``normalize="l2"``) each row divided by its L2 norm (all-zero rows stay zero)."""

    shift: np.ndarray | None = None
    scale: np.ndarray | None = None
    axes: np.ndarray | None = None  # (d_raw, k)
    centre: np.ndarray | None = None  # subtracted before projecting (zeros if uncentered)
    ratios: np.ndarray | None = None
    normalize: str | None = None  # "l2": unit rows, last

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Rows X transformed: float32, CSR for CSR rows (scaled only, never centred)."""
        sparse = hasattr(X, "tocsr")
        if self.scale is None and self.axes is None and self.normalize is None:
            return X.tocsr() if sparse else X
        Z = (X.tocsr() if sparse else X).astype(np.float64)
        if self.scale is not None:
            Z = Z @ scipy.sparse.diags(1 / self.scale) if sparse else (Z - self.shift) / self.scale
        if self.axes is not None:
            Z = (Z - self.centre) @ self.axes
        if self.normalize is not None:
            Z = normalize(Z, norm="l2", copy=False)
        return Z.astype(np.float32).tocsr() if sparse else Z.astype(np.float32)


def prepare_dataset(name: str, spec: dict, out_dir: str | Path,
                    cache_dir: str | Path | None = None, threads: int = 1,
                    dask_scheduler: str | None = None, dask_workers: int | None = None) -> dict:
    """Prepare ``datasets.<name>`` into ``out_dir`` (data.zarr + meta.json); return the meta.

    ``cache_dir``: where url sources are (or get) downloaded; ``threads`` caps the BLAS threads;
    ``dask_scheduler``: "local" or a scheduler address to compute PCA moments on (see
    ``spread.client_from_setting``), None keeps the caller's ``use_client`` setting.
    Raises :class:`DataError` with a one-line message on bad config or bad data.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=max(1, int(threads)), user_api="blas"):
        if dask_scheduler is None:
            return _prepare(name, spec, out_dir, cache_dir)
        with client_from_setting(dask_scheduler, dask_workers) as client, use_client(client):
            return _prepare(name, spec, out_dir, cache_dir)


def _prepare(name: str, spec: dict, out_dir: str | Path, cache_dir: str | Path | None) -> dict:
    started = time.monotonic()
    spec = validate_dataset_spec(name, spec)
    out_dir = Path(out_dir)
    source = open_source(name, spec, cache_dir)
    scan = scan_source(name, spec, source)
    transform = fit_transform(name, spec, scan)
    staging = store.staging_dir(out_dir)
    try:
        zarr_dir = staging / store.ZARR_DIR
        hashes, chunk_rows = write_arrays(name, spec, source, scan, transform, zarr_dir)
        meta = build_meta(name, spec, source, scan, transform, hashes, chunk_rows)
        # what train checks before reading (store.verify_prepared): every file as written
        meta[store.CHECKSUMS_KEY] = store.chunk_checksums(zarr_dir)
        store.write_json_atomic(staging / store.META_FILE, meta)  # last: presence means complete
        store.publish(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("%s: prepared %d train + %d test rows x %d features in %.1f s -> %s", name,
             scan.n_train, scan.n_test, meta["d"], time.monotonic() - started, out_dir)
    return meta


def _block_rows(spec: dict, width: int | None) -> int:
    if width is None or spec["preprocess"].get("sparse"):  # sparse rows: not width-bound
        return min(spec["chunk_rows"], UNKNOWN_WIDTH_BLOCK_ROWS)
    return max(1, min(spec["chunk_rows"], READ_BLOCK_VALUES // max(width, 1)))


def _split_blocks(source: Source, spec: dict, block_rows: int, width: int | None):
    """``(block, train rows, test rows)`` for every block of the source: the rows as split by
    ``spec["split"]`` (or all train), then those of the test file (all test)."""
    split = spec.get("split")
    every, none = slice(None), slice(0, 0)
    for block in source.train(block_rows, width):
        if split is None:
            yield block, every, none
        else:
            is_test = test_mask(split["seed"], block.first_row, len(block), split["test_size"])
            yield block, ~is_test, is_test
    if source.test is not None:
        for block in source.test(block_rows, width):
            yield block, none, every


def scan_source(name: str, spec: dict, source: Source) -> Scan:
    """Pass 1: validate every row; count, find classes and width; moments of train rows."""
    preprocess = spec["preprocess"]
    want_moments = preprocess["standardize"] or preprocess["pca"] is not None
    moments = RunningMoments(full=preprocess["pca"] is not None) if want_moments else None
    add_moments = _MomentsOnCluster(moments) if moments is not None else None
    labels = LabelCheck(spec["task"])
    n_train = n_test = 0
    width: int | None = None
    generator = spec.get("generator", {})  # deformed: width known once its files are read
    block_rows = _block_rows(spec, generator.get("n_features", spec.get("n_features")))
    with progress(generator.get("n_samples"), f"{name}: scan") as bar:
        for block, train, _ in _split_blocks(source, spec, block_rows, None):
            check_finite(block)
            labels.update(block)
            w = block.X.shape[1]
            if width is not None and w != width and source.fixed_width:
                raise block.fail(0, f"has {w} features, earlier rows have {width}")
            width = w if width is None else max(width, w)
            train_X = block.X[train]
            n_train += train_X.shape[0]
            n_test += len(block) - train_X.shape[0]
            if moments is not None:
                add_moments(train_X)
            bar.update(len(block))
    if n_train == 0:
        raise DataError(f"datasets.{name}: no training rows (the split put every row in the "
                        "test set)")
    if moments is not None:
        add_moments.finish()
        moments.widen(width)
    return Scan(n_train, n_test, width, labels.classes(), moments)


class _MomentsOnCluster:
    """``moments.update`` for each block, the PCA scatter products computed on the current dask
    client if any (a few blocks in flight) and merged in row order: the same moments."""

    def __init__(self, moments: RunningMoments):
        self.moments = moments
        self.client = current_client() if moments.full else None  # mean/variance: cheap here
        self.pending: deque = deque()
        self.width = moments.width
        self.max_pending = 2 * n_threads(self.client) if self.client is not None else 0

    def __call__(self, X: np.ndarray) -> None:
        if self.client is None:
            self.moments.update(X)
            return
        if X.shape[0] == 0:
            return
        self.width = max(self.width, X.shape[1])
        block = self.client.scatter(X, hash=False)
        self.pending.append(self.client.submit(block_moments, block, self.width, True, pure=False))
        while len(self.pending) > self.max_pending:
            self.moments.merge(self.pending.popleft().result())

    def finish(self) -> None:
        while self.pending:
            self.moments.merge(self.pending.popleft().result())


def fit_transform(name: str, spec: dict, scan: Scan) -> Transform:
    """Standardization and PCA from the first pass's moments."""
    preprocess = spec["preprocess"]
    transform = Transform(normalize=preprocess.get("normalize"))
    if preprocess["standardize"]:
        transform.shift, transform.scale = standardizer(scan.moments)
        if preprocess.get("sparse"):
            transform.shift = None  # scale only: centring would fill every zero
    pca = preprocess["pca"]
    if pca is not None:
        if pca["n_components"] > scan.width:
            raise DataError(f"datasets.{name}.preprocess.pca.n_components: {pca['n_components']} "
                            f"is more than the {scan.width} features")
        if scan.width > MAX_PCA_WIDTH:
            raise DataError(f"datasets.{name}.preprocess.pca: {scan.width} features is more "
                            f"than the {MAX_PCA_WIDTH} this PCA (d x d covariance) supports")
        shift = transform.shift if transform.shift is not None else np.zeros(scan.width)
        scale = transform.scale if transform.scale is not None else np.ones(scan.width)
        transform.axes, transform.centre, transform.ratios = pca_from_moments(
            scan.moments, shift, scale, pca["n_components"], pca["center"])
    return transform


def write_arrays(name: str, spec: dict, source: Source, scan: Scan, transform: Transform,
                 zarr_path: Path) -> tuple[dict, int]:
    """Pass 2: transform and split each block, append its rows to the Zarr arrays; return
    (sha256 per array, rows per chunk)."""
    import zarr

    d = scan.width if transform.axes is None else transform.axes.shape[1]
    chunk_rows = max(1, min(spec["chunk_rows"], scan.n_train))
    y_dtype = "float32" if scan.classes is None else "int64"
    group = zarr.open_group(str(zarr_path), mode="w", zarr_format=3)
    writers = {}
    for part, n in (("train", scan.n_train), ("test", scan.n_test)):
        writers[f"X_{part}"] = (store.SparseWriter(group, f"X_{part}", n, d, chunk_rows)
                                if spec["preprocess"].get("sparse") else
                                store.ChunkedWriter(group.create_array(
                                    f"X_{part}", shape=(n, d), chunks=(chunk_rows, d),
                                    dtype="float32")))
        writers[f"y_{part}"] = store.ChunkedWriter(group.create_array(
            f"y_{part}", shape=(n,), chunks=(chunk_rows,), dtype=y_dtype))
    if transform.axes is not None:
        components = group.create_array("pca_components", shape=transform.axes.T.shape,
                                        chunks=transform.axes.T.shape, dtype="float64")
        components[:] = transform.axes.T

    block_rows = _block_rows(spec, scan.width)
    with progress(scan.n_train + scan.n_test, f"{name}: write") as bar:
        for block, train, test in _split_blocks(source, spec, block_rows, scan.width):
            X = transform.apply(block.X)
            y = block.y if scan.classes is None else np.searchsorted(scan.classes, block.y)
            for part, rows in (("train", train), ("test", test)):
                writers[f"X_{part}"].append(X[rows])
                writers[f"y_{part}"].append(y[rows])
            bar.update(len(block))
    return {key: writer.close() for key, writer in writers.items()}, chunk_rows


def build_meta(name: str, spec: dict, source: Source, scan: Scan, transform: Transform,
               hashes: dict, chunk_rows: int) -> dict:
    """The meta.json record: shapes, classes, fitted preprocessing, provenance, hashes."""
    pca = spec["preprocess"]["pca"]
    return {
        "name": name,
        "task": spec["task"],
        "n_train": scan.n_train,
        "n_test": scan.n_test,
        "d": scan.width if transform.axes is None else int(transform.axes.shape[1]),
        "d_raw": scan.width,
        **({"sparse": True} if spec["preprocess"].get("sparse") else {}),
        "classes": None if scan.classes is None else [
            int(c) if float(c).is_integer() else float(c) for c in scan.classes],
        "chunk_rows": chunk_rows,
        "standardize": None if transform.scale is None else {
            "mean": None if transform.shift is None else transform.shift.tolist(),
            "scale": transform.scale.tolist()},
        **({"normalize": transform.normalize} if transform.normalize is not None else {}),
        "pca": None if pca is None else {
            "n_components": pca["n_components"], "center": pca["center"],
            "explained_variance_ratio": transform.ratios.tolist(),
            "mean": transform.centre.tolist(), "components": "data.zarr/pca_components"},
        "split": spec.get("split") or {"test_file": True},
        "source": source.description,
        "sha256": hashes,
        "spec": spec,
        "kernelscale_version": __version__,
        **source.meta,
    }
