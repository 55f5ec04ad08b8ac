"""The Snakefile acts on no file while it is parsed: a stale lock and damaged prepared data are
repaired by `kernelscale repair` (what `make run` runs before snakemake), never by a dry run."""

import sys

import pytest

from kernelscale.pipeline import cli
from test_cli_train import make_prepared
from test_integrity import _chunk
from test_workflow_pipeline import TINY, make_workdir, smk


def _damaged_and_locked(workdir):
    data = make_prepared(workdir / "results" / "data", "tiny_clf", "multiclass")
    _chunk(data, "X_train", 1).unlink()
    lock = workdir / ".snakemake" / "locks" / "0.output.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("results/x\n")
    return data, lock


def test_a_dry_run_moves_and_deletes_nothing(tmp_path):
    workdir, env = make_workdir(tmp_path, TINY)
    data, lock = _damaged_and_locked(workdir)
    smk(workdir, env, "-n", "--cores", "1")
    assert lock.is_file() and (data / "meta.json").is_file()
    assert not (data.parent / "tiny_clf.damaged").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="finds snakemake processes in /proc")
def test_repair_removes_a_stale_lock_and_sets_damaged_data_aside(tmp_path, monkeypatch, capsys):
    (tmp_path / "config.yaml").write_text("experiments: [{datasets: [tiny_clf], "
                                          "algorithms: [a], seeds: [0]}]\n")
    data, lock = _damaged_and_locked(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["repair"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert not lock.parent.exists() and not data.exists()
    assert (data.parent / "tiny_clf.damaged" / "meta.json").is_file()
    assert len(err) == 2 and "removed a stale Snakemake lock" in err[0]
    assert "array X_train: chunk file" in err[1] and "prepare runs again" in err[1]
    assert cli.main(["repair"]) == 0 and capsys.readouterr().err == ""  # nothing left to do
