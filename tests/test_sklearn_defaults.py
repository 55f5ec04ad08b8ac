"""scikit-learn's estimator checks on every public estimator at its defaults.

The DSG family and kernel EigenPro predict in float32 (engine dtype "auto"): a row's value changes
in its last bits with the number of rows predicted with it, above
``check_methods_subset_invariance``'s rtol of 1e-7 (``tests/test_dsg.py`` and
``tests/test_eigenpro.py`` check it at float32's tolerance). That check is the one expected
failure, where it fails.
"""

from sklearn.utils.estimator_checks import parametrize_with_checks

import kernelscale

PUBLIC = [getattr(kernelscale, n) for n in kernelscale.__all__ if n[0].isupper() and n != "Engine"]
FLOAT32_ROUNDING = {"check_methods_subset_invariance": "float32 rounding (module docstring)"}


@parametrize_with_checks([cls() for cls in PUBLIC], expected_failed_checks=lambda est: (
    FLOAT32_ROUNDING if getattr(est, "_auto_dtype", "float64") == "float32" else {}))
def test_every_estimator_passes_at_its_defaults(estimator, check):
    check(estimator)
