"""scikit-learn estimators over kernelscale's solvers."""
