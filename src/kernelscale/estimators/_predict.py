"""The prediction surface every estimator shares: labels from decision scores (classifiers) and
targets from raw outputs (regressors), over an estimator's ``decision_function`` / ``_decision``.
"""

from __future__ import annotations

import numpy as np


class LabelsFromScores:
    """Mixin: ``predict`` by the sign of ``decision_function`` (one column) or its argmax."""

    def predict(self, X):
        """Predicted class labels: the sign of the score (binary) or its argmax.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        f = self.decision_function(X)
        idx = (f > 0).astype(np.int64) if f.ndim == 1 else f.argmax(axis=1)
        return self.classes_[idx]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class TargetsFromOutputs:
    """Mixin: ``predict`` is ``_decision`` (n, C), 1-D where the training targets were."""

    def predict(self, X):
        """Predicted targets f(x).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
            1-D when the training targets were 1-D.
        """
        F = self._decision(X)
        return F[:, 0] if self._y_1d else F

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
