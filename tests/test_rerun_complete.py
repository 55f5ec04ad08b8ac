"""A plain rerun after a failed MLflow import completes the tables and MLflow (or says what is
missing): a seed is added while the store cannot be written, the import fails, the store is
repaired, and the next plain `snakemake` imports the new runs and rebuilds the tables.

Failures that hold for root too (CI runs the tests as root, which ignores file modes): the
artifact folder replaced by a file (the import fails part way, after creating a run), and the
SQLite file made immutable (``chattr +i``; chmod for other users; skipped where neither holds).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from kernelscale.pipeline.cli import main
from kernelscale.pipeline.train_run import train
from test_cli_train import SPEC, make_prepared, standins  # noqa: F401
from test_workflow_pipeline import SNAKEMAKE, TINY, make_workdir, smk

CONFIG = {
    "datasets": {"tiny_clf": TINY["datasets"]["tiny_clf"]},
    "algorithms": {"standin": {"estimator": "standin", "params": {"n_iter": 1, "sleep": 0.4},
                               "device": "cpu", "segments": 2}},
    "experiments": [{"datasets": ["tiny_clf"], "algorithms": ["standin"], "seeds": [0]}],
    "tracking": {"experiment": "rerun"},
}


def _break_artifacts(res: Path):
    (res / "mlartifacts").rename(res / "mlartifacts.aside")
    (res / "mlartifacts").write_text("")  # every artifact write fails: Not a directory

    def restore():
        (res / "mlartifacts").unlink()
        (res / "mlartifacts.aside").rename(res / "mlartifacts")
    return restore


def _read_only_database(res: Path):
    db = res / "mlflow.db"
    if os.geteuid() != 0:
        db.chmod(0o444)
        return lambda: db.chmod(0o644)
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        return None
    return lambda: subprocess.run(["chattr", "-i", str(db)], check=True)


@pytest.mark.slow
@pytest.mark.parametrize("fault", [_break_artifacts, _read_only_database],
                         ids=["artifacts-unwritable", "database-read-only"])
def test_rerun_after_failed_import_completes_tables_and_mlflow(tmp_path, fault):
    import pandas as pd

    from kernelscale.pipeline.tracking import HASH_TAG, KEY_TAG, search_runs

    workdir, env = make_workdir(tmp_path, CONFIG)
    res = workdir / "results"
    smk(workdir, env, "--cores", "1")  # seed 0

    config = copy.deepcopy(CONFIG)  # seed 1 added; the store breaks while it trains
    config["experiments"][0]["seeds"] = [0, 1]
    (workdir / "config.yaml").write_text(json.dumps(config))
    proc = subprocess.Popen([*SNAKEMAKE, "--cores", "1"], cwd=workdir, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seed1_log = res / "logs" / "train" / "tiny_clf" / "standin" / "seed1.log"
    deadline = time.time() + 120
    while not seed1_log.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    restore = fault(res)
    if restore is None:
        proc.kill()
        proc.communicate()
        pytest.skip("cannot make a file read-only for root here (no chattr +i)")
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        restore()
    failed = [ln for ln in out.splitlines() if ln.startswith("failed: rule tracking_import")]
    assert proc.returncode != 0 and len(failed) == 1, out[-3000:]
    assert str(res / "mlartifacts") in failed[0] or "results/mlflow.db" in failed[0], failed
    assert not (res / "tracking" / "imported.json").exists()

    r = smk(workdir, env, "--cores", "1")  # plain rerun
    assert "localrule tracking_import" in r.stdout + r.stderr
    summary = pd.read_csv(res / "tables" / "summary.csv")
    assert sorted(summary.query("algorithm == 'standin'")["seed"]) == [0, 1]
    runs = search_runs(f"sqlite:///{res}/mlflow.db", "rerun")
    # one complete MLflow run per run folder: the half-imported one replaced, not duplicated
    assert sorted(runs[f"tags.{KEY_TAG}"]) == ["tiny_clf/standin/seed0", "tiny_clf/standin/seed1"]
    assert runs[f"tags.{HASH_TAG}"].notna().all()


def test_tables_name_the_runs_missing_from_mlflow(tmp_path, capsys):
    """A run of the import record that MLflow does not hold: the tables job fails with one line
    naming it and drops the record (the workflow's next run imports again), instead of writing
    a table without it."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    data = make_prepared(tmp_path / "data", "toy", "binary", n_train=200, n_test=50)
    dirs = [tmp_path / "runs" / "toy" / "standin" / f"seed{s}" for s in (0, 1)]
    for seed, out in enumerate(dirs):
        train(data, out, "standin", SPEC, seed=seed)
    uri, record = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "imported.json"
    track = ["track", "--uri", uri, "--experiment", "e", "--out", str(record), *map(str, dirs)]
    tables = ["tables", "--uri", uri, "--experiment", "e", "--runs-from", str(record),
              "--csv", str(tmp_path / "s.csv"), "--md", str(tmp_path / "s.md")]
    assert main(track) == 0
    gone = json.loads(record.read_text())["runs"][1]
    MlflowClient(uri).delete_run(gone["run_id"])
    capsys.readouterr()
    assert main(tables) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"1 of 2 runs of {record}" in lines[0], lines
    assert gone["key"] in lines[0]
    assert not record.exists() and not (tmp_path / "s.csv").exists()
    assert main(track) == 0 and main(tables) == 0
    assert len(pd.read_csv(tmp_path / "s.csv").query("algorithm == 'standin'")) == 2
