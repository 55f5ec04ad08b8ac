"""Solvers: each consumes a stream of mini-batches or row chunks; estimators wrap them."""
