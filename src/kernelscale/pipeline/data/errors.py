"""The one exception type of the data layer."""

from __future__ import annotations


class DataError(ValueError):
    """A user-facing error about a dataset, its config entry or its files: one line (newlines
    collapsed) saying what and where (a key path such as ``datasets.a9a.sha256``, a file, a row)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
