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
from .spec import FILE_ROLES, source_kind

ROLE_NAMES = {"": "train", "labels_": "train_labels", "test_": "test",
              "test_labels_": "test_labels"}


@dataclass
class Source:
    """Re-iterable block streams of one dataset plus what meta.json records about its origin."""

    train: Callable[[int, int | None], Iterator[Block]]
    test: Callable[[int, int | None], Iterator[Block]] | None
    description: dict = field(default_factory=dict)
    fixed_width: bool = True  # False: blocks may be narrower than d (libsvm without n_features)
    meta: dict = field(default_factory=dict)  # more top-level meta.json keys (bayes_error)


def open_source(name: str, spec: dict, cache_dir: str | Path | None = None) -> Source:
    """The :class:`Source` for ``datasets.<name>``; url files are fetched/verified first."""
    kind = source_kind(spec)
    if kind == "generator":
        return _generator_source(name, spec["generator"])
    if kind == "sklearn":
        return _sklearn_source(name, spec["sklearn"])
    if kind == "url":
        remote = remote_files(name, spec, cache_dir)
        download_dataset(name, spec, cache_dir)  # no-op when cached; re-verifies the sha256
        paths = {f.role: f.path for f in remote}
        files = [{"role": ROLE_NAMES[f.role], "name": f.path.name, "url": f.url,
                  "sha256": f.sha256} for f in remote]
    else:
        paths, files = _local_files(f"datasets.{name}", spec)

    def reader(role: str) -> Callable[[int, int | None], Iterator[Block]]:
        return lambda block_rows, d: read_file(
            spec["format"], paths[role], block_rows=block_rows,
            labels_path=paths.get(f"{role}labels_"), archive=spec.get("archive"),
            n_features=d if d is not None else spec.get("n_features"),
            zero_based=spec.get("zero_based", False), csv_options=spec.get("csv"),
            sparse=spec.get("preprocess", {}).get("sparse", False))

    return Source(reader(""), reader("test_") if "test_" in paths else None,
                  {"kind": kind, "format": spec["format"], "files": files},
                  fixed_width=spec["format"] != "libsvm" or "n_features" in spec)


def _local_files(where: str, entry: dict) -> tuple[dict[str, Path], list[dict]]:
    """The files ``<role>path`` of ``entry`` by role, each checked to exist, and their records
    for meta.json."""
    paths = {}
    for role in FILE_ROLES:
        if f"{role}path" in entry:
            path = Path(entry[f"{role}path"]).expanduser()
            if not path.is_file():
                raise DataError(f"{where}.{role}path: file not found: {path}")
            paths[role] = path
    return paths, [{"role": ROLE_NAMES[role], "name": path.name, "path": str(path.resolve()),
                    "sha256": sha256_of(path)} for role, path in paths.items()]


def _sklearn_source(name: str, loader: str) -> Source:
    import sklearn
    import sklearn.datasets

    def blocks(block_rows: int, d: int | None) -> Iterator[Block]:
        X, y = getattr(sklearn.datasets, f"load_{loader}")(return_X_y=True)
        for start in range(0, len(y), block_rows):
            yield Block(np.asarray(X[start:start + block_rows], dtype=np.float32),
                        np.asarray(y[start:start + block_rows], dtype=np.float64), start,
                        f"{name} (sklearn load_{loader})")

    return Source(blocks, None,
                  {"kind": "sklearn", "loader": f"load_{loader}",
                   "sklearn_version": sklearn.__version__})


def _generator_source(name: str, params: dict) -> Source:
    """Generated training blocks; ``bayes`` with its Bayes error for meta.json, ``deformed`` with
    its test set read from its test files (files and image sizes checked here, first)."""
    description = {"kind": "generator", "params": params}
    if params["name"] == "bayes":
        from .bayes import bayes_meta, generate_bayes

        origin = f"{name} (generator bayes)"
        return Source(lambda block_rows, d: generate_bayes(params, origin), None, description,
                      meta=bayes_meta(params))
    if params["name"] != "deformed":
        origin = f"{name} (generator)"
        return Source(lambda block_rows, d: generate(params, origin), None, description)
    from .deformed import generate_deformed

    where = f"datasets.{name}.generator"
    paths, description["files"] = _local_files(where, params)
    size = {}
    for role in ("", "test_"):
        dtype, dims = idx_shape(paths[role])
        if dtype != np.dtype(">u1") or len(dims) != 3:
            raise DataError(f"{where}.{role}path: {paths[role].name} is not a set of byte images "
                            f"(n x rows x cols): type {dtype.str}, {len(dims)} dimensions")
        size[role] = dims[1:]
    if size["test_"] != size[""]:
        raise DataError(f"{where}.test_path: images are {'x'.join(map(str, size['test_']))}, "
                        f"the training images {'x'.join(map(str, size['']))}")
    if params["max_shift"] >= min(size[""]):
        raise DataError(f"{where}.max_shift: {params['max_shift']} pixels is not smaller than "
                        f"the {'x'.join(map(str, size['']))} images")
    origin = f"{name} (generator deformed)"
    return Source(lambda block_rows, d: generate_deformed(params, origin),
                  lambda block_rows, d: read_idx(paths["test_"], paths["test_labels_"],
                                                 block_rows=block_rows), description)
