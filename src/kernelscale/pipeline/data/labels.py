"""Checks on the rows of a block: finite features, labels that fit the task."""

from __future__ import annotations

import numpy as np

from .errors import DataError
from .readers import Block

MAX_CLASSES = 1000


def check_finite(block: Block) -> None:
    """Raise naming the first row and feature that is NaN or infinite."""
    if hasattr(block.X, "tocsr"):  # scipy.sparse: only the stored values can be
        X = block.X.tocsr()
        bad = np.flatnonzero(~np.isfinite(X.data))
        if bad.size:
            row = int(np.searchsorted(X.indptr, bad[0], side="right")) - 1
            raise block.fail(row, f"feature {int(X.indices[bad[0]]) + 1} is {X.data[bad[0]]} "
                             "(NaN/inf not allowed)")
        return
    finite = np.isfinite(block.X)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise block.fail(row, f"feature {col + 1} is {block.X[row, col]} (NaN/inf not allowed)")


class LabelCheck:
    """Collects the class values of a classification task; a non-integer label or more than
    ``MAX_CLASSES`` distinct values is an error (regression data with the wrong task?)."""

    def __init__(self, task: str):
        self.task, self.classification = task, task != "regression"
        self.values: set[float] = set()
        self.origins: list[str] = []

    def update(self, block: Block) -> None:
        y = block.y
        if block.origin not in self.origins:
            self.origins.append(block.origin)
        finite = np.isfinite(y)
        if not finite.all():
            row = int(np.argmin(finite))
            raise block.fail(row, f"label is {y[row]} (NaN/inf not allowed)")
        if not self.classification:
            return
        fractional = y != np.round(y)
        if fractional.any():
            row = int(np.argmax(fractional))
            raise block.fail(row, f"label {y[row]:g} is not an integer class label but the task "
                             f"is {self.task} (regression data? set task: regression)")
        self.values.update(np.unique(y).tolist())
        if len(self.values) > MAX_CLASSES:
            raise DataError(f"{block.origin}: rows 1-{block.first_row + len(block)}: more than "
                            f"{MAX_CLASSES} distinct labels, too many for a {self.task} task "
                            "(regression data? set task: regression)")

    def classes(self) -> np.ndarray | None:
        """Sorted class values (None for regression); checks the count fits the task."""
        if not self.classification:
            return None
        classes = np.array(sorted(self.values))
        where = " + ".join(self.origins) or "data"
        shown = ", ".join(f"{v:g}" for v in classes[:10]) + (" ..." if len(classes) > 10 else "")
        if self.task == "binary" and len(classes) != 2:
            raise DataError(f"{where}: task binary needs exactly 2 classes, found "
                            f"{len(classes)} ({shown})")
        if len(classes) < 2:
            raise DataError(f"{where}: task {self.task} needs at least 2 classes, found "
                            f"{len(classes)} ({shown})")
        return classes
