"""Spreading work over dask: clients and row-block work (``cluster``; ``rows_for``: whether a
fit spreads, ``cluster_rows``: the ``rows`` of row-block work), and fits whose rows stay on the
workers, one part per worker (``workers``: the protocol; ``dsg``, ``rff``, ``rb``: the parts)."""

from .cluster import (
    ClusterRows,
    client_for,
    client_from_setting,
    cluster_rows,
    current_client,
    predict_chunked,
    rows_for,
    slurm_client,
    use_client,
)
from .dsg import SpreadDSG
from .rb import SpreadRB
from .rff import SpreadRFF

__all__ = ["ClusterRows", "SpreadDSG", "SpreadRB", "SpreadRFF", "client_for",
           "client_from_setting", "cluster_rows", "current_client", "predict_chunked",
           "rows_for", "slurm_client", "use_client"]
