"""Fault injection: kills, damaged checkpoints, tracking store down, parallel jobs on one SQLite
store, interrupted imports, two checkouts sharing a store, read-only results.

Each case asserts what the user sees (one line, exit status) and that no result is lost,
duplicated or silently wrong. Training uses the stand-in estimator of test_cli_train (fast, with
a sleep per iteration so that kills land mid-run) and real estimators where it matters.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import pickle
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from kernelscale.pipeline import tracking
from kernelscale.pipeline.cli import main
from test_cli_train import SPEC, make_prepared, standins  # noqa: F401

HERE = Path(__file__).resolve().parent
# a `kernelscale` process that knows the stand-in estimators
CLI = [sys.executable, "-c",
       f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_cli_train; "
       "test_cli_train.register_standins(); from kernelscale.pipeline.cli import main; "
       "sys.exit(main(sys.argv[1:]))"]


def _train_args(data, out, spec, seed=0):
    return ["train", "--data", str(data), "--out", str(out), "--algorithm", "standin",
            "--spec", json.dumps(spec), "--seed", str(seed)]


def _final(out: Path) -> dict:
    return json.loads((out / "final.json").read_text())


def _metrics(out: Path) -> pd.DataFrame:
    # everything but wall-clock columns must be identical between a killed and a clean run
    return pd.read_csv(out / "metrics.csv").drop(columns=["time_s", "timestamp_ms"])


def _one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text and "Error:" not in text, text
    return lines[0]


# ----------------------------------------------------------------------------- kills
def test_kill_9_at_random_moments_then_resume_gives_the_same_result(tmp_path):
    data = make_prepared(tmp_path / "data", "toy", "binary")
    spec = {**SPEC, "params": {"n_iter": 1, "sleep": 0.15}, "segments": 10}
    ref = tmp_path / "ref"
    r = subprocess.run(CLI + _train_args(data, ref, spec), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "run"
    rng = random.Random(14)
    kills = 0
    for _ in range(3):  # three kill -9 at random moments (mid-segment, mid-write, anywhere)
        ckpt = out / "checkpoint.pkl"
        seen = ckpt.stat().st_mtime_ns if ckpt.is_file() else None
        proc = subprocess.Popen(CLI + _train_args(data, out, spec), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        start = time.time()
        while time.time() - start < 60 and proc.poll() is None:  # until this run checkpoints
            if ckpt.is_file() and ckpt.stat().st_mtime_ns != seen:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.6))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(timeout=30)
        if (out / "final.json").exists():
            break
    assert kills >= 2
    r = subprocess.run(CLI + _train_args(data, out, spec), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert _final(out)["value"] == _final(ref)["value"]
    assert _final(out)["n_iter"] == 10 and _final(out)["resumed"] >= 1
    pd.testing.assert_frame_equal(_metrics(out), _metrics(ref))
    assert not (out / "checkpoint.pkl").exists()


# ----------------------------------------------------------------------------- checkpoints
def _garbage(path: Path) -> None:
    path.write_bytes(b"\x80\x04not a pickle at all")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _wrong_type(path: Path) -> None:
    path.write_bytes(pickle.dumps(["a", "list", "not", "a", "checkpoint"]))


def _old_layout(path: Path) -> None:
    saved = pickle.loads(path.read_bytes())
    path.write_bytes(pickle.dumps({"key": saved["key"], "segment": 2}))  # fields missing


@pytest.mark.parametrize("damage", [_garbage, _truncated, _wrong_type, _old_layout])
def test_a_damaged_checkpoint_restarts_from_scratch_with_a_warning(tmp_path, capsys, damage):
    from kernelscale.pipeline.train_run import train

    data = make_prepared(tmp_path / "data", "toy", "regression")
    ref = train(data, tmp_path / "ref", "standin", SPEC, seed=0)
    out = tmp_path / "run"
    assert train(data, out, "standin", SPEC, seed=0, stop_after=2) is None
    damage(out / "checkpoint.pkl")
    capsys.readouterr()
    final = train(data, out, "standin", SPEC, seed=0)
    warnings = [ln for ln in capsys.readouterr().out.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "checkpoint.pkl" in warnings[0] and "starting over" in warnings[0]
    assert final["resumed"] == 0 and final["value"] == ref["value"] and final["n_iter"] == 12


# ----------------------------------------------------------------------------- tracking
@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory, standins):  # noqa: F811
    """16 finished run folders, trained by 16 `kernelscale train` processes at once."""
    root = tmp_path_factory.mktemp("faults")
    data = make_prepared(root / "data", "toy", "multiclass", n_train=600, n_test=200)
    outs = [root / "results" / "runs" / "toy" / "standin" / f"seed{s}" for s in range(16)]
    store = root / "results" / "mlflow.db"
    r = subprocess.run(CLI + ["tracking-init", "--uri", f"sqlite:///{store}", "--experiment",
                              "x"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    before = store.stat()
    ctx = multiprocessing.get_context("fork")  # 16 processes start in ms, not 16 interpreters
    procs = [ctx.Process(target=_train_child, args=(data, out, seed))
             for seed, out in enumerate(outs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 16
    after = store.stat()
    # training never touched the tracking store (it must not wait on or race for it)
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    return root, outs


def _train_child(data, out, seed):
    os._exit(main(_train_args(data, out, {**SPEC, "segments": 2}, seed)))


def _track_child(uri, dirs, err_file):
    with open(err_file, "w") as f, contextlib.redirect_stderr(f):
        rc = main(["track", "--uri", uri, "--experiment", "x", *map(str, dirs)])
    os._exit(rc)


def _runs(uri, experiment="x"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], max_results=1000)


def test_parallel_jobs_and_parallel_imports_on_one_sqlite_store(run_dirs):
    root, outs = run_dirs
    uri = f"sqlite:///{root}/results/mlflow.db"
    ctx = multiprocessing.get_context("fork")
    # four imports at once, overlapping (the last one repeats the first four folders)
    parts = [outs[0:5], outs[5:10], outs[10:16], outs[0:4]]
    errs = [root / f"track{i}.err" for i in range(len(parts))]
    procs = [ctx.Process(target=_track_child, args=(uri, part, err))
             for part, err in zip(parts, errs, strict=True)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    messages = [e.read_text() for e in errs]
    assert [p.exitcode for p in procs] == [0] * 4, messages
    assert not any("locked" in m for m in messages)
    runs = _runs(uri)
    keys = sorted(r.data.tags[tracking.KEY_TAG] for r in runs)
    # all, none duplicated (without the import lock the overlapping import duplicated runs)
    assert keys == sorted(f"toy/standin/seed{s}" for s in range(16))
    assert all(r.info.status == "FINISHED" and tracking.HASH_TAG in r.data.tags for r in runs)
    again = tracking.import_runs(uri, "x", outs)
    assert [r["action"] for r in again] == ["unchanged"] * 16 and len(_runs(uri)) == 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tracking_server_down_loses_nothing_and_blocks_nothing(run_dirs, tmp_path, capsys):
    root, outs = run_dirs
    uri = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    before = {p: (p / "final.json").read_bytes() for p in outs}
    t = time.time()
    rc = main(["tracking-init", "--uri", uri, "--experiment", "x",
               "--out", str(tmp_path / "store.json")])
    err = capsys.readouterr().err
    # the workflow goes on training: init warns in one line and succeeds
    assert rc == 0 and "warning" in _one_line(err) and "unreachable" in err
    assert json.loads((tmp_path / "store.json").read_text())["reachable"] is False
    rc = main(["track", "--uri", uri, "--experiment", "x", "--out", str(tmp_path / "imp.json"),
               *map(str, outs)])
    line = _one_line(capsys.readouterr().err)
    assert rc == 1 and "unreachable" in line and "kept" in line
    assert time.time() - t < 20  # not MLflow's minutes of retries
    assert not (tmp_path / "imp.json").exists()
    assert {p: (p / "final.json").read_bytes() for p in outs} == before
    # a store that is not there yet (its folder is a file), then is: imported later, whole
    blocker = tmp_path / "store"
    blocker.write_text("in the way")
    uri = f"sqlite:///{blocker}/mlflow.db"
    rc = main(["track", "--uri", uri, "--experiment", "x", *map(str, outs)])
    assert rc == 1 and f"tracking store {uri}" in _one_line(capsys.readouterr().err)
    blocker.unlink()
    assert main(["track", "--uri", uri, "--experiment", "x", *map(str, outs)]) == 0
    assert main(["track", "--uri", uri, "--experiment", "x", *map(str, outs)]) == 0
    assert len(_runs(uri)) == 16
    assert "'unchanged': 16" in capsys.readouterr().out


def test_an_interrupted_import_is_completed_by_the_next(run_dirs, tmp_path, monkeypatch):
    root, outs = run_dirs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    from mlflow.tracking import MlflowClient

    real = MlflowClient.log_artifact
    calls = {"n": 0}

    def dies_half_way(self, *a, **k):  # the process "dies" after the run and a few files
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(MlflowClient, "log_artifact", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        tracking.import_runs(uri, "x", outs[:2])
    monkeypatch.setattr(MlflowClient, "log_artifact", real)
    (half,) = _runs(uri)
    assert half.info.status == "RUNNING" and tracking.HASH_TAG not in half.data.tags
    records = tracking.import_runs(uri, "x", outs[:2])
    assert [r["action"] for r in records] == ["replaced", "created"]
    runs = _runs(uri)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    client = MlflowClient(uri)
    for r in runs:
        arts = {a.path for a in client.list_artifacts(r.info.run_id)}
        assert {"final.json", "metrics.csv", "params.json"} <= arts
        # the model: an MLflow model (model.pkl only when it cannot be logged as one)
        if "model.pkl" not in arts:
            import mlflow

            mlflow.set_tracking_uri(uri)
            assert mlflow.models.get_model_info(f"runs:/{r.info.run_id}/model").flavors
    assert [r["action"] for r in tracking.import_runs(uri, "x", outs[:2])] == ["unchanged"] * 2


def test_two_checkouts_sharing_a_store_keep_their_runs(run_dirs, tmp_path):
    import shutil

    root, outs = run_dirs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    other = tmp_path / "checkout2" / "results" / "runs" / "toy" / "standin" / "seed0"
    shutil.copytree(outs[0], other)  # same dataset/algorithm/seed, another checkout
    assert tracking.import_runs(uri, "x", [outs[0]])[0]["action"] == "created"
    assert tracking.import_runs(uri, "x", [other])[0]["action"] == "created"
    assert tracking.import_runs(uri, "x", [outs[0]])[0]["action"] == "unchanged"
    runs = _runs(uri)
    assert sorted(r.data.tags["run_folder"] for r in runs) == sorted(
        [str(outs[0].resolve()), str(other.resolve())])


def test_training_does_not_load_the_tracking_library(tmp_path):
    """Training cannot wait on a tracking server it never talks to."""
    data = make_prepared(tmp_path / "data", "toy", "binary", n_train=300, n_test=100)
    code = CLI[2] .replace("sys.exit(main(sys.argv[1:]))",
                           "rc = main(sys.argv[1:]); print('mlflow' in sys.modules); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code,
                        *_train_args(data, tmp_path / "run", {**SPEC, "segments": 1})],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"


# ----------------------------------------------------------------------------- read-only results
@contextlib.contextmanager
def read_only(folder: Path):
    """A folder nobody can write to: chmod for users; root ignores modes, so the immutable
    attribute (ext4/xfs) there; skip where neither holds."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a folder read-only for root here (no chattr +i)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_read_only_results_folder_is_one_line(run_dirs, tmp_path, capsys):
    root, outs = run_dirs
    data = make_prepared(tmp_path / "data", "toy", "binary", n_train=300, n_test=100)
    results = tmp_path / "results"
    with read_only(results):
        t = time.time()
        rc = main(_train_args(data, results / "runs" / "toy" / "standin" / "seed0",
                              {**SPEC, "params": {"n_iter": 1, "sleep": 2.0}}))
        line = _one_line(capsys.readouterr().err)
        assert rc == 1 and "cannot write the run folder" in line and "read-only" in line
        assert time.time() - t < 2.0  # refused before training, not after a segment
        uri = f"sqlite:///{results}/mlflow.db"
        rc = main(["track", "--uri", uri, "--experiment", "x", *map(str, outs[:1])])
        assert rc == 1 and str(results) in _one_line(capsys.readouterr().err)
        rc = main(["track", "--uri", f"sqlite:///{tmp_path}/ok.db", "--experiment", "x",
                   "--out", str(results / "tracking" / "imported.json"), *map(str, outs[:1])])
        line = _one_line(capsys.readouterr().err)
        assert rc == 1 and "cannot write" in line and str(results / "tracking") in line
        assert not (tmp_path / "ok.db").exists()  # refused before importing anything
        rc = main(["tables", "--uri", f"sqlite:///{tmp_path}/ok.db", "--experiment", "x",
                   "--csv", str(results / "tables" / "s.csv"), "--md", str(results / "s.md")])
        line = _one_line(capsys.readouterr().err)
        assert rc == 1 and "cannot write the tables folder" in line
    assert not any(results.iterdir())  # nothing half-written


# ----------------------------------------------------------------------------- dask cluster
# A train job on a dask cluster that does not come up, or whose workers cannot read the data:
# exit status 1, one line naming the cause, and a run folder with nothing a rerun or the tables
# could take for a result (none at all when the job made it; a checkpoint of an earlier killed
# run untouched, so the rerun resumes).
CLASS_NAME = re.compile(r"\b\w*(Error|Exception)\b")  # Python's, which a user must not see
DSG_SPEC = {"estimator": "dsg", "device": "cpu", "segments": 2,
            "params": {"n_iter": 2, "batch_size": 256, "block_size": 16, "bandwidth": 2.0}}


def _dask_train(data, out, scheduler, *extra):
    return ["train", "--data", str(data), "--out", str(out), "--algorithm", "dsg",
            "--spec", json.dumps(DSG_SPEC), "--dask-scheduler", scheduler, *extra]


def test_unreachable_scheduler_fails_the_train_job_and_leaves_no_run_folder(tmp_path, capsys):
    pytest.importorskip("distributed")
    data = make_prepared(tmp_path / "data", "toy", "binary", n_train=600, n_test=200)
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    out = tmp_path / "results" / "runs" / "toy" / "dsg" / "seed0"
    t = time.time()
    rc = main(_dask_train(data, out, address))
    line = _one_line(capsys.readouterr().err)
    assert rc == 1 and time.time() - t < 30, line
    assert line.startswith(f"kernelscale train: error: cannot reach dask scheduler {address!r}")
    assert not out.exists()


def _fake_slurm(bin_dir: Path, calls: Path) -> None:
    """`sbatch` that queues a job which never starts (prints a job id, runs nothing) and
    `scancel` that records the cancel: a Slurm queue stuck for good, on any machine."""
    bin_dir.mkdir()
    for name, reply in (("sbatch", "Submitted batch job 4242"), ("scancel", "")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\necho "{reply}"\n')
        script.chmod(0o755)


@pytest.mark.parametrize("folder", ["new", "made by snakemake"])
def test_slurm_workers_that_never_start_fail_the_train_job_cleanly(tmp_path, capsys,
                                                                    monkeypatch, folder):
    pytest.importorskip("dask_jobqueue")
    from kernelscale.spread.cluster import SLURM_ENV

    data = make_prepared(tmp_path / "data", "toy", "binary", n_train=600, n_test=200)
    calls = tmp_path / "slurm-calls.txt"
    _fake_slurm(tmp_path / "bin", calls)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(SLURM_ENV, json.dumps({"start_timeout_s": 1, "host": "127.0.0.1",
                                              "log_directory": str(tmp_path / "logs")}))
    out = tmp_path / "results" / "runs" / "toy" / "dsg" / "seed0"
    if folder != "new":
        out.mkdir(parents=True)
    t = time.time()
    rc = main(_dask_train(data, out, "slurm", "--dask-workers", "2"))
    line = _one_line(capsys.readouterr().err)
    assert rc == 1 and time.time() - t < 30, line
    assert "dask on Slurm: 0 of 2 worker jobs running after 1 s" in line, line
    assert "queue stuck" in line and "start_timeout_s" in line, line
    assert not CLASS_NAME.search(line), line
    submitted = calls.read_text().splitlines()
    assert sum(c.startswith("sbatch ") for c in submitted) == 2, submitted
    assert "scancel 4242" in submitted  # the pending jobs are cancelled
    if folder == "new":
        assert not out.exists()
    else:  # Snakemake's folder stays, empty
        assert out.is_dir() and not any(out.iterdir())


@pytest.fixture(scope="module")
def process_cluster():
    """A LocalCluster of two worker *processes*, its scheduler reached by address as a train job
    reaches one that Slurm started."""
    pytest.importorskip("distributed")
    from kernelscale.spread.cluster import client_for

    c = client_for(None, n_workers=2, processes=True)
    yield c
    c.close()
    c.cluster.close()


@contextlib.contextmanager
def _workers_in(client, folder: Path):
    """The workers' current directory is ``folder``: a relative data path that the job can read
    names nothing there (zarr reads a missing store as its fill value), as on a node without the
    job's file system."""
    before = client.run(os.getcwd)
    client.run(os.chdir, str(folder))
    try:
        yield
    finally:
        for addr, cwd in before.items():
            client.run(os.chdir, cwd, workers=[addr])


NYSTROM_SPEC = {"estimator": "nystrom", "device": "cpu",
                "params": {"n_components": 50, "bandwidth": 2.0}}


@pytest.mark.parametrize("spec,folder", [(DSG_SPEC, "new"), (NYSTROM_SPEC, "new"),
                                         (DSG_SPEC, "checkpoint of a killed run")],
                         ids=["dsg", "nystrom", "dsg-resume"])
def test_workers_without_the_data_fail_the_train_job_cleanly(process_cluster, tmp_path, capsys,
                                                              monkeypatch, spec, folder):
    """DSG's row workers and Nystrom's chunked sums read the data on the workers; without the
    check, Nystrom trained on zarr's fill values there and reported a model at the baseline."""
    from kernelscale.pipeline.train_run import train

    (tmp_path / "job").mkdir()
    (tmp_path / "workers").mkdir()
    monkeypatch.chdir(tmp_path / "job")
    data = make_prepared(Path("data"), "toy", "binary", n_train=1000, n_test=200)  # relative
    out = tmp_path / "results" / "runs" / "toy" / "a" / "seed0"
    kept = {}
    if folder != "new":  # one of two segments done, then the job was killed
        assert train(data, out, "a", spec, 0, stop_after=1) is None
        kept = {p.name: p.read_bytes() for p in out.iterdir()}
        assert set(kept) == {"checkpoint.pkl", "metrics.csv", "system_metrics.csv"}
    argv = _dask_train(data, out, process_cluster.scheduler.address)
    argv[argv.index("--spec") + 1] = json.dumps(spec)
    with _workers_in(process_cluster, tmp_path / "workers"):
        rc = main(argv)
    line = _one_line(capsys.readouterr().err)
    assert rc == 1, line
    assert re.match(r"kernelscale train: error: dask worker tcp://\S+ cannot read [Xy]_\w+ "
                    + re.escape(f"({data / 'data.zarr'}): its first rows differ"), line), line
    assert "file system" in line and not CLASS_NAME.search(line), line
    if folder == "new":
        assert not out.exists()
        return
    assert {p.name: p.read_bytes() for p in out.iterdir()} == kept  # untouched: resumable
    final = train(data, out, "a", spec, 0)  # the rerun (here without dask) resumes
    assert final["resumed"] == 1 and (out / "final.json").is_file()
