"""System metrics of a training job (run folder -> MLflow ``system/*``) and the UI's address."""

from __future__ import annotations

import csv
import json
import os
import re
import time
from pathlib import Path

import psutil

from kernelscale.pipeline import system_metrics, tracking
from kernelscale.pipeline.train_run import train
from test_cli_train import SPEC, make_prepared, standins  # noqa: F401

NAMES = ("cpu_utilization_percentage", "system_memory_usage_megabytes",
         "system_memory_usage_percentage", "process_cpu_utilization_percentage",
         "process_memory_rss_megabytes")


def test_sampler_rows_steps_and_resume(tmp_path):
    with system_metrics.SystemSampler(tmp_path, interval=0.05):
        t = time.process_time()
        while time.process_time() - t < 0.4:  # keep this process busy
            sum(range(1000))
    rows = list(csv.DictReader(open(tmp_path / system_metrics.FILE)))
    assert len(rows) >= 3 and [int(r["step"]) for r in rows] == list(range(len(rows)))
    assert set(NAMES) <= set(rows[0])
    rss = psutil.Process().memory_info().rss / 1e6
    assert all(0.5 * rss < float(r["process_memory_rss_megabytes"]) < 2 * rss for r in rows)
    total = psutil.virtual_memory().total / 1e6
    for r in rows:  # this process is busy: the machine's CPU is never idle, the first row too
        assert 0 < float(r["cpu_utilization_percentage"]) <= 100
        assert 0 < float(r["system_memory_usage_megabytes"]) < total
    # a busy process: its own CPU share is visible in the samples (100 % = one core)
    assert max(float(r["process_cpu_utilization_percentage"]) for r in rows) > 20
    # a resumed run appends, its steps going on; a row torn by a kill is skipped on reading
    with open(tmp_path / system_metrics.FILE, "a") as f:
        f.write("99,17")
    n = len(rows)
    with system_metrics.SystemSampler(tmp_path, interval=60):
        pass
    read = system_metrics.read_rows(tmp_path)
    assert sorted({step for _, _, _, step in read}) == list(range(n)) + [n + 1]
    assert len(read) == (n + 1) * len(rows[0]) - 2 * (n + 1)  # step, timestamp_ms: not metrics


def test_import_logs_the_jobs_system_metrics(tmp_path, standins):  # noqa: F811
    from mlflow.tracking import MlflowClient

    data = make_prepared(tmp_path / "data", "toyc", "multiclass")
    out = tmp_path / "results" / "runs" / "toyc" / "standin" / "seed0"
    final = train(data, out, "standin", SPEC, seed=0)
    rows = list(csv.DictReader(open(out / system_metrics.FILE)))
    assert rows, "the train job wrote no system metrics"
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    rid = tracking.import_runs(uri, "t", [out])[0]["run_id"]
    client = MlflowClient(uri)
    for name in NAMES:
        hist = client.get_metric_history(rid, f"system/{name}")
        assert [m.step for m in hist] == [int(r["step"]) for r in rows], name
        assert [m.value for m in hist] == [float(r[name]) for r in rows], name
        assert all(final["started_at"] * 1000 - 1 <= m.timestamp
                   <= final["finished_at"] * 1000 + 1 for m in hist), name


def test_ui_link_opens_the_runs_table(tmp_path):
    """The link names the experiment's id, the runs tab and the "Model training" switch, all of
    which the installed MLflow UI knows (its JavaScript bundle routes them)."""
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    url = tracking.runs_table_url(uri, "kernelscale", "http://127.0.0.1:5001/")
    exp = tracking._client(uri).get_experiment_by_name("kernelscale")
    assert url == (f"http://127.0.0.1:5001/#/experiments/{exp.experiment_id}/runs"
                   "?workflowType=machine_learning")
    assert tracking.runs_table_url(uri, "kernelscale").endswith(url.split("5001/")[1])
    js = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    bundle = "".join(p.read_text(errors="ignore") for p in js.glob("*.js"))
    assert '"/experiments/:experimentId/runs"' in bundle
    assert re.search(r'MACHINE_LEARNING="machine_learning"', bundle)
    assert 'get("workflowType")' in bundle


def test_make_ui_prints_the_link_then_serves(tmp_path):
    """``make ui`` on a store: the link line first, then ``mlflow ui`` on that store (its
    command line checked through a stand-in ``mlflow`` on the venv's path)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()
    for name, text in (("python", f'exec {sys.executable} "$@"'), ("mlflow", 'echo "mlflow $*"')):
        (venv / "bin" / name).write_text(f"#!/bin/sh\n{text}\n")
        (venv / "bin" / name).chmod(0o755)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"tracking": {"uri": f"sqlite:///{tmp_path}/m.db",
                                            "experiment": "e"}}))
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    r = subprocess.run(["make", "-s", "-C", str(root), "ui", f"VENV={venv}", f"CONFIG={cfg}",
                        "UI_PORT=5077", "-o", f"{venv}/.installed"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    exp = tracking._client(f"sqlite:///{tmp_path}/m.db").get_experiment_by_name("e")
    lines = r.stdout.strip().splitlines()
    assert f"http://127.0.0.1:5077/#/experiments/{exp.experiment_id}/runs?" in lines[0]
    assert lines[-1].startswith("mlflow ui ") and f"sqlite:///{tmp_path}/m.db" in lines[-1]
    assert "--port 5077" in lines[-1]
