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

_DSG = {
    "classification": "kernelscale.estimators.dsg:DSGClassifier",
    "regression": "kernelscale.estimators.dsg:DSGRegressor",
}
_EIGENPRO = {
    "classification": "kernelscale.estimators.eigenpro:EigenProClassifier",
    "regression": "kernelscale.estimators.eigenpro:EigenProRegressor",
}
_EIGENPRO_RF = {
    "classification": "kernelscale.estimators.eigenpro:EigenProRFClassifier",
    "regression": "kernelscale.estimators.eigenpro:EigenProRFRegressor",
}
_RB = {
    "classification": "kernelscale.estimators.random_binning:RBClassifier",
    "regression": "kernelscale.estimators.random_binning:RBRegressor",
}
_RFF = {
    "classification": "kernelscale.estimators.rff_sgd:RFFSGDClassifier",
    "regression": "kernelscale.estimators.rff_sgd:RFFSGDRegressor",
}

# Algorithms without a GPU path, and why (a `device: gpu` entry for them is a config error).
CPU_ONLY: dict[str, str] = {
    "libsvm": "LIBSVM's SMO solver is CPU code",
    "rb_cd": "asynchronous coordinate descent on numba threads; one coordinate update touches a "
             "few rows, so on a GPU it would be a stream of tiny kernel launches",
}

ALGORITHMS: dict[str, dict[str, str]] = {
    # doubly stochastic gradients and the variants reusing old features (UDSG, CDSG)
    "dsg": _DSG,
    "udsg": _DSG,
    "cdsg": _DSG,
    # EigenPro and its unpreconditioned loop (plain kernel SGD)
    "eigenpro": _EIGENPRO,
    "eigenpro_rf": _EIGENPRO_RF,
    "kernel_sgd": _EIGENPRO,
    # Random Binning features with conjugate gradients / parallel coordinate descent
    "rb_cg": _RB,
    "rb_cd": _RB,
    # baselines
    "rff_sgd": _RFF,
    "rff_svrg": _RFF,
    "nystrom": {
        "classification": "kernelscale.estimators.nystrom:NystromRidgeClassifier",
        "regression": "kernelscale.estimators.nystrom:NystromRidgeRegressor",
    },
    "exact_krr": {
        "classification": "kernelscale.estimators.exact:ExactKRRClassifier",
        "regression": "kernelscale.estimators.exact:ExactKRRRegressor",
    },
    "libsvm": {
        "classification": "kernelscale.estimators.exact:ExactSVMClassifier",
        "regression": "kernelscale.estimators.exact:ExactSVMRegressor",
    },
    "pegasos": {"classification": "kernelscale.estimators.pegasos:PegasosClassifier"},
    "norma": {
        "classification": "kernelscale.estimators.norma:NORMAClassifier",
        "regression": "kernelscale.estimators.norma:NORMARegressor",
    },
}

# Estimators whose result is the exact kernel machine's (no approximation of the kernel, solved to
# the optimum): the reference that the tables' "best exact kernel" row and the plots' dotted line
# are taken from (``tables.best_exact_kernel``).
EXACT_KERNEL = ("exact_krr", "libsvm")

# Parameters fixed by the algorithm name (e.g. "udsg" is DSG with solver="udsg").
PRESETS: dict[str, dict] = {
    "dsg": {"solver": "dsg"},
    "udsg": {"solver": "udsg"},
    "cdsg": {"solver": "cdsg"},
    "kernel_sgd": {"n_eigenvectors": 0},
    # RB-CD's l1_reg is the per-sample L1 lambda of its own objective (the held-out selection
    # behind "auto" picks a ridge), so it keeps a fixed value of that scale
    "rb_cg": {"solver": "cg"},
    "rb_cd": {"solver": "cd", "l1_reg": 1e-4},
    "rff_sgd": {"solver": "sgd"},
    "rff_svrg": {"solver": "svrg"},
}
# Preset values an entry's params may change; the others are what the name means (the config
# check refuses rff_sgd with solver: svrg rather than run SVRG under the name rff_sgd).
ADJUSTABLE: dict[str, tuple[str, ...]] = {"rb_cd": ("l1_reg",)}


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
