"""The one exception type of the data layer.

Every problem with a dataset (bad config, checksum mismatch, NaN in a file, wrong labels) is
raised as :class:`DataError` whose message is a single line that says *what* and *where*
(a config key path such as ``datasets.covtype.sha256`` or a file and row), so that a failed
Snakemake job shows the cause in its last log line.
"""

from __future__ import annotations


class DataError(ValueError):
    """A one-line, user-facing error about a dataset, its config entry or its files."""

    def __init__(self, message: str):
        # Collapse any newline a wrapped library message may carry: one error, one line.
        super().__init__(" ".join(str(message).split()))
