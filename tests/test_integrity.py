"""Data integrity end to end: prepare records a size + sha256 per file of every array, train
refuses a dataset with a missing, changed or extra chunk file (one line naming the array, telling
to re-run prepare), and nothing of the run is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelscale.pipeline.cli import main
from kernelscale.pipeline.data import DataError, open_prepared, prepare_dataset

SPEC = {"task": "binary",
        "generator": {"name": "classification", "n_samples": 6000, "n_features": 4,
                      "n_informative": 3, "seed": 0},
        "split": {"test_size": 0.25, "seed": 0}, "preprocess": {"standardize": True},
        "chunk_rows": 1000}
TRAIN_SPEC = {"estimator": "rff_sgd", "params": {"n_iter": 2, "n_components": 20}, "device": "cpu",
              "segments": 2}


@pytest.fixture
def prepared(tmp_path) -> Path:
    out = tmp_path / "data" / "toy"
    prepare_dataset("toy", SPEC, out)
    return out


def _train(data: Path, out: Path, capsys) -> tuple[int, str]:
    rc = main(["train", "--data", str(data), "--out", str(out), "--algorithm", "rff_sgd",
               "--spec", json.dumps(TRAIN_SPEC)])
    return rc, capsys.readouterr().err.strip()


def _chunk(data: Path, array: str, index: int = 2) -> Path:
    files = sorted((data / "data.zarr" / array / "c").rglob("*"))
    return [f for f in files if f.is_file()][index]


def test_prepare_records_every_file_and_a_clean_dataset_trains(prepared, tmp_path, capsys):
    meta = json.loads((prepared / "meta.json").read_text())
    record = meta["checksums"]
    assert set(record) == {"X_train", "y_train", "X_test", "y_test"}
    n_chunks = -(-meta["n_train"] // 1000)
    assert len([k for k in record["X_train"] if k.startswith("c/")]) == n_chunks
    assert all(len(v) == 2 and len(v[1]) == 64 for v in record["X_train"].values())
    open_prepared(prepared)  # verifies
    rc, err = _train(prepared, tmp_path / "run", capsys)
    assert rc == 0, err
    assert (tmp_path / "run" / "final.json").is_file()


@pytest.mark.parametrize("array", ["X_train", "y_train", "X_test", "y_test"])
def test_a_deleted_chunk_is_refused_naming_the_array(prepared, tmp_path, capsys, array):
    chunk = _chunk(prepared, array, 1)
    rel = chunk.relative_to(prepared / "data.zarr" / array).as_posix()
    chunk.unlink()
    # what zarr alone does: the lost rows read as zeros, silently
    import zarr

    z = zarr.open_group(str(prepared / "data.zarr"), mode="r")[array]
    assert not np.any(z[1000:2000])
    with pytest.raises(DataError, match=f"array {array}: chunk file {rel} is missing") as e:
        open_prepared(prepared)
    assert "\n" not in str(e.value) and "re-run prepare" in str(e.value)
    out = tmp_path / "run"
    rc, err = _train(prepared, out, capsys)
    assert rc == 1 and len(err.splitlines()) == 1
    assert f"array {array}" in err and "re-run prepare" in err and "Error" not in err
    assert not (out / "final.json").exists() and not (out / "metrics.csv").exists()


def test_changed_truncated_and_extra_files_are_refused(prepared):
    chunk = _chunk(prepared, "X_train", 1)
    original = chunk.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0xFF  # same size: only the hash sees it
    chunk.write_bytes(bytes(flipped))
    with pytest.raises(DataError, match="array X_train: file c/1/0 has changed .*sha256"):
        open_prepared(prepared)
    chunk.write_bytes(original[:-7])
    with pytest.raises(DataError, match="array X_train: file c/1/0 has changed .*size"):
        open_prepared(prepared)
    chunk.write_bytes(original)
    open_prepared(prepared)
    meta_file = prepared / "data.zarr" / "y_test" / "zarr.json"
    text = meta_file.read_text()
    meta_file.write_text(text.replace('"fill_value": 0', '"fill_value": 1'))
    with pytest.raises(DataError, match="array y_test: file zarr.json has changed"):
        open_prepared(prepared)
    meta_file.write_text(text)
    extra = prepared / "data.zarr" / "y_train" / "c" / "99"
    extra.write_bytes(b"\0" * 8)
    with pytest.raises(DataError, match="array y_train: unexpected file c/99"):
        open_prepared(prepared)
    extra.unlink()
    open_prepared(prepared)


def test_a_corrupt_chunk_names_the_array_not_the_codec(prepared, tmp_path, capsys):
    chunk = _chunk(prepared, "X_test", 0)
    chunk.write_bytes(b"garbage" * 10)  # zarr alone: "Zstd decompression error"
    rc, err = _train(prepared, tmp_path / "run", capsys)
    assert rc == 1 and len(err.splitlines()) == 1
    assert "array X_test" in err and "Zstd" not in err and "re-run prepare" in err


def test_meta_without_checksums_or_unreadable_is_one_line(prepared, tmp_path, capsys):
    meta_path = prepared / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["checksums"]
    meta_path.write_text(json.dumps(meta))
    rc, err = _train(prepared, tmp_path / "run", capsys)
    assert rc == 1 and len(err.splitlines()) == 1 and "no chunk checksums" in err
    meta_path.write_text("{not json")
    rc, err = _train(prepared, tmp_path / "run", capsys)
    assert rc == 1 and len(err.splitlines()) == 1 and "meta.json is not valid JSON" in err
    assert "JSONDecodeError" not in err
    import shutil

    shutil.rmtree(prepared / "data.zarr" / "X_train")
    meta_path.write_text(json.dumps({**meta, "checksums": {"X_train": {}}}))
    with pytest.raises(DataError, match="array X_train is missing"):
        open_prepared(prepared)


def test_the_cli_run_as_a_job_exits_non_zero(prepared, tmp_path):
    """What the train rule runs: exit status 1 and the one line (Snakemake then stops with it)."""
    _chunk(prepared, "y_train", 0).unlink()
    r = subprocess.run([sys.executable, "-m", "kernelscale.pipeline.cli", "train", "--data", str(prepared),
                        "--out", str(tmp_path / "run"), "--algorithm", "rff_sgd",
                        "--spec", json.dumps(TRAIN_SPEC)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("kernelscale train: error: ")
    assert "array y_train" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_snakemake_re_prepares_a_damaged_dataset_then_trains(tmp_path):
    """A chunk file of a prepared dataset deleted after a finished run: a rerun (what `make run`
    runs: repair, then snakemake) moves the dataset aside (one line), re-runs prepare and the
    train job, and ends with the metric of the undamaged run."""
    from test_workflow_pipeline import make_workdir, repair, smk

    config = {
        "datasets": {"tiny_clf": {
            "task": "multiclass",
            "generator": {"name": "classification", "n_samples": 3000, "n_features": 6,
                          "n_informative": 4, "n_classes": 3, "seed": 1},
            "split": {"test_size": 0.25, "seed": 0}, "chunk_rows": 500}},
        "algorithms": {"standin": {"estimator": "standin", "params": {"n_iter": 2},
                                   "device": "cpu", "segments": 2}},
        "experiments": [{"datasets": ["tiny_clf"], "algorithms": ["standin"], "seeds": [0]}],
        "tracking": {"experiment": "tiny"},
    }
    workdir, env = make_workdir(tmp_path, config)
    target = "results/runs/tiny_clf/standin/seed0/final.json"
    smk(workdir, env, "--cores", "2")  # the whole pipeline, as `make run`
    data = workdir / "results" / "data" / "tiny_clf"
    final = json.loads((workdir / target).read_text())
    prepare_log = workdir / "results" / "logs" / "prepare" / "tiny_clf.log"
    first_prepare = prepare_log.stat().st_mtime_ns
    train_log = workdir / "results" / "logs" / "train" / "tiny_clf" / "standin" / "seed0.log"
    first_train = train_log.stat().st_mtime_ns

    _chunk(data, "X_train", 1).unlink()
    r = repair(workdir, env)
    smk(workdir, env, "--cores", "2")
    lines = [ln for ln in r.stderr.splitlines() if "moved to" in ln]
    assert len(lines) == 1 and "array X_train: chunk file" in lines[0], r.stderr[-3000:]
    assert lines[0].startswith("kernelscale: ") and "prepare runs again" in lines[0]
    assert (workdir / "results" / "data" / "tiny_clf.damaged" / "meta.json").is_file()
    assert prepare_log.stat().st_mtime_ns > first_prepare  # prepare ran again
    assert train_log.stat().st_mtime_ns > first_train  # and the train job after it
    open_prepared(data)  # complete and verified
    again = json.loads((workdir / target).read_text())
    assert again["metric"] == final["metric"] and again["value"] == final["value"]
    assert again["n_train"] == final["n_train"] and again["resumed"] == 0
    # and a third run has nothing to do
    assert "moved to" not in repair(workdir, env).stderr
    r = smk(workdir, env, "--cores", "2")
    assert "Nothing to be done" in r.stdout + r.stderr
