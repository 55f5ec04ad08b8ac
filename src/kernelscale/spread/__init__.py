"""Spreading work over dask: clients (``cluster``), and fits whose rows stay on the workers, one
part per worker (``workers``: the protocol; ``dsg``, ``rff``, ``rb``: the solvers' parts).

``rows_for(X, make)`` is the rule an estimator follows: a fit spreads over the ``use_client``
client when there is one and X is not held in memory; ``cluster_rows()`` is the ``rows`` that
``solvers.nystrom`` and ``kernels.random_binning`` take for their row-block work.
"""

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
