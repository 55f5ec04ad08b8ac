"""Turn a validated dataset entry into streams of row blocks (train, and test if separate).

The same :class:`Source` is iterated twice by :mod:`.prepare` (statistics, then writing), so a
stream must be re-creatable: files are reopened, generators regenerate the same blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .download import download_dataset, remote_files, sha256_of
from .errors import DataError
from .generators import generate
from .readers import Block, read_file
from .readers.idx import idx_shape, read_idx
from .spec import is_deformed, source_kind

ROLE_NAMES = {"": "train", "labels_": "train_labels", "test_": "test",
              "test_labels_": "test_labels"}


@dataclass
class Source:
    """Re-iterable block streams of one dataset plus what meta.json records about its origin."""

    kind: str
    train: Callable[[int, int | None], Iterator[Block]]
    test: Callable[[int, int | None], Iterator[Block]] | None
    description: dict = field(default_factory=dict)
    fixed_width: bool = True  # False: blocks may be narrower than d (libsvm without n_features)
    meta: dict = field(default_factory=dict)  # more top-level meta.json keys (bayes_error)


def open_source(name: str, spec: dict, cache_dir: str | Path | None = None) -> Source:
    """The :class:`Source` for ``datasets.<name>``; url files are fetched/verified first."""
    kind = source_kind(spec)
    if is_deformed(spec):
        return _deformed_source(name, spec["generator"])
    if kind == "generator" and spec["generator"]["name"] == "bayes":
        return _bayes_source(name, spec["generator"])
    if kind == "generator":
        params = spec["generator"]
        return Source(kind, lambda block_rows, d: generate(params, origin=f"{name} (generator)"),
                      None, {"kind": kind, "params": params})
    if kind == "sklearn":
        return _sklearn_source(name, spec["sklearn"])
    if kind == "url":
        remote = remote_files(name, spec, cache_dir)
        download_dataset(name, spec, cache_dir)  # no-op when cached; re-verifies the sha256
        paths = {f.role: f.path for f in remote}
        files = [{"role": ROLE_NAMES[f.role], "name": f.path.name, "url": f.url,
                  "sha256": f.sha256} for f in remote]
    else:
        paths = {}
        for role in ROLE_NAMES:
            if f"{role}path" in spec:
                path = Path(spec[f"{role}path"]).expanduser()
                if not path.is_file():
                    raise DataError(f"datasets.{name}.{role}path: file not found: {path}")
                paths[role] = path
        files = [{"role": ROLE_NAMES[role], "name": path.name, "path": str(path.resolve()),
                  "sha256": sha256_of(path)} for role, path in paths.items()]

    def reader(role: str) -> Callable[[int, int | None], Iterator[Block]]:
        def blocks(block_rows: int, d: int | None) -> Iterator[Block]:
            n_features = d if d is not None else spec.get("n_features")
            return read_file(spec["format"], paths[role], block_rows=block_rows,
                             labels_path=paths.get(f"{role}labels_"),
                             archive=spec.get("archive"), n_features=n_features,
                             zero_based=spec.get("zero_based", False),
                             csv_options=spec.get("csv"),
                             sparse=spec.get("preprocess", {}).get("sparse", False))
        return blocks

    return Source(kind, reader(""), reader("test_") if "test_" in paths else None,
                  {"kind": kind, "format": spec["format"], "files": files},
                  fixed_width=spec["format"] != "libsvm" or "n_features" in spec)


def _sklearn_source(name: str, loader: str) -> Source:
    import sklearn
    import sklearn.datasets

    def blocks(block_rows: int, d: int | None) -> Iterator[Block]:
        X, y = getattr(sklearn.datasets, f"load_{loader}")(return_X_y=True)
        for start in range(0, len(y), block_rows):
            yield Block(np.asarray(X[start:start + block_rows], dtype=np.float32),
                        np.asarray(y[start:start + block_rows], dtype=np.float64), start,
                        f"{name} (sklearn load_{loader})")

    return Source("sklearn", blocks, None,
                  {"kind": "sklearn", "loader": f"load_{loader}",
                   "sklearn_version": sklearn.__version__})


def _deformed_source(name: str, params: dict) -> Source:
    """Generator ``deformed``: training blocks deformed from the IDX images, the test set read
    from the test files unchanged. Files and image sizes are checked here, before any block."""
    from .deformed import FILE_KEYS, generate_deformed

    where = f"datasets.{name}.generator"
    paths = {}
    for key in FILE_KEYS:
        path = Path(params[key]).expanduser()
        if not path.is_file():
            raise DataError(f"{where}.{key}: file not found: {path}")
        paths[key] = path
    dims = {}
    for key in ("path", "test_path"):
        dtype, dims[key] = idx_shape(paths[key])
        if dtype != np.dtype(">u1") or len(dims[key]) != 3:
            raise DataError(f"{where}.{key}: {paths[key].name} is not a set of byte images "
                            f"(n x rows x cols): type {dtype.str}, {len(dims[key])} dimensions")
    train_dims, test_dims = dims["path"], dims["test_path"]
    if test_dims[1:] != train_dims[1:]:
        raise DataError(f"{where}.test_path: images are {'x'.join(map(str, test_dims[1:]))}, "
                        f"the training images {'x'.join(map(str, train_dims[1:]))}")
    if params["max_shift"] >= min(train_dims[1:]):
        raise DataError(f"{where}.max_shift: {params['max_shift']} pixels is not smaller than "
                        f"the {'x'.join(map(str, train_dims[1:]))} images")
    origin = f"{name} (generator deformed)"

    def train(block_rows: int, d: int | None) -> Iterator[Block]:
        return generate_deformed(params, origin)

    def test(block_rows: int, d: int | None) -> Iterator[Block]:
        return read_idx(paths["test_path"], paths["test_labels_path"], block_rows=block_rows)

    files = [{"role": role, "name": paths[key].name, "path": str(paths[key].resolve()),
              "sha256": sha256_of(paths[key])}
             for role, key in zip(ROLE_NAMES.values(), FILE_KEYS, strict=True)]
    return Source("generator", train, test, {"kind": "generator", "params": params,
                                             "files": files})


def _bayes_source(name: str, params: dict) -> Source:
    """Generator ``bayes``: its blocks, and its Bayes error for meta.json (computed here, once:
    a few seconds)."""
    from .bayes import bayes_meta, generate_bayes

    origin = f"{name} (generator bayes)"
    return Source("generator", lambda block_rows, d: generate_bayes(params, origin), None,
                  {"kind": "generator", "params": params}, meta=bayes_meta(params))
