"""MLflow import of run folders (idempotent), summary tables and plots."""

from __future__ import annotations

import json

import pytest

from kernelscale import tables, tracking
from kernelscale.train_run import train
from test_cli_train import SPEC, make_prepared, standins  # noqa: F401


@pytest.fixture(scope="module")
def runs(tmp_path_factory, standins):  # noqa: F811
    root = tmp_path_factory.mktemp("runs")
    clf = make_prepared(root / "data", "toyc", "multiclass")
    reg = make_prepared(root / "data", "toyr", "regression")
    dirs = []
    for data in (clf, reg):
        for seed in (0, 1):
            out = root / "results" / "runs" / data.name / "standin" / f"seed{seed}"
            train(data, out, "standin", SPEC, seed=seed)
            dirs.append(out)
    return root, dirs


def test_import_is_idempotent_and_complete(runs, tmp_path):
    root, dirs = runs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.init_store(uri, "t")
    first = tracking.import_runs(uri, "t", dirs)
    assert [r["action"] for r in first] == ["created"] * 4
    again = tracking.import_runs(uri, "t", [d / "final.json" for d in dirs])
    assert [r["action"] for r in again] == ["unchanged"] * 4
    assert [r["run_id"] for r in again] == [r["run_id"] for r in first]
    df = tracking.search_runs(uri, "t")
    assert len(df) == 4
    assert set(df["tags.kernelscale.run_key"]) == {"toyc/standin/seed0", "toyc/standin/seed1",
                                                  "toyr/standin/seed0", "toyr/standin/seed1"}

    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    rid = first[0]["run_id"]
    run = client.get_run(rid)
    assert run.data.params["algorithm"] == "standin" and run.data.params["params.n_iter"] == "3"
    hist = client.get_metric_history(rid, "test_error")
    assert [m.step for m in hist] == [1, 2, 3, 4]
    assert all(m.timestamp > 1_600_000_000_000 for m in hist)
    assert [m.timestamp for m in hist] == sorted(m.timestamp for m in hist)
    assert "final.test_error" in run.data.metrics and "final.peak_rss_mb" in run.data.metrics
    arts = {a.path for a in client.list_artifacts(rid)}
    assert {"final.json", "metrics.csv", "params.json", "model.pkl"} <= arts


def test_changed_run_folder_replaces_its_run(runs, tmp_path):
    root, dirs = runs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = tracking.import_runs(uri, "t", dirs[:1])
    final = dirs[0] / "final.json"
    saved = final.read_text()
    try:
        d = json.loads(saved)
        d["train_time_s"] += 1.0
        final.write_text(json.dumps(d))
        again = tracking.import_runs(uri, "t", dirs[:1])
    finally:
        final.write_text(saved)
    assert again[0]["action"] == "replaced" and again[0]["run_id"] != first[0]["run_id"]
    assert len(tracking.search_runs(uri, "t")) == 1


def test_unfinished_run_is_an_error(tmp_path):
    (tmp_path / "d" / "a" / "seed0").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no final.json"):
        tracking.import_runs(f"sqlite:///{tmp_path}/m.db", "t", [tmp_path / "d" / "a" / "seed0"])


def test_tables_and_plots(runs, tmp_path):
    root, dirs = runs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.import_runs(uri, "t", dirs)
    df = tables.write_tables(tracking.search_runs(uri, "t"), tmp_path / "s.csv", tmp_path / "s.md")
    assert len(df) == 4
    assert list(df[["dataset", "seed"]].itertuples(index=False, name=None)) == [
        ("toyc", 0), ("toyc", 1), ("toyr", 0), ("toyr", 1)]
    assert set(df["metric"]) == {"test_error", "test_rmse"}
    assert df["value"].notna().all() and (df["train_time_s"] > 0).all()
    assert (df["peak_rss_mb"] > 0).all()
    md = (tmp_path / "s.md").read_text()
    assert "| toyc" in md and "Mean over seeds" in md
    from kernelscale.plots import plot_dataset

    plot_dataset(dirs[:2], "toyc", tmp_path / "m.png", tmp_path / "o.png")
    for p in ("m.png", "o.png"):
        assert (tmp_path / p).read_bytes()[:4] == b"\x89PNG"


def test_cli_tracking_commands(runs, tmp_path, capsys):
    from kernelscale.cli import main

    root, dirs = runs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert main(["tracking-init", "--uri", uri, "--experiment", "e",
                 "--out", str(tmp_path / "store.json")]) == 0
    assert main(["track", "--uri", uri, "--experiment", "e", "--out", str(tmp_path / "imp.json"),
                 *map(str, dirs)]) == 0
    assert main(["tables", "--uri", uri, "--experiment", "e", "--csv", str(tmp_path / "s.csv"),
                 "--md", str(tmp_path / "s.md")]) == 0
    rec = json.loads((tmp_path / "imp.json").read_text())
    assert len(rec["runs"]) == 4
    assert "4 runs" in capsys.readouterr().out
