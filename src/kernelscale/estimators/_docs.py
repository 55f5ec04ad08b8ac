"""Docstring pieces shared by the estimators, each written once, and ``fill_doc``, which puts them
in.

A docstring names a piece ``%(name)s``; ``fill_doc`` replaces it by the piece, whose second and
later lines take the indentation of the placeholder's line, so a piece written unindented here fits
a class (4 spaces) or a method (8). A piece may name other pieces. A module passes its family's
own pieces to ``fill_doc``; they take precedence over ``DOCS``, also inside a shared piece (a
family's ``X_fit`` is the X of the shared ``fit_*`` sections). Only ``%(name)s`` is replaced:
numpydoc's braces and a lone ``%`` need no escaping (``str.format`` and ``%`` would need it).
"""

from __future__ import annotations

import inspect
import re

_REG_MEANING = """
    nu, the weight of the penalty in the averaged objective (nu/2)||f||^2 + (1/n) sum_i
    loss(f(x_i), y_i), the same problem in every kernelscale estimator. "auto": nu = alpha / n,
    with alpha (scikit-learn's ``KernelRidge`` alpha) chosen with the bandwidth by the held-out
    selection (``kernels.selection``); "x/n": nu = x / n, x in that summed-loss scale. Fitted:
    ``reg_``."""

DOCS = {
    # -- parameters ---------------------------------------------------------------------------
    "kernel": """\
kernel : {"gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52"}, default="gaussian"
    The shift-invariant kernel k(x, x') of bandwidth sigma (``kernels.shift_invariant``).""",
    "bandwidth": """\
bandwidth : "auto", "median", "median*<f>" or float > 0, default="auto"
    sigma. "auto": held-out selection (``kernels.selection``): exact kernel ridge on a seeded
    1,000-row slice, scored on another, over sigma = median x {1, 2^-1/2, 1/2, 2^-3/2}; "median":
    the median pairwise distance of a sample (the median trick), "median*<f>" f times it; a
    number: sigma itself. Fitted: ``bandwidth_``.""",
    "reg": 'reg : "auto", float >= 0 or "x/n", default="auto"' + _REG_MEANING,
    "reg_positive": 'reg : "auto", float > 0 or "x/n", default="auto"' + _REG_MEANING,
    "n_iter": """\
n_iter : "auto", int >= 1 or "K epochs", default="auto"
    Mini-batch steps per ``fit`` call; "K epochs": K passes over the data, ceil(K ceil(n / m))
    steps for batches of m rows.""",
    "random_state": """\
random_state : int, RandomState or None, default=None
    Seed of the fit's random draws and of the "auto" / "median" selection's subsample; None
    draws a fresh seed.""",
    "warm_start": """\
warm_start : bool, default=False
    Each ``fit`` continues the fitted model for another ``n_iter`` steps on the same seeded
    batch sequence, so that a run cut into segments gives the model of one long fit.""",
    "engine": """\
engine : dict, kernelscale.engine.Engine or None, default=None
    Where and how the work runs, never what is solved (``kernelscale.engine``): ``device``
    ("auto", "cpu" or "gpu") and ``dtype``; None: the ``engine_context`` / ``set_engine``
    options. Fitted: ``engine_``.""",
    "verbose": """\
verbose : int, default=0
    0: silent. 1: a progress line on stderr every ~10 % of a fit's steps and at the end (step,
    elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not change the
    fitted model.""",
    # the common tail of the mini-batch estimators' signatures (NORMA, Pegasos, RFF)
    "iterative_common": """\
%(kernel)s
%(bandwidth)s
%(warm_start)s
%(random_state)s
%(engine)s""",
    # -- attributes ---------------------------------------------------------------------------
    "classes_": """\
classes_ : ndarray of shape (n_classes,)
    The class labels, sorted.""",
    "y_offset_": """\
y_offset_ : ndarray of shape (n_outputs,)
    The training mean of y: f is fitted to y - ``y_offset_`` and every prediction adds it back
    (``estimators._targets``).""",
    "kernel_": """\
kernel_ : kernels.shift_invariant.Kernel
    The kernel used.
bandwidth_ : float
    Its sigma.""",
    "n_features_in_": """\
n_features_in_ : int
    Number of features seen in ``fit``.""",
    # -- class sections: a family's own ``parameters`` and ``attributes`` pieces -------------
    "sections": """\
Parameters
----------
%(parameters)s

Attributes
----------
%(attributes)s""",
    "regressor_doc": """\
%(sections)s
%(y_offset_)s

%(regression_example)s""",
    "classifier_doc": """\
%(sections)s
%(classes_)s

%(classification_example)s""",
    "regression_example": """\
Examples
--------
>>> from sklearn.datasets import make_regression""",
    "classification_example": """\
Examples
--------
>>> from sklearn.datasets import make_classification""",
    # -- method sections ----------------------------------------------------------------------
    "sparse_X": """\
scipy.sparse X (CSR as given, any other format converted to CSR once) is never densified
whole and is computed on the CPU: engine device "auto" is then the CPU, "gpu" a one-line
``DeviceError``. So is a CSR matrix on disk (``kernelscale.io.CSRStore``), whose rows are read
as CSR (streamed in row windows, or loaded whole where the method holds all rows).""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data.
    %(sparse_X)s""",
    "fit_regression": """\
Parameters
----------
%(X_fit)s
y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    Targets.

Returns
-------
self
    The fitted estimator.""",
    "fit_either": """\
Parameters
----------
%(X_fit)s
y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    Targets (classifier: class labels, one column).

Returns
-------
self
    The fitted estimator.""",
    "fit_classification": """\
Parameters
----------
%(X_fit)s
y : array-like of shape (n_samples,)
    Class labels.

Returns
-------
self
    The fitted estimator.""",
    "predict_X": """\
Parameters
----------
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Samples; scipy.sparse where the estimator takes sparse training data (on the CPU).""",
    "predict_labels": """\
%(predict_X)s

Returns
-------
ndarray of shape (n_samples,)
    Labels from ``classes_``.""",
}

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
_MAX_DEPTH = 8


def _fill(text: str, docs: dict, depth: int = 0) -> str:
    """``text`` with every ``%(name)s`` replaced by piece ``docs[name]`` (filled in turn)."""
    if depth > _MAX_DEPTH:
        raise ValueError("docstring pieces name each other in a cycle")
    lines = []
    for line in text.split("\n"):
        indent = line[:len(line) - len(line.lstrip())]

        def piece(match, indent=indent):
            name = match.group(1)
            if name not in docs:
                raise KeyError(f"no docstring piece {name!r} (kernelscale.estimators._docs)")
            first, *rest = _fill(docs[name], docs, depth + 1).split("\n")
            return "\n".join([first] + [indent + r if r.strip() else "" for r in rest])

        lines.append(_PLACEHOLDER.sub(piece, line))
    return "\n".join(lines)


def fill_doc(obj=None, /, **pieces):
    """Class or function decorator: fills the ``%(name)s`` placeholders of its docstring (of a
    class: also of the methods it defines) from ``pieces`` over ``DOCS``. ``@fill_doc`` uses the
    shared pieces alone, ``@fill_doc(name=text, ...)`` adds a family's own."""
    docs = {**DOCS, **pieces}

    def decorate(target):
        members = vars(target).values() if inspect.isclass(target) else ()
        for item in (target, *members):
            item = getattr(item, "fn", item)  # scikit-learn's available_if keeps the method as fn
            doc = getattr(item, "__doc__", None)
            if (item is target or inspect.isfunction(item)) and doc and "%(" in doc:
                item.__doc__ = _fill(doc, docs)
        return target

    return decorate if obj is None else decorate(obj)
