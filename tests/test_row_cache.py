"""The DSG family's per-row f cache (``solvers.row_cache``): the same f as evaluating every block,
a step cost that stops growing after the first epoch, and no stale value on other data."""

import pickle

import numpy as np
import pytest

from kernelscale.estimators.dsg import DSGClassifier, DSGRegressor
from kernelscale.kernels.fourier import FourierBlocks
from kernelscale.solvers import row_cache
from kernelscale.solvers.dsg import DSGSolver

F64 = {"dtype": "float64"}
SIZES = dict(batch_size=100, block_size=32, bandwidth=2.0, random_state=0, engine=F64)


def _data(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X @ rng.standard_normal(d)) + 0.1 * rng.standard_normal(n)


@pytest.fixture
def no_cache(monkeypatch):
    def fit(est, *args):
        monkeypatch.setattr(DSGSolver, "use_row_cache", False)
        try:
            return est.fit(*args)
        finally:
            monkeypatch.setattr(DSGSolver, "use_row_cache", True)
    return fit


@pytest.mark.parametrize("variant,piece", [("dsg", None), ("udsg", None), ("cdsg", None),
                                           ("udsg", 7), ("dsg", 1)])
def test_cached_f_is_f_over_all_blocks_at_every_step(variant, piece, monkeypatch):
    """Every batch's f from the cache equals f evaluated over all blocks, step after step, over
    five epochs (rows caught up on new blocks and, for UDSG / CDSG, on updated old ones); also
    with the catch-up's features computed in pieces of ``piece`` rows, as on a GPU. The
    per-visit row counts (the change log's trimming) match a scan of every row's visit."""
    X, y = _data()
    checked = []
    if piece is not None:
        monkeypatch.setattr(row_cache, "piece_rows", lambda xp, F, itemsize: piece)
    original = row_cache.RowCache.values

    def values(self, model, Xb, ids):
        out = original(self, model, Xb, ids)
        full = model.decision(Xb, coefficient_units=True)
        assert np.allclose(out, full, rtol=1e-10, atol=1e-12 * float(np.abs(full).max() + 1))
        checked.append(int(np.sum(self.seen[ids] > 0)))
        # the visit counts that find the oldest visit are those of a scan over every row
        at, counts = np.unique(self.seen[self.seen >= 0], return_counts=True)
        assert self.visits == dict(zip(at.tolist(), counts.tolist(), strict=True))
        return out

    monkeypatch.setattr(row_cache.RowCache, "values", values)
    est = DSGRegressor(solver=variant, n_iter=30, **SIZES).fit(X, y)
    assert len(checked) == 30 and sum(checked[6:]) > 0  # epochs 2-5 came from the cache
    if variant != "dsg":
        assert est.n_blocks_ < 30  # old blocks were updated: the log held their changes


@pytest.mark.parametrize("variant", ["dsg", "udsg", "cdsg"])
def test_same_model_with_and_without_the_cache(variant, no_cache):
    X, y = _data()
    Xte = _data(200, seed=1)[0]
    cached = DSGRegressor(solver=variant, n_iter=30, **SIZES).fit(X, y)
    full = no_cache(DSGRegressor(solver=variant, n_iter=30, **SIZES), X, y)
    assert cached.n_blocks_ == full.n_blocks_
    assert np.allclose(cached.predict(Xte), full.predict(Xte), rtol=1e-9, atol=1e-12)


def test_step_cost_stops_growing_after_the_first_epoch(monkeypatch):
    """Rows x blocks evaluated per epoch: without the cache epoch e costs about e times the
    first; with it every epoch after the first costs about one epoch of changes per row."""
    X, y = _data()
    work = []
    original = FourierBlocks.features

    def counted(self, Xb, lo, hi=None, scaled=True):
        work[-1] += Xb.shape[0] * ((lo + 1 if hi is None else hi) - lo)
        return original(self, Xb, lo, hi, scaled)

    monkeypatch.setattr(FourierBlocks, "features", counted)
    # the fit's own work only: not the constant-model check that follows each fit
    monkeypatch.setattr("kernelscale.params.warn_if_constant", lambda *a: None)
    per_epoch = {}
    for use in (True, False):
        monkeypatch.setattr(DSGSolver, "use_row_cache", use)
        est = DSGRegressor(n_iter=6, warm_start=True, **SIZES)  # one epoch a fit (600 / 100)
        per_epoch[use] = []
        for _ in range(5):
            work.append(0)
            est.fit(X, y)
            per_epoch[use].append(work.pop())
    cached, full = per_epoch[True], per_epoch[False]
    assert cached[0] == pytest.approx(full[0], rel=0.05)  # first epoch: every block
    assert full[4] > 4 * full[0]  # epoch 5 of the full evaluation: ~ 5 x the first
    assert cached[4] < 2.5 * cached[0]  # with the cache it stays near one epoch of changes
    assert cached[4] < 0.5 * full[4]


def test_warm_start_on_other_rows_does_not_use_their_cached_f(no_cache):
    """A warm-started fit on other data of the same shape: the fingerprints differ, every row is
    evaluated afresh (the same model as without a cache, not one built on stale f)."""
    (X1, y1), (X2, y2) = _data(seed=0), _data(seed=2)
    a = DSGRegressor(n_iter=12, warm_start=True, **SIZES).fit(X1, y1)
    a.fit(X2, y2)
    b = no_cache(DSGRegressor(n_iter=12, warm_start=True, **SIZES), X1, y1)
    no_cache(b, X2, y2)
    assert np.allclose(a.predict(X2), b.predict(X2), rtol=1e-9, atol=1e-12)


def test_renormalised_scale_rescales_the_cache(no_cache, monkeypatch):
    """When the lazy shrink factor underflows the model folds it into its coefficients; the
    cached f and the logged changes are in those units and must follow (here at every step)."""
    from kernelscale.solvers import dsg

    monkeypatch.setattr(dsg, "SCALE_FLOOR", 1.0)
    X, y = _data()
    a = DSGRegressor(n_iter=30, **SIZES).fit(X, y)
    assert a.model_.scale == 1.0 and a.solver_.row_cache is not None
    b = no_cache(DSGRegressor(n_iter=30, **SIZES), X, y)
    assert np.allclose(a.predict(X), b.predict(X), rtol=1e-9, atol=1e-12)


def test_model_file_keeps_no_per_row_data():
    X, y = _data()
    clf = DSGClassifier(n_iter=12, warm_start=True, **SIZES).fit(X, y > 0)
    assert clf.solver_.row_cache is not None
    again = pickle.loads(pickle.dumps(clf))
    assert again.solver_.row_cache is None
    again.fit(X, y > 0)  # continues: rows are evaluated afresh on their first visit
    clf.fit(X, y > 0)
    assert np.allclose(again.decision_function(X), clf.decision_function(X), rtol=1e-9, atol=1e-12)


def test_budget_too_small_for_the_cache_streams_without_it(tmp_path):
    zarr = pytest.importorskip("zarr")
    X, y = _data(50_000)
    Z = zarr.open_array(tmp_path / "X.zarr", mode="w", shape=X.shape, chunks=(5000, 5), dtype="f8")
    Z[:] = X
    params = {k: v for k, v in SIZES.items() if k != "engine"}
    # 50,000 rows x 16 bytes = 0.76 MB: more than a quarter of 2.5 MB, less than one of 16 MB
    small = DSGRegressor(n_iter=10, engine={"memory_budget": 2.5, "dtype": "float64"}, **params)
    big = DSGRegressor(n_iter=10, engine={"memory_budget": 16, "dtype": "float64"}, **params)
    assert small.fit(Z, y).solver_.row_cache is None
    assert big.fit(Z, y).solver_.row_cache is not None
