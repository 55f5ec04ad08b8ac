"""What a fitted estimator chose: the values behind its ``"auto"`` parameters.

``params.json`` and the MLflow params say ``reg: auto``; the value used lives only in the fitted
estimator (``reg_``, ``bandwidth_``, ``solver_.eta0`` ...). ``chosen_settings`` reads the ones
listed in ``CHOSEN`` from any estimator, so the pipeline has no per-estimator code: a family
records the attributes it has, and a new estimator that uses these names is recorded as well.
The run folder keeps them in ``final.json`` under ``chosen``; MLflow gets them as
``chosen.<name>`` params; the plots' titles show them.
"""

from __future__ import annotations

import numbers

# (name in final.json / MLflow, attribute paths on the fitted estimator, first found wins).
# The families that set each one are noted; a missing attribute is simply not recorded.
CHOSEN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("loss", ("loss_.name", "_loss_name()")),   # DSG, RFF, NORMA: the loss a default resolved to
    ("bandwidth", ("bandwidth_",)),              # every kernel estimator
    ("reg", ("reg_",)),                          # all but EigenPro (none) and RB-CD (l1_reg)
    ("l1_reg", ("l1_reg_",)),                    # Random Binning CD: lambda of its L1 objective
    ("C", ("C_",)),                              # LIBSVM: C = 1 / (n reg)
    ("ridge", ("ridge_",)),                      # Random Binning CG: the alpha its solver uses
    ("n_components", ("n_components_",)),        # RFF, Nystrom
    ("rank", ("rank_",)),                        # Nystrom: centres kept after the pseudo-inverse
    ("solver", ("solver_.method",)),             # Nystrom: "direct" or "cg" ("auto" picks)
    ("n_features_out", ("n_features_out_",)),    # Random Binning: non-empty bins of all grids
    ("kappa", ("kappa_",)),                      # Random Binning: D / R, non-empty bins per grid
    ("n_iter", ("n_iter_per_fit_",)),            # DSG: iterations per fit call
    ("iterations", ("n_iter_",)),                # iterations run in all (every segment)
    ("epochs", ("n_epochs_",)),                  # EigenPro
    # step size: RFF's estimator holds it; DSG's and NORMA's only their solver does
    ("eta0", ("eta0_", "solver_.eta0")),
    ("eta", ("eta_",)),                          # EigenPro
    ("t0", ("t0_",)),                            # DSG: offset of the step schedule
    ("max_step_ratio", ("max_step_ratio_",)),    # CDSG: step cap on reused blocks
    ("batch_size", ("batch_size_",)),            # EigenPro (critical batch size), DSG
    ("block_size", ("block_size_",)),            # DSG: random features per block
    ("n_eigenvectors", ("n_eigenvectors_",)),    # EigenPro
    ("subsample_size", ("subsample_size_",)),    # EigenPro: M rows for the eigensystem, at most n
    ("beta", ("beta_",)),                        # EigenPro: max k(x, x) over the subsample
    ("lambda_top", ("lambda_top_",)),            # EigenPro: lambda_1 of the subsample's operator
    ("lambda_next", ("lambda_next_",)),          # EigenPro: lambda_{k+1}, what the step follows
    ("max_terms", ("max_terms_",)),              # NORMA: expansion terms kept (max_terms="auto")
    ("precondition", ("precondition_",)),        # DSG
    ("window_rows", ("window_rows_",)),          # estimators reading X a window at a time
    ("device", ("device_",)),
    ("dtype", ("dtype_", "engine_.dtype")),
)


def _get(obj, path: str):
    """``obj.a.b`` for ``"a.b"`` (``obj.a()`` for ``"a()"``), or None when any step is missing or
    raises (a property of a half-fitted estimator must not cost the run its record)."""
    for name in path.split("."):
        try:
            obj = getattr(obj, name.removesuffix("()"))
            obj = obj() if name.endswith("()") else obj
        except Exception:
            return None
    return obj


def _scalar(v):
    """``v`` as a JSON scalar (numpy scalars and 0-d arrays unwrapped), or None if it is not
    one: arrays, models and solvers are not settings."""
    if hasattr(v, "item") and getattr(v, "shape", None) == ():
        v = v.item()
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return None


def chosen_settings(estimator) -> dict:
    """``{name: value}`` of the ``CHOSEN`` settings that the fitted ``estimator`` has."""
    out = {}
    for name, paths in CHOSEN:
        for path in paths:
            value = _scalar(_get(estimator, path))
            if value is not None:
                out[name] = value
                break
    return out


def format_value(v) -> str:
    """A chosen value for a title: numbers to 3 significant digits."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return f"{v:.3g}"
