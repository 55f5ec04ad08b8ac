"""The development datasets of a ``devdata.yaml`` folder (``../shared/devdata`` beside the
repository), prepared exactly as the pipeline prepares a dataset (``data.prepare``: the seeded
split, training-set standardisation) and cached on disk; used by ``kernelscale reproduce`` and by
the real-data races of ``benchmarks/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

DEVDATA_ENV = "KERNELSCALE_DEVDATA"


def default_devdata() -> Path:
    """``$KERNELSCALE_DEVDATA``, else ``../shared/devdata`` relative to the working directory (the
    repository root, where the pipeline runs)."""
    return Path(os.environ.get(DEVDATA_ENV) or Path("..") / "shared" / "devdata")


def load_devdata_specs(devdata: Path) -> dict:
    """The ``datasets:`` entries of ``devdata.yaml`` with paths made absolute."""
    import yaml

    cfg_path = devdata / "devdata.yaml"
    if not cfg_path.is_file():
        raise SystemExit(f"devdata: {cfg_path} not found (the devdata folder is missing)")
    specs = yaml.safe_load(cfg_path.read_text())["datasets"]
    for spec in specs.values():
        for key in ("path", "test_path", "labels_path", "test_labels_path"):
            if key in spec:
                # devdata.yaml's paths are relative to a project root beside shared/
                # (../shared/devdata/...); a devdata folder elsewhere holds the same relative
                # layout below it
                rel = Path(spec[key])
                parts = rel.parts[rel.parts.index("devdata") + 1:] if "devdata" in rel.parts \
                    else (rel.name,)
                spec[key] = str(devdata.joinpath(*parts))
                if not Path(spec[key]).is_file():
                    raise SystemExit(f"devdata: {spec[key]} (datasets.{key}) not found")
    return specs


def prepared(name: str, spec: dict, cache: Path):
    """(X_train, y_train, X_test, y_test, meta) of the pipeline's preparation, cached on disk."""
    from .data.errors import DataError
    from .data.prepare import prepare_dataset
    from .data.store import open_prepared

    out = cache / name
    if not (out / "meta.json").is_file():
        prepare_dataset(name, spec, out)
    try:
        meta, arrays = open_prepared(out)
    except DataError:  # our own cache, prepared by an older kernelscale: prepare it again
        shutil.rmtree(out)
        prepare_dataset(name, spec, out)
        meta, arrays = open_prepared(out)
    X_tr = np.asarray(arrays["X_train"][:], dtype=np.float64)
    X_te = np.asarray(arrays["X_test"][:], dtype=np.float64)
    y_tr, y_te = np.asarray(arrays["y_train"][:]), np.asarray(arrays["y_test"][:])
    if spec["task"] == "regression":
        y_tr, y_te = y_tr.astype(np.float64), y_te.astype(np.float64)
    return X_tr, y_tr, X_te, y_te, meta


def subsample(X, y, n: int | None, seed: int = 0):
    """``n`` rows of (X, y) drawn without replacement (seeded), in their stored order; all rows
    when ``n`` is None or not smaller."""
    if n is None or X.shape[0] <= n:
        return X, y
    idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], n, replace=False))
    return X[idx], y[idx]
