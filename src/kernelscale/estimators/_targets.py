"""Targets in and out, the same for every estimator: ``RegressorTargets`` / ``ClassifierTargets``
turn y into the (n, C) float targets a solver fits (``_fit_targets``) and give predictions back
in y's form, labels from decision scores (``LabelsFromScores``) and targets from raw outputs
(``TargetsFromOutputs``), over an estimator's ``decision_function`` / ``_decision``.

Offset: regression targets are centred, by every regressor, in one place
(``RegressorTargets._targets``). A fresh fit stores the training column means of y as
``y_offset_`` (shape (n_outputs,)); every fit (a warm start or ``partial_fit`` included, with
the first fit's ``y_offset_``) hands its solver, and its "auto" bandwidth / reg selection,
y - ``y_offset_``; ``predict`` is ``_decision`` + ``y_offset_``. The model is a constant plus a
regularised f fitted to the residual, as scikit-learn's linear models fit an intercept (the
constant is the training mean, not optimised jointly with f): the penalty on ||f|| pulls
predictions towards the mean rather than towards 0, so where y's mean sits does not change the
fit. (LIBSVM's ``ExactSVMRegressor`` fits its own unpenalised intercept b, and its dual does not
depend on a shift of y.)

Class codes ({-1, +1}, one-vs-all or one-hot) are not centred, whatever the loss (reasons:
``docs/design.md``).
"""

from __future__ import annotations

import numpy as np

from ..validation import LabelCoder, check_X_y
from ._docs import fill_doc


@fill_doc
class LabelsFromScores:
    """Mixin: ``predict`` by the sign of ``decision_function`` (one column) or its argmax."""

    def predict(self, X):
        """Predicted class labels: the sign of the score (binary) or its argmax.

        %(predict_labels)s
        """
        f = self.decision_function(X)
        idx = (f > 0).astype(np.int64) if f.ndim == 1 else f.argmax(axis=1)
        return self.classes_[idx]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


@fill_doc
class TargetsFromOutputs:
    """Mixin: ``predict`` is ``_decision`` (n, C) + ``y_offset_``, 1-D where the training targets
    were."""

    def predict(self, X):
        """Predicted targets f(x).

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
            1-D when the training targets were 1-D.
        """
        F = self._decision(X) + self.y_offset_
        return F[:, 0] if self._y_1d else F

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RegressorTargets(TargetsFromOutputs):
    """Mixin: y -> (n, C) centred float targets; predict returns 1-D for 1-D training targets."""

    def _fit_targets(self, X, y):
        X, y = check_X_y(self, X, y, regression=True)
        return X, self._targets(y, self._fresh())

    def _targets(self, y, fresh: bool) -> np.ndarray:
        """y as (n, C) float64 minus ``y_offset_``, which a fresh fit sets to the column means
        (and ``_y_1d``); a warm start keeps the first fit's (module docstring)."""
        y = np.asarray(y, dtype=np.float64)
        Y = y.reshape(len(y), -1)
        if fresh:
            self._y_1d = y.ndim == 1
            self.y_offset_ = Y.mean(axis=0)
        return Y - self.y_offset_


@fill_doc
class ClassifierTargets(LabelsFromScores):
    """Mixin: class labels -> encoded targets; ``_coding`` is "margin" ({-1, +1}; one column for
    two classes, one-vs-all columns otherwise) or "onehot" (one column per class, 0/1)."""

    _coding = "margin"

    def _fit_targets(self, X, y):
        X, y = check_X_y(self, X, y, regression=False)
        if self._fresh():
            coder = LabelCoder(y, "softmax" if self._coding == "onehot" else "hinge")
            self._coder = coder
            self.classes_ = coder.classes_
        idx = self._coder.index_of(y)
        return X, self._coder.encode_index(idx, np, np.float64)

    def decision_function(self, X):
        """Decision scores; positive favours ``classes_[1]`` (binary).

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for two classes (one-hot coding: class 1's score minus class 0's);
            one-vs-all scores, one per class, otherwise.
        """
        F = self._decision(X)
        if F.shape[1] == 1:
            return F[:, 0]
        if len(self.classes_) == 2:  # one-hot binary: score of class 1 over class 0
            return F[:, 1] - F[:, 0]
        return F
