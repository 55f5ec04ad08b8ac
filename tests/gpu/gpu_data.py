"""Small generated problems shared by the GPU tests."""

import numpy as np


def regression(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X @ rng.standard_normal(d)) + 0.5 * np.cos(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    return X, y


def classification(n=600, d=5, seed=1, n_classes=2):
    X, y = regression(n, d, seed)
    edges = np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.digitize(y, edges)
