"""Docstring pieces shared by the estimators, each written once, and ``fill_doc``, which puts them
in: ``%(name)s`` becomes piece ``name`` (its later lines indented as the placeholder's line).
Pieces may name pieces; a family's own (``fill_doc(**pieces)``) take precedence over ``DOCS``."""

from __future__ import annotations

import inspect
import re

_REG_MEANING = """
    nu, the weight of the penalty in the averaged objective (nu/2)||f||^2 + (1/n) sum_i
    loss(f(x_i), y_i). "auto": nu = s alpha / n, alpha (scikit-learn's ``KernelRidge`` alpha)
    selected with the bandwidth (``kernels.selection``), s = loss''(0) for an estimator with a
    loss (``losses.Loss.reg_scale``), else 1; "x/n": nu = x / n. Fitted: ``reg_``."""

DOCS = {
    "kernel": """\
kernel : {"gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52"}, default="gaussian"
    The shift-invariant kernel k(x, x') of bandwidth sigma (``kernels.shift_invariant``).""",
    "bandwidth": """\
bandwidth : "auto", "median", "median*<f>" or float > 0, default="auto"
    sigma. "auto": held-out selection (``kernels.selection``) over sigma = median x {1, 2^-1/2,
    1/2, 2^-3/2} by exact kernel ridge on a seeded 1,000-row slice; "median": the median
    pairwise distance of a sample, "median*<f>" f times it. Fitted: ``bandwidth_``.""",
    "reg": 'reg : "auto", float >= 0 or "x/n", default="auto"' + _REG_MEANING,
    "reg_positive": 'reg : "auto", float > 0 or "x/n", default="auto"' + _REG_MEANING,
    "n_iter": """\
n_iter : "auto", int >= 1 or "K epochs", default="auto"
    Mini-batch steps per ``fit`` call; "K epochs": ceil(K ceil(n / m)) steps for batches of m.""",
    "random_state": """\
random_state : int, RandomState or None, default=None
    Seed of the fit's random draws and of the "auto" / "median" selection's subsample.""",
    "warm_start": """\
warm_start : bool, default=False
    Each ``fit`` continues the fitted model for another ``n_iter`` steps on the same seeded
    batch sequence: a run cut into segments gives the model of one long fit.""",
    "engine": """\
engine : dict, kernelscale.engine.Engine or None, default=None
    Where and how the work runs, never what is solved (``kernelscale.engine``): ``device``
    ("auto", "cpu" or "gpu"), ``dtype`` and, for on-disk X, ``window_rows`` / ``memory_budget``;
    None: the ``engine_context`` / ``set_engine`` options. Fitted: ``engine_``.""",
    "verbose": """\
verbose : int, default=0
    0: silent. 1: a progress line on stderr every ~10 % of a fit's steps (a tqdm bar on a
    terminal). Does not change the fitted model.""",
    "iterative_common": """\
%(kernel)s
%(bandwidth)s
%(warm_start)s
%(random_state)s
%(engine)s""",
    "kernel_": """\
kernel_, bandwidth_ : kernels.shift_invariant.Kernel, float
    The kernel used and its sigma.""",
    "n_iter_": """\
n_iter_, history_ : int, dict
    Steps so far (over all ``fit`` calls) and their records (``solvers._common.run_loop``):
    iter, time, objective (on the batch), ...""",
    "n_features_in_": """\
n_features_in_ : int
    Number of features seen in ``fit``.""",
    "sections": """\
Parameters
----------
%(parameters)s

Attributes
----------
%(attributes)s""",
    "regressor_doc": """\
%(sections)s
y_offset_ : ndarray of shape (n_outputs,)
    The training mean of y, added to f in every prediction (``estimators._targets``).

%(regression_example)s""",
    "classifier_doc": """\
%(sections)s
classes_ : ndarray of shape (n_classes,)
    The class labels, sorted.

Examples
--------
>>> from sklearn.datasets import make_classification
>>> from kernelscale import %(name)s
>>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
>>> clf = %(name)s(%(example)s).fit(X, y)
>>> bool(clf.score(X, y) > 0.7)
True""",
    "regression_example": """\
Examples
--------
>>> from sklearn.datasets import make_regression
>>> from kernelscale import %(name)s
>>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
>>> model = %(name)s(%(example)s).fit(X, y / y.std())
>>> model.predict(X[:3]).shape
(3,)""",
    "sparse_X": """\
scipy.sparse X (CSR; other formats converted once) and a CSR matrix on disk
(``kernelscale.io.CSRStore``) are never densified whole. DSG, RFF-SGD and EigenPro-RF compute
them on the engine's device (a ``cupyx.scipy.sparse`` X is copied to the host once), the others
on the CPU (engine device "gpu": a one-line ``DeviceError``).""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data.
    %(sparse_X)s""",
    "y_fit": """\
y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    Targets; a classifier's: class labels, one column.""",
    "fit": """\
Parameters
----------
%(X_fit)s
%(y_fit)s

Returns
-------
self
    The fitted estimator.""",
    "predict_X": """\
Parameters
----------
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Samples; scipy.sparse where the estimator takes sparse training data.""",
    "predict_n": """\
%(predict_X)s

Returns
-------
ndarray of shape (n_samples,)""",
    "predict_labels": """\
%(predict_X)s

Returns
-------
ndarray of shape (n_samples,)
    Labels from ``classes_``.""",
}

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _fill(text: str, docs: dict) -> str:
    """``text`` with every ``%(name)s`` replaced by piece ``docs[name]`` (filled in turn)."""
    def piece(match):
        line = text[text.rfind("\n", 0, match.start()) + 1:]
        indent = line[:len(line) - len(line.lstrip())]
        first, *rest = _fill(docs[match[1]], docs).split("\n")
        return "\n".join([first] + [indent + r if r.strip() else "" for r in rest])

    return _PLACEHOLDER.sub(piece, text)


def fill_doc(obj=None, /, **pieces):
    """Class or function decorator: fills the placeholders of its docstring (of a class: also of
    the methods it defines) from ``pieces`` over ``DOCS`` and ``name``, the target's name."""

    def decorate(target):
        docs = {**DOCS, "name": target.__name__, **pieces}
        members = vars(target).values() if inspect.isclass(target) else ()
        for item in (target, *members):
            item = getattr(item, "fn", item)  # scikit-learn's available_if keeps the method as fn
            doc = getattr(item, "__doc__", None)
            if (item is target or inspect.isfunction(item)) and doc and "%(" in doc:
                item.__doc__ = _fill(doc, docs)
        return target

    return decorate if obj is None else decorate(obj)
