"""dask.distributed option: LocalCluster / remote scheduler clients, chunked evaluation, and the
library's chunked work (Nyström, RB features + CG, PCA in prepare, train evaluation) run on a
2-worker LocalCluster through ``use_client`` giving the results of the in-process loops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from distributed import get_task_stream  # noqa: E402

from kernelscale import (  # noqa: E402
    NystromRidgeClassifier,
    NystromRidgeRegressor,
    RFFSGDClassifier,
)
from kernelscale.estimators.dsg import DSGRegressor  # noqa: E402
from kernelscale.estimators.random_binning import RBClassifier, RBRegressor  # noqa: E402
from kernelscale.kernels import make_kernel  # noqa: E402
from kernelscale.spread.cluster import (  # noqa: E402
    ClusterRows,
    client_for,
    current_client,
    predict_chunked,
    use_client,
)


@pytest.fixture(scope="module")
def client():
    c = client_for(None, n_workers=2, processes=False)
    yield c
    c.close()
    c.cluster.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 6))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4
    path = tmp_path_factory.mktemp("dist") / "X.zarr"
    Z = zarr.open_array(path, mode="w", shape=X.shape, chunks=(700, 6), dtype="f8")
    Z[:] = X
    return X, y, Z


def test_local_cluster_has_single_threaded_workers(client):
    workers = client.scheduler_info()["workers"].values()
    assert len(workers) == 2 and all(w["nthreads"] == 1 for w in workers)


def test_predictions_match_threaded_scheduler_and_in_memory(client, data):
    X, y, Z = data
    # float64: chunks of another size than predict's own are equal to float64 rounding only
    # (float32, DSG's "auto" precision, is checked at its tolerance in test_dsg)
    reg = DSGRegressor(n_iter=30, batch_size=100, block_size=32, bandwidth=2.0,
                       random_state=0, engine={"dtype": "float64"}).fit(X, y)
    on_cluster = predict_chunked(reg, Z, client)
    threaded = predict_chunked(reg, Z, None)
    assert np.array_equal(on_cluster, threaded)
    assert np.allclose(threaded, reg.predict(X), rtol=1e-12, atol=1e-12)
    labels = (y > np.median(y)).astype(int)
    clf = RFFSGDClassifier(n_components=50, n_iter=40, bandwidth=2.0, random_state=0).fit(X, labels)
    assert np.array_equal(predict_chunked(clf, Z, client), clf.predict(X))
    proba = predict_chunked(clf, X, client, method="decision_function", chunk_rows=999)
    assert np.array_equal(proba, predict_chunked(clf, X, None, method="decision_function",
                                                 chunk_rows=999))


def test_chunked_kernel_products_match_dense(client, data):
    X, y, Z = data
    centers = X[:50]
    k = make_kernel("gaussian", 2.0)

    def gram(b, lo):  # K_b^T K_b: Nystrom's normal matrix, one block of rows at a time
        K = k(b, centers)
        return K.T @ K

    def rhs(b, yb, lo):
        return k(b, centers).T @ yb

    K = k(X, centers)
    dense_gram, dense_rhs = K.T @ K, K.T @ y
    assert np.allclose(ClusterRows(client).sum(gram, Z), dense_gram, rtol=1e-10)
    on_cluster = ClusterRows(client).sum(rhs, Z, y)
    assert np.array_equal(on_cluster, ClusterRows(None).sum(rhs, Z, y))
    assert np.allclose(on_cluster, dense_rhs, rtol=1e-10)


def test_unreachable_scheduler_is_one_line_error_quickly():
    t = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"cannot reach dask scheduler 'tcp://127.0.0.1:9'") as e:
        client_for("tcp://127.0.0.1:9", timeout=1)
    assert time.perf_counter() - t < 10
    assert "\n" not in str(e.value)
    with pytest.raises(ConnectionError, match="invalid address"):
        client_for("not an address:::", timeout=1)


# ----------------------------------------------------------------------------- the library on a client
def _ran_on_cluster(ts, name: str) -> bool:
    return any(name in str(t["key"]) for t in ts.data)


@pytest.fixture(scope="module")
def bad_zarr(data, tmp_path_factory):
    X, _, _ = data
    Xb = X.copy()
    Xb[3456, 2] = np.nan
    Xb[4321, 0] = np.inf  # a later bad row, in another block: the message must name the first
    path = tmp_path_factory.mktemp("dist_bad") / "X.zarr"
    Z = zarr.open_array(path, mode="w", shape=X.shape, chunks=(700, 6), dtype="f8")
    Z[:] = Xb
    return Z


def test_use_client_nests_and_is_off_inside_tasks(client):
    assert current_client() is None
    with use_client(client):
        assert current_client() is client
        with use_client(None):
            assert current_client() is None
        assert current_client() is client
        # a task asking for the client gets None: it must not wait on its own cluster
        assert client.submit(current_client, pure=False).result() is None
    assert current_client() is None


def test_cluster_rows_report_the_first_bad_block_in_row_order(client):
    def fn(b, lo):
        if lo >= 1000:
            raise ValueError(f"block at {lo}")
        return lo

    X = np.zeros((3000, 2))
    rows = ClusterRows(client)
    assert rows.map(lambda b, lo: lo, X, chunk_rows=700) == [0, 700, 1400, 2100, 2800]
    with pytest.raises(ValueError, match="block at 1400"):
        rows.map(fn, X, chunk_rows=700)


def test_nystrom_on_cluster_equals_local(client, data):
    # float64 normal equations: the same per-block products added in the same (row) order as
    # the local loop, so the fit is bit-identical (array_equal, not allclose)
    X, y, Z = data
    kw = dict(n_components=150, engine={"pass_rows": 1000}, bandwidth=2.0, random_state=0)
    local = NystromRidgeRegressor(**kw).fit(Z, y)
    with use_client(client), get_task_stream(client) as ts:
        remote = NystromRidgeRegressor(**kw).fit(Z, y)
    assert _ran_on_cluster(ts, "_NormalBlock")
    assert np.array_equal(local.predict(X), remote.predict(X))
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    local = NystromRidgeClassifier(**kw).fit(X, labels)
    with use_client(client):
        remote = NystromRidgeClassifier(**kw).fit(X, labels)
    assert np.array_equal(local.decision_function(X), remote.decision_function(X))


def test_nystrom_cg_on_cluster_equals_local(client, data):
    # each CG pass is one round of per-block products K_b^T (K_b V) summed in row order
    X, y, Z = data
    kw = dict(n_components=150, engine={"pass_rows": 1000}, bandwidth=2.0, random_state=0,
              solver="cg", n_iter=8)
    local = NystromRidgeRegressor(**kw).fit(Z, y)
    with use_client(client), get_task_stream(client) as ts:
        remote = NystromRidgeRegressor(**kw).fit(Z, y)
    assert _ran_on_cluster(ts, "_KernelProducts")
    assert local.n_iter_ == remote.n_iter_ == 8
    assert np.array_equal(local.predict(X), remote.predict(X))


def test_evaluation_of_a_csr_store_under_a_client_runs_here(client, tmp_path):
    # dask arrays cannot hold CSR blocks of a store: its predictions are made in this process,
    # as its fit is (spread.rows_for), with the same metrics as without a client
    import scipy.sparse

    from kernelscale.io import write_csr
    from kernelscale.pipeline.evaluate import evaluate

    X = scipy.sparse.random(1500, 40, density=0.1, random_state=0, format="csr")
    y = (X.sum(axis=1).A1 > np.median(X.sum(axis=1).A1)).astype(int)
    store = write_csr(zarr.open_group(str(tmp_path / "x.zarr"), mode="w"), "X", [X], 40,
                      chunk_rows=400)
    model = NystromRidgeClassifier(n_components=100, random_state=0).fit(X[:1000], y[:1000])
    here = evaluate(model, store, y, "binary", chunk_rows=300)
    with use_client(client):
        assert evaluate(model, store, y, "binary", chunk_rows=300) == here
    assert here["test_error"] < 0.25


def test_nystrom_and_rb_name_the_first_bad_row_on_cluster(client, data, bad_zarr):
    _, y, _ = data
    for est in (NystromRidgeRegressor(n_components=50, engine={"pass_rows": 1000}, bandwidth=2.0,
                                      random_state=0),
                RBRegressor(n_components=8, engine={"pass_rows": 1000}, bandwidth=2.0, random_state=0)):
        with use_client(client), pytest.raises(ValueError) as e:
            est.fit(bad_zarr, y)
        assert str(e.value) == "X contains NaN or infinity (first at row 3456)"


def test_rb_cg_on_cluster_matches_local(client, data):
    X, y, Z = data
    X, y = X[:2000], y[:2000]
    # features: hashes computed on the workers, same blocks -> identical vocabulary and Z
    kw = dict(n_components=16, engine={"pass_rows": 500}, bandwidth=2.0, reg=1.0, tol=1e-12, n_iter=500,
              random_state=0)
    local = RBRegressor(**kw).fit(X, y)
    with use_client(client), get_task_stream(client) as ts:
        remote = RBRegressor(**kw).fit(X, y)
        remote_pred = remote.predict(X)
    assert _ran_on_cluster(ts, "_block_hashes") and _ran_on_cluster(ts, "normal-")
    assert np.array_equal(local.features_.keys_, remote.features_.keys_)
    assert (local.features_.transform(X) != remote.features_.transform(X)).nnz == 0
    # CG: Z^T (Z P) is a sum over the workers' row blocks, associated differently from the one
    # sparse product, so iterates differ by rounding; run to tol 1e-12, the solutions agree to
    # ~1e-11 relative (1e-10 would fail at a loose CG tolerance, where the two runs may stop an
    # iteration apart: agreement is then only ~tol)
    assert max(local.history_["residual"][-1], remote.history_["residual"][-1]) <= 1e-12
    np.testing.assert_allclose(remote_pred, local.predict(X), rtol=1e-10, atol=1e-10)
    labels = (y > np.median(y)).astype(int)
    local = RBClassifier(**kw).fit(X, labels)
    with use_client(client):
        remote = RBClassifier(**kw).fit(X, labels)
    np.testing.assert_allclose(remote.decision_function(X), local.decision_function(X),
                               rtol=1e-10, atol=1e-10)


def test_pca_preparation_on_cluster_is_identical(client, tmp_path):
    from kernelscale.pipeline.data import prepare_dataset

    spec = {"task": "binary", "chunk_rows": 700, "split": {"test_size": 0.25, "seed": 1},
            "generator": {"name": "classification", "n_samples": 4000, "n_features": 8,
                          "n_informative": 5, "seed": 2},
            "preprocess": {"standardize": True, "pca": {"n_components": 4}}}
    local = prepare_dataset("p", spec, tmp_path / "local")
    with use_client(client), get_task_stream(client) as ts:
        remote = prepare_dataset("p", spec, tmp_path / "remote")
    assert _ran_on_cluster(ts, "block_moments")
    # blocks' moments merged in row order at the widths the local pass uses: same bits, so the
    # PCA axes and every written array (sha256) are identical
    assert remote["pca"] == local["pca"] and remote["sha256"] == local["sha256"]


def test_train_run_evaluation_on_cluster_is_identical(client, tmp_path):
    from kernelscale.pipeline.data import prepare_dataset
    from kernelscale.pipeline.train_run import train

    spec = {"task": "regression", "chunk_rows": 600, "split": {"test_size": 0.3, "seed": 1},
            "generator": {"name": "regression", "n_samples": 3000, "n_features": 5, "seed": 0},
            "preprocess": {"standardize": True}}
    prepare_dataset("r", spec, tmp_path / "data")
    algo = {"estimator": "nystrom", "params": {"n_components": 100, "engine": {"pass_rows": 500}},
            "device": "cpu"}
    local = train(tmp_path / "data", tmp_path / "local", "nystrom", algo, 0)
    with use_client(client), get_task_stream(client) as ts:
        remote = train(tmp_path / "data", tmp_path / "remote", "nystrom", algo, 0)
    assert _ran_on_cluster(ts, "lambda")  # predict_chunked's map_blocks task
    keys = [k for k in local if k.startswith("test_")]
    assert keys and {k: remote[k] for k in keys} == {k: local[k] for k in keys}


def test_process_workers_pickle_the_chunk_functions(data):
    # worker processes: the block functions, kernel and zarr array travel by pickle; BLAS in a
    # worker may use another thread count than here, so compare with allclose
    X, y, Z = data
    kw = dict(n_components=100, engine={"pass_rows": 1000}, bandwidth=2.0, random_state=0)
    local = NystromRidgeRegressor(**kw).fit(Z, y)
    c = client_for(None, n_workers=2, processes=True)
    try:
        with use_client(c):
            remote = NystromRidgeRegressor(**kw).fit(Z, y)
            pred = predict_chunked(remote, Z, c)
            rb = RBRegressor(n_components=8, engine={"pass_rows": 1000}, bandwidth=2.0, reg=1.0, tol=1e-12,
                             random_state=0).fit(Z, y)
    finally:
        c.close()
        c.cluster.close()
    np.testing.assert_allclose(pred, local.predict(X), rtol=1e-10, atol=1e-12)
    rb_local = RBRegressor(**rb.get_params()).fit(Z, y)
    np.testing.assert_allclose(rb.predict(X), rb_local.predict(X), rtol=1e-10, atol=1e-10)


def test_cli_unreachable_scheduler_is_one_line_error(tmp_path, capsys):
    from kernelscale.pipeline.cli import main

    spec = {"task": "regression", "generator": {"name": "regression", "n_samples": 100,
                                                "n_features": 3, "seed": 0}}
    with pytest.raises(SystemExit) as e:
        main(["prepare", "--dataset", "r", "--spec-json", json.dumps(spec), "--out",
              str(tmp_path / "data"), "--dask-scheduler", "tcp://127.0.0.1:1"])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("kernelscale prepare: error: cannot reach dask scheduler "
                          "'tcp://127.0.0.1:1'")
    assert not (tmp_path / "data").exists()
    from kernelscale.pipeline.data import prepare_dataset

    prepare_dataset("r", spec, tmp_path / "data")
    algo = json.dumps({"estimator": "nystrom", "params": {"n_components": 10}, "device": "cpu"})
    run = subprocess.run([sys.executable, "-m", "kernelscale.pipeline.cli", "train", "--data",
                          str(tmp_path / "data"), "--out", str(tmp_path / "run"), "--algorithm",
                          "nystrom", "--spec", algo, "--dask-scheduler", "tcp://127.0.0.1:1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "kernelscale train: error: cannot reach dask scheduler "
        "'tcp://127.0.0.1:1'"), run.stderr
    assert not (tmp_path / "run" / "final.json").exists()


def test_config_dask_section_to_job_environment(tmp_path, monkeypatch):
    import yaml

    from kernelscale.pipeline.cli import build_parser, main
    from kernelscale.pipeline.provenance import job_environment
    from kernelscale.spread.cluster import SCHEDULER_ENV, SLURM_ENV, WORKERS_ENV, environment

    unset = {SCHEDULER_ENV: None, WORKERS_ENV: None, SLURM_ENV: None}
    assert environment(None) == environment({"scheduler": None, "n_workers": 2}) == unset
    assert environment({"scheduler": "local", "n_workers": 3}) == {
        **unset, SCHEDULER_ENV: "local", WORKERS_ENV: "3"}
    assert environment({"scheduler": "tcp://h:8786"}) == {**unset, SCHEDULER_ENV: "tcp://h:8786"}
    assert environment({"scheduler": "slurm", "n_workers": 4,
                        "slurm": {"cores": 2, "memory": "8GB"}}) == {
        SCHEDULER_ENV: "slurm", WORKERS_ENV: "4", SLURM_ENV: '{"cores": 2, "memory": "8GB"}'}
    # the Snakefile's job_environment exports it; the CLI takes it as its --dask-* defaults
    for key in unset:
        monkeypatch.delenv(key, raising=False)
    for key in ("PATH", "PYTHONPATH"):  # job_environment edits them too: restore after the test
        monkeypatch.setenv(key, os.environ.get(key, ""))
    job_environment(sys.executable, tmp_path, {"scheduler": "local", "n_workers": 3})
    a = build_parser().parse_args(["train", "--data", "d", "--out", "o", "--algorithm", "x",
                                   "--spec", "{}"])
    assert (a.dask_scheduler, a.dask_workers) == ("local", 3)
    job_environment(sys.executable, tmp_path, {"scheduler": None})
    a = build_parser().parse_args(["train", "--data", "d", "--out", "o", "--algorithm", "x",
                                   "--spec", "{}"])
    assert (a.dask_scheduler, a.dask_workers) == (None, None)
    repo = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((repo / "config.yaml").read_text())
    schema = str(repo / "workflow/schemas/config.schema.yaml")
    for setting, ok in (({"scheduler": "local", "n_workers": 2}, True),
                        ({"scheduler": "tcp://10.0.0.1:8786"}, True),
                        ({"scheduler": "slurm", "n_workers": 2,
                          "slurm": {"cores": 1, "memory": "2GB", "start_timeout_s": 60}}, True),
                        ({"scheduler": "slurm", "slurm": {"gpus": 1}}, False),
                        ({"scheduler": "nowhere"}, False), ({"n_workers": 0}, False)):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump({**config, "dask": setting}))
        if ok:
            assert main(["check-config", str(path), "--schema", schema]) == 0
        else:
            with pytest.raises(SystemExit, match=r"c\.yaml: dask\."):  # the file at fault
                main(["check-config", str(path), "--schema", schema])
