"""Algorithm registry: the names the pipeline's ``config.yaml`` uses for estimators.

Each entry maps an algorithm name to its estimator class per task ("classification",
"regression") as ``"module:Class"`` strings, imported lazily so the CLI starts fast.

Protocol every registered estimator follows (the pipeline relies on it):
* scikit-learn estimator; ``fit(X, y)`` accepts numpy arrays and, where the method allows,
  row-chunked on-disk arrays (zarr / dask) which it reads in chunks;
* ``iterative = True`` estimators support ``warm_start=True``: each ``fit`` call continues from the
  fitted state for another ``n_iter`` iterations, and a run split into segments gives the same
  model as one call (the pipeline checkpoints between segments);
* ``history_`` (after fit): dict of equal-length lists, at least ``iter`` and ``time`` (seconds);
  ``objective`` where the solver estimates it.
"""

from __future__ import annotations

import importlib

ALGORITHMS: dict[str, dict[str, str]] = {
    "dsg": {
        "classification": "kernelscale.estimators.dsg:DSGClassifier",
        "regression": "kernelscale.estimators.dsg:DSGRegressor",
    },
}

# Parameters fixed by the algorithm name (e.g. "udsg" is DSG with variant="udsg").
PRESETS: dict[str, dict] = {
    "dsg": {"variant": "dsg"},
}


def register(name: str, classification: str | None = None, regression: str | None = None,
             **preset) -> None:
    entry = {k: v for k, v in (("classification", classification), ("regression", regression)) if v}
    ALGORITHMS[name] = entry
    PRESETS[name] = preset


def estimator_class(name: str, task: str):
    """The estimator class of algorithm ``name`` for ``task`` ("binary"/"multiclass" count as
    classification); one-line error for an unknown name or a task it does not do."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    kind = "classification" if task in ("binary", "multiclass", "classification") else task
    if kind not in ALGORITHMS[name]:
        raise ValueError(f"algorithm {name!r} does not do {task} (it does {sorted(ALGORITHMS[name])})")
    module, _, cls = ALGORITHMS[name][kind].partition(":")
    return getattr(importlib.import_module(module), cls)


def make_estimator(name: str, task: str, **params):
    """Instantiate algorithm ``name`` for ``task`` with its preset plus ``params``."""
    cls = estimator_class(name, task)
    return cls(**{**PRESETS.get(name, {}), **params})
