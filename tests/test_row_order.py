"""Issue 25.1: the storage order of the rows does not change the model.

Windows of ``stream.BatchStream`` are pieces from all over the array (stratified), not runs of
consecutive rows; the estimators that learn from mini-batches then give the same quality on
label-sorted and shuffled copies of the same rows, in memory and on disk."""

from __future__ import annotations

import numpy as np
import pytest

from kernelscale.rng import keyed_permutation
from kernelscale.stream import PIECES_PER_WINDOW, BatchStream

zarr = pytest.importorskip("zarr")


def _zarr(path, X, chunk_rows):
    Z = zarr.open_array(path, mode="w", shape=X.shape, chunks=(chunk_rows,) + X.shape[1:],
                        dtype=X.dtype)
    Z[:] = X
    return Z


# -- the pointwise permutation --------------------------------------------------------------------
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 17, 64, 65, 1000, 4097])
def test_keyed_permutation_is_a_bijection_with_its_inverse(m):
    rng = np.random.default_rng(m)
    keys = np.tile(rng.integers(0, 2**63, size=6, dtype=np.uint64), (m, 1))
    y = keyed_permutation(np.arange(m), m, keys)
    assert np.array_equal(np.sort(y), np.arange(m))
    assert np.array_equal(keyed_permutation(y, m, keys, inverse=True), np.arange(m))
    if m >= 64:  # a permutation, not the identity or a shift
        assert np.mean(y == np.arange(m)) < 0.1 and len(np.unique(np.diff(y.astype(int)))) > m // 4


def test_keyed_permutation_elements_may_use_their_own_domain_and_keys():
    rng = np.random.default_rng(0)
    sizes = np.array([4, 5] * 3)  # Feistel widths 4 and 16: an element must use its own
    keys = np.repeat(rng.integers(0, 2**63, size=(2, 6), dtype=np.uint64), 3, axis=0)
    keys = keys[[0, 3, 1, 4, 2, 5]]  # rows alternate: (size 4, keys a), (size 5, keys b)
    for s, k in ((4, keys[0]), (5, keys[1])):
        whole = keyed_permutation(np.arange(s), s, np.tile(k, (s, 1)))
        assert np.array_equal(np.sort(whole), np.arange(s))
    x = np.array([0, 0, 1, 1, 3, 4])
    mixed = keyed_permutation(x, sizes, keys)
    assert np.all(mixed < sizes)
    # an element's value does not depend on the others evaluated with it
    alone = [keyed_permutation(x[i:i + 1], sizes[i], keys[i:i + 1])[0] for i in range(len(x))]
    assert np.array_equal(mixed, alone)
    assert np.array_equal(keyed_permutation(mixed, sizes, keys, inverse=True), x)
    with pytest.raises(ValueError, match="below m"):
        keyed_permutation([5], 5, keys[:1])


# -- the stream's windows ---------------------------------------------------------------------------
LAYOUTS = [  # (n, window_rows, batch_size, chunk_rows)
    (1400, 256, 256, 200), (1000, 100, 7, 64), (2000, 400, 100, 400), (10007, 999, 10, 500), (97, 40, 5, 3),
    (12345, 1000, 100, 10000), (300, 64, 64, 300), (500, None, 64, 100)]


@pytest.mark.parametrize("n, window, batch, chunk", LAYOUTS)
def test_every_epoch_serves_every_row_once_and_disk_equals_memory(tmp_path, n, window, batch, chunk):
    X = np.repeat(np.arange(n, dtype=np.float64)[:, None], 2, axis=1)
    Z = _zarr(tmp_path / "x.zarr", X, chunk)
    mem = BatchStream(X, np.arange(n), batch_size=batch, seed=3, window_rows=window)
    disk = BatchStream(Z, np.arange(n), batch_size=batch, seed=3, window_rows=mem.window_rows)
    per = mem.batches_per_epoch
    assert per == disk.batches_per_epoch
    if mem.n_windows == 1:
        assert per == -(-n // batch)
    for epoch in range(2):
        served = []
        for t in range(epoch * per, (epoch + 1) * per):
            (Xm, ym), (Xd, yd) = mem.batch(t), disk.batch(t)
            assert np.array_equal(Xm, Xd) and np.array_equal(ym, yd)  # chunking plays no part
            assert np.array_equal(Xm[:, 0], ym) and 0 < len(ym) <= batch
            served.append(ym)
        assert np.array_equal(np.sort(np.concatenate(served)), np.arange(n))
    # batch t is a function of t alone: a fresh stream (a warm-started segment) starts anywhere
    late = BatchStream(Z, np.arange(n), batch_size=batch, seed=3, window_rows=mem.window_rows)
    t = per + per // 2
    assert np.array_equal(late.batch(t)[1], mem.batch(t)[1])
    assert not np.array_equal(mem.batch(t)[1], mem.batch(t + per)[1])  # a new order each epoch
    for s in (mem, disk, late):
        s.close()


def test_in_memory_default_is_one_permutation_of_all_rows():
    """n not a multiple of the batch: still one window (before, the last n % B stored rows
    formed a window, hence a batch, of their own every epoch)."""
    n, B = 1000, 64
    s = BatchStream(np.zeros((n, 1)), np.arange(n), batch_size=B, seed=0)
    assert s.window_rows == n and s.n_windows == 1 and s.batches_per_epoch == 16
    assert sum(np.any(s.batch(t)[1] >= 960) for t in range(16)) > 1


def test_windows_of_label_sorted_rows_hold_every_class_in_proportion(tmp_path):
    """Sorted by label, a window of consecutive rows held one or two classes; a window of
    stratified pieces holds each class to within two pieces of its share."""
    n, classes, W = 6000, 10, 600
    y = np.repeat(np.arange(classes), n // classes)  # sorted
    Z = _zarr(tmp_path / "y.zarr", y[:, None].astype(np.float32), 500)
    s = BatchStream(Z, y, batch_size=100, seed=1, window_rows=W)
    assert s.piece_rows == W // PIECES_PER_WINDOW and s.strata >= PIECES_PER_WINDOW
    share = W // classes
    for t in range(0, 2 * s.batches_per_epoch, W // 100):  # one batch per window, 2 epochs
        window = s._window(*s._locate(t)[:2])[1]
        counts = np.bincount(window, minlength=classes)
        assert np.all(np.abs(counts - share) <= 2 * s.piece_rows), counts
    s.close()


# -- the models -----------------------------------------------------------------------------------
def _digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=397, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), ytr, scaler.transform(Xte), yte


def _four_copies(tmp_path):
    """Digits' training rows shuffled and sorted by label, each in memory and in zarr with
    200-row chunks (the issue's case), and the test rows."""
    Xtr, ytr, Xte, yte = _digits()
    copies = {}
    for name, order in (("shuffled", np.random.default_rng(0).permutation(len(ytr))),
                        ("sorted", np.argsort(ytr, kind="stable"))):
        X, y = Xtr[order], ytr[order]
        copies[f"{name} memory"] = (X, y)
        copies[f"{name} zarr"] = (_zarr(tmp_path / f"{name}.zarr", X, 200), y)
    return copies, Xte, yte


# bandwidth and reg fixed: the automatic selection draws its rows uniformly (order-free by
# construction) and costs more than the fits; smaller models than the defaults, same streams
BW, REG = 10.0, 1e-5


@pytest.mark.slow  # ~50 s of CPU
def test_sorted_and_shuffled_rows_give_the_same_quality(tmp_path):
    """Test error (%) of the four copies, seed 0. Before: DSG 2.8 / 2.8 / 3.3 / 8.1 (shuffled
    memory, zarr, sorted memory, zarr), RFF-SGD 5.8 / 5.5 / 6.0 / 10.1, NORMA (3 seeds) 71 %
    on sorted zarr against 19 % shuffled in memory. Seed-to-seed, the spread of the four is up to
    1.8 points for DSG and 2.0 for RFF-SGD (seeds 0-5; 397 test rows, 0.25 point each), and NORMA
    at its defaults is a poor, noisy model here (10-30 % from one seed to the next)."""
    from kernelscale import DSGClassifier, NORMAClassifier, RFFSGDClassifier

    copies, Xte, yte = _four_copies(tmp_path)

    def errors(make, seeds=(0,)):
        return {name: np.mean([100 * np.mean(make(s).fit(X, y).predict(Xte) != yte)
                               for s in seeds]) for name, (X, y) in copies.items()}

    for name, make in (
            ("DSG", lambda s: DSGClassifier(block_size=64, n_iter=60, bandwidth=BW, reg=REG,
                                            random_state=s)),
            ("RFF-SGD", lambda s: RFFSGDClassifier(n_components=300, n_iter="10 epochs",
                                                   bandwidth=BW, reg=REG, random_state=s))):
        err = errors(make)
        assert max(err.values()) - min(err.values()) <= 2.5, (name, err)
        assert err["shuffled memory"] < 8, (name, err)  # a model, not chance (90 %)
    err = errors(lambda s: NORMAClassifier(bandwidth=BW, reg=REG, random_state=s), seeds=(0, 1, 2))
    assert err["sorted zarr"] <= err["shuffled memory"] + 15, err
