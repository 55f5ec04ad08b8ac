"""Targets in and out, the same for every estimator: ``RegressorTargets`` / ``ClassifierTargets``
turn y into the (n, C) float targets a solver fits, ``TargetsFromOutputs`` / ``LabelsFromScores``
give predictions back in y's form. Regression targets are centred on ``y_offset_``, the first
fit's column means; class codes are not (``docs/design.md``)."""

from __future__ import annotations

import numpy as np

from ..validation import LabelCoder, check_X_y
from ._docs import fill_doc


@fill_doc
class LabelsFromScores:
    """Mixin: ``predict`` by the sign of ``decision_function`` (one column) or its argmax."""

    def predict(self, X):
        """Predicted class labels.

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
    """Mixin: ``predict`` is ``_decision`` (n, C) + ``y_offset_``."""

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
    """Mixin: y -> (n, C) centred float targets."""

    def _fit_targets(self, X, y):
        X, y = check_X_y(self, X, y, regression=True)
        return X, self._targets(y, self._fresh())

    def _targets(self, y, fresh: bool) -> np.ndarray:
        """y as (n, C) float64 minus ``y_offset_`` (set, with ``_y_1d``, by a fresh fit)."""
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
            self._coder = LabelCoder(y, "softmax" if self._coding == "onehot" else "hinge")
            self.classes_ = self._coder.classes_
        idx = self._coder.index_of(y)
        return X, self._coder.encode_index(idx, np, np.float64)

    def decision_function(self, X):
        """Decision scores; positive favours ``classes_[1]`` (binary).

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for two classes (one-hot: class 1's score minus class 0's), else one per class.
        """
        F = self._decision(X)
        if F.shape[1] == 1:
            return F[:, 0]
        if len(self.classes_) == 2:  # one-hot binary: score of class 1 over class 0
            return F[:, 1] - F[:, 0]
        return F
