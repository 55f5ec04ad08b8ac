"""The tables say what ran: the chosen bandwidth, reg, feature count and iterations per run, no
column without a value, blanks (not ``<NA>``/``nan``) in the markdown; titles name the loss used."""

from __future__ import annotations

import pickle

import pandas as pd

from kernelscale.pipeline import tables, tracking
from kernelscale.pipeline.chosen import chosen_settings
from kernelscale.pipeline.plots import panel_title
from kernelscale.pipeline.train_run import train
from test_cli_train import make_prepared


def test_summary_has_what_auto_chose_and_no_empty_columns(tmp_path):
    data = make_prepared(tmp_path / "data", "toyc", "multiclass", n_train=400, n_test=100, d=3,
                         chunk_rows=100)
    specs = {"rff": {"estimator": "rff_sgd", "params": {"n_iter": 2}, "segments": 2},
             "dsg": {"estimator": "dsg", "params": {"n_iter": 3}, "segments": 2}}
    outs, ests = [], {}
    for name, spec in specs.items():
        out = tmp_path / "runs" / "toyc" / name / "seed0"
        train(data, out, name, {"device": "cpu", **spec}, seed=0)
        outs.append(out)
        ests[name] = pickle.loads((out / "model.pkl").read_bytes())
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.import_runs(uri, "t", outs)
    csv, md = tmp_path / "summary.csv", tmp_path / "summary.md"
    tables.write_tables(tracking.search_runs(uri, "t"), csv, md)
    df = pd.read_csv(csv).set_index("algorithm")
    for name, est in ests.items():
        row = df.loc[name]
        assert row["bandwidth"] == est.bandwidth_ and row["reg"] == est.reg_, name
        assert row["iterations"] == est.n_iter_, name
    assert df.loc["rff", "n_features"] == ests["rff"].n_components_
    dsg = ests["dsg"]
    assert df.loc["dsg", "n_features"] == dsg.model_.n_blocks * dsg.block_size_
    # a classification-only table: no R² column, and no column without a value
    assert "test_r2" not in df.columns and "test_accuracy" in df.columns
    assert not df.reset_index().isna().all().any()
    # the baseline row: no seed, shown blank, never <NA> / nan
    assert pd.isna(df.loc[tables.BASELINE, "seed"])
    text = md.read_text()
    assert "<NA>" not in text and "nan" not in text.split("## One row")[1]
    assert "bandwidth" in text.split("## One row")[1].split("## Mean")[0]


def test_tables_of_older_imports_without_chosen_values():
    """Runs imported before the chosen values were recorded: the columns are there, empty."""
    runs = pd.DataFrame({"run_id": ["a"], "tags.dataset": ["d"], "tags.algorithm": ["x"],
                         "tags.seed": ["0"], "tags.metric": ["test_rmse"],
                         "metrics.final.value": [0.5], "metrics.final.baseline_value": [1.0]})
    s = tables.summary_table(runs)
    assert list(s.columns) == tables.COLUMNS
    assert s[["bandwidth", "reg", "n_features", "iterations"]].isna().all().all()


def test_panel_titles_name_the_loss_the_default_resolved_to():
    from sklearn.datasets import make_classification, make_regression

    from kernelscale.estimators.dsg import DSGClassifier
    from kernelscale.estimators.rff_sgd import RFFSGDRegressor

    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    clf = DSGClassifier(n_iter=2, random_state=0).fit(X, y)
    Xr, yr = make_regression(n_samples=200, n_features=4, random_state=0)
    reg = RFFSGDRegressor(n_iter=2, n_components=20, random_state=0).fit(Xr, yr)
    assert clf.loss is None and chosen_settings(clf)["loss"] == clf.loss_.name == "logistic"
    assert reg.loss is None and chosen_settings(reg)["loss"] == "square"
    members = [{"final": {"algorithm": "dsg", "chosen": chosen_settings(clf)}, "params": {}}]
    title = panel_title(("DSGClassifier", "binary", "objective", ("loss", "None")), members)
    assert "loss=logistic" in title and "default" not in title
