"""MLflow import of run folders (idempotent), summary tables and plots."""

from __future__ import annotations

import json

import pytest

from kernelscale.pipeline import tables, tracking
from kernelscale.pipeline.train_run import train
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
    assert "final.test_error" in run.data.metrics and "final.peak_mem_mb" in run.data.metrics
    arts = {a.path for a in client.list_artifacts(rid)}
    assert {"final.json", "metrics.csv", "params.json", "history.csv"} <= arts


def test_mlflow_run_is_what_users_expect(runs, tmp_path, monkeypatch):
    """Real start/end times, constants as params, per-iteration history as stepped metrics, the
    model loadable by mlflow.pyfunc, the dataset as an input, provenance tags, a parent run."""
    import mlflow
    import numpy as np
    from mlflow.tracking import MlflowClient

    root, dirs = runs
    monkeypatch.setenv(tracking.GIT_ENV, "0123abc")
    monkeypatch.setenv(tracking.CONFIG_HASH_ENV, "feedbeef0001")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = tracking.import_runs(uri, "t", dirs[:2], parent_name="pipeline test")
    client = MlflowClient(uri)
    run = client.get_run(recs[0]["run_id"])
    final = json.loads((dirs[0] / "final.json").read_text())
    # Duration = the job's wall time (start of training to final.json), not a few ms
    assert run.info.start_time == int(final["started_at"] * 1000)
    assert run.info.end_time == int(final["finished_at"] * 1000)
    assert run.info.end_time - run.info.start_time >= 1000 * final["train_time_s"] * 0.99
    # constants are params, never metrics
    for k in ("n_train", "d", "n_test", "segments"):
        assert k in run.data.params and f"final.{k}" not in run.data.metrics
    assert run.data.params["n_train"] == "3000"
    assert not any(k in ("final.seed", "final.resumed", "final.n_iter", "test_rows",
                         "final.test_rows") for k in run.data.metrics)
    # history: one point per iteration (SPEC: 4 segments x 3 iterations), step = iteration
    hist = client.get_metric_history(run.info.run_id, "history.objective")
    assert [m.step for m in hist] == list(range(1, 13))
    # the model: an MLflow model that pyfunc loads and predicts with
    X = np.load(dirs[0] / "input_example.npy")
    model = mlflow.pyfunc.load_model(f"runs:/{run.info.run_id}/model")
    import pickle

    ref = pickle.loads((dirs[0] / "model.pkl").read_bytes()).predict(X)
    assert np.array_equal(np.asarray(model.predict(X)), ref)
    # dataset input, provenance tags, parent
    (ds,) = run.inputs.dataset_inputs
    assert ds.dataset.name == "toyc" and ds.dataset.digest
    assert run.data.tags["mlflow.source.git.commit"] == "0123abc"
    assert run.data.tags["kernelscale.config_hash"] == "feedbeef0001"
    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    assert parent.info.run_name == "pipeline test"
    assert parent.data.tags["kernelscale.config_hash"] == "feedbeef0001"
    # a second invocation: one new parent holding all listed runs; the old, now empty, is gone
    recs2 = tracking.import_runs(uri, "t", dirs, parent_name="pipeline again")
    assert [r["action"] for r in recs2] == ["unchanged"] * 2 + ["created"] * 2
    all_runs = client.search_runs([run.info.experiment_id])
    parents = [r for r in all_runs if r.data.tags.get("kernelscale.kind") == "pipeline"]
    assert [p.info.run_name for p in parents] == ["pipeline again"]
    children = [r for r in all_runs if r.data.tags.get("kernelscale.kind") == "run"]
    assert len(children) == 4
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    # the UI opens the experiment on its model-training view, not GenAI
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    # tables never see the parents
    assert len(tracking.search_runs(uri, "t")) == 4


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
    df = tables.write_tables(tracking.search_runs(uri, "t"), tmp_path / "s.csv", tmp_path / "s.md",
                             wide_csv_path=tmp_path / "w.csv")
    assert len(df) == 6  # 4 runs + one trivial baseline per dataset
    assert list(df[["dataset", "algorithm"]].itertuples(index=False, name=None)) == [
        ("toyc", "standin"), ("toyc", "standin"), ("toyc", tables.BASELINE),
        ("toyr", "standin"), ("toyr", "standin"), ("toyr", tables.BASELINE)]
    assert list(df["seed"].iloc[[0, 1, 3, 4]]) == [0, 1, 0, 1]
    assert set(df["metric"]) == {"test_error", "test_rmse"}
    runs_only = df[df["algorithm"] != tables.BASELINE]
    assert df["value"].notna().all() and (runs_only["train_time_s"] > 0).all()
    assert (runs_only["predict_time_s"] > 0).all() and (runs_only["model_size_mb"] > 0).all()
    assert (runs_only["peak_mem_mb"] >= 0).all()
    assert not runs_only["at_baseline"].any()  # the stand-in learns (accuracy > 0.6)
    md = (tmp_path / "s.md").read_text()
    assert "| toyc" in md and "Mean over seeds" in md and "Algorithms x datasets" in md
    import pandas as pd

    wide = pd.read_csv(tmp_path / "w.csv")
    assert list(wide["algorithm"]) == ["standin", tables.BASELINE]
    assert {"toyc: error", "toyc: fit s", "toyc: predict s", "toyc: size MB", "toyr: rmse",
            "toyr: at_baseline"} <= set(wide.columns)
    assert wide["toyc: error"].iloc[0] == pytest.approx(runs_only["value"].iloc[:2].mean())
    from kernelscale.pipeline.plots import plot_dataset

    plot_dataset(dirs[:2], "toyc", tmp_path / "m.png", tmp_path / "o.png")
    plot_dataset(dirs[2:], "toyr", tmp_path / "m2.png", tmp_path / "o2.png")
    for p in ("m.png", "o.png"):
        assert (tmp_path / p).read_bytes()[:4] == b"\x89PNG"


def test_cli_tracking_commands(runs, tmp_path, capsys):
    from kernelscale.pipeline.cli import main

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


def test_tables_follow_the_config(runs, tmp_path):
    """Runs the import job did not list (other configs' runs) stay in MLflow, out of the table."""
    from kernelscale.pipeline.cli import main

    root, dirs = runs
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.import_runs(uri, "t", dirs)  # an earlier, bigger config: 4 runs in MLflow
    assert main(["track", "--uri", uri, "--experiment", "t", "--parent",
                 "--out", str(tmp_path / "imp.json"), str(dirs[0]), str(dirs[2])]) == 0
    assert main(["tables", "--uri", uri, "--experiment", "t", "--runs-from",
                 str(tmp_path / "imp.json"), "--csv", str(tmp_path / "s.csv"),
                 "--md", str(tmp_path / "s.md")]) == 0
    import pandas as pd

    df = pd.read_csv(tmp_path / "s.csv")
    runs_only = df[df["algorithm"] != tables.BASELINE]
    assert list(zip(runs_only["dataset"], runs_only["seed"], strict=True)) == [("toyc", 0), ("toyr", 0)]
    assert len(tracking.search_runs(uri, "t")) == 4


def test_at_baseline_flag_and_warning(tmp_path, capsys):
    """A model that predicts the majority class is flagged in final.json, warned about in the
    log and marked in the tables; a model that learns is not."""
    import numpy as np

    from kernelscale.pipeline.train_run import at_baseline, trivial_baseline

    b = trivial_baseline("binary", np.array([0, 1, 1, 1]), np.array([1, 1, 0, 1]))
    assert b["baseline_value"] == pytest.approx(0.25) and "majority class (1)" in b["baseline"]
    r = trivial_baseline("regression", np.array([1.0, 3.0]), np.array([2.0, 4.0]))
    assert r["baseline_value"] == pytest.approx(np.sqrt((0 + 4) / 2))
    assert at_baseline(0.25, 0.25) and at_baseline(0.249, 0.25) and not at_baseline(0.2, 0.25)

    from kernelscale.pipeline import registry

    data = make_prepared(tmp_path / "data", "toyb", "binary")
    # scikit-learn's DummyClassifier predicts the training labels' majority class: exactly the
    # trivial baseline, whatever the data
    registry.register("dummy", classification="sklearn.dummy:DummyClassifier")
    try:
        spec = {"estimator": "dummy", "params": {"strategy": "most_frequent"}, "device": "cpu"}
        out = tmp_path / "results" / "runs" / "toyb" / "dummy" / "seed0"
        final = train(data, out, "dummy", spec, seed=0)
    finally:
        registry.ALGORITHMS.pop("dummy", None)
        registry.PRESETS.pop("dummy", None)
    log = capsys.readouterr().out
    assert final["value"] == pytest.approx(final["baseline_value"]) and final["at_baseline"]
    assert "WARNING: toyb/dummy/seed0 is at the trivial baseline" in log
    good_dir = tmp_path / "results" / "runs" / "toyb" / "standin" / "seed1"
    good = train(data, good_dir, "standin", SPEC, seed=1)
    assert not good["at_baseline"] and good["value"] < 0.5 * good["baseline_value"]
    assert "WARNING" not in capsys.readouterr().out
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.import_runs(uri, "t", [out, good_dir])
    df = tables.write_tables(tracking.search_runs(uri, "t"), tmp_path / "s.csv", tmp_path / "s.md")
    assert list(zip(df["algorithm"], df["at_baseline"], strict=True)) == [
        ("dummy", True), ("standin", False), (tables.BASELINE, True)]
    md = (tmp_path / "s.md").read_text()
    assert "**toyb/dummy/seed0** is at the trivial baseline" in md
    wide = md.split("## Algorithms x datasets")[1].split("## One row")[0]
    marked = [ln.split("|")[1].strip() for ln in wide.splitlines() if "⚠" in ln]
    assert marked == ["dummy"]  # the dummy's error in the wide table; not the baseline row


def test_best_exact_kernel_row(tmp_path):
    """Per dataset the exact-kernel run with the lowest error is a labelled reference row of the
    long and wide tables (the run the plots draw as their dotted line); no row without one."""
    import pandas as pd

    data = make_prepared(tmp_path / "data", "toyk", "regression", n_train=400, n_test=200)
    finals, dirs = {}, []
    # two configurations of one exact estimator under their own algorithm names, and a stand-in
    for algo, alpha in (("krr_weak", 1e-3), ("krr_strong", 1e3)):
        spec = {"estimator": "exact_krr", "params": {"reg": f"{alpha}/n", "bandwidth": "median"},
                "device": "cpu"}
        out = tmp_path / "results" / "runs" / "toyk" / algo / "seed0"
        finals[algo] = train(data, out, algo, spec, seed=0)
        dirs.append(out)
    out = tmp_path / "results" / "runs" / "toyk" / "standin" / "seed0"
    finals["standin"] = train(data, out, "standin", SPEC, seed=0)
    dirs.append(out)
    best = min(("krr_weak", "krr_strong"), key=lambda a: finals[a]["value"])
    assert finals["krr_weak"]["value"] != finals["krr_strong"]["value"]
    assert tables.best_exact_kernel(finals.values())["algorithm"] == best  # what the plot draws
    label = tables.exact_kernel_label(best)
    assert label == f"best exact kernel ({best})"

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    imported = tracking.import_runs(uri, "t", dirs)
    df = tables.write_tables(tracking.search_runs(uri, "t"), tmp_path / "s.csv", tmp_path / "s.md",
                             wide_csv_path=tmp_path / "w.csv")
    assert list(df["algorithm"]) == ["krr_strong", "krr_weak", "standin", label, tables.BASELINE]
    row = df[df["algorithm"] == label].iloc[0]
    assert row["value"] == pytest.approx(finals[best]["value"])
    assert row["estimator"] == "exact_krr" and row["metric"] == "test_rmse"
    assert row["run_id"] == df[df["algorithm"] == best]["run_id"].iloc[0]
    wide = pd.read_csv(tmp_path / "w.csv")
    assert list(wide["algorithm"]) == ["krr_strong", "krr_weak", "standin", label, tables.BASELINE]
    assert wide.set_index("algorithm").loc[label, "toyk: rmse"] == pytest.approx(
        finals[best]["value"])
    md = (tmp_path / "s.md").read_text()
    assert f"| {label}" in md and f"toyk/{label}" not in md  # a row, never a run warning

    # without an exact-kernel run (only the stand-in's): no such row
    standin_only = [r["run_id"] for r in imported if "standin" in r["key"]]
    df = tables.summary_table(tracking.search_runs(uri, "t"), run_ids=standin_only)
    assert list(df["algorithm"]) == ["standin", tables.BASELINE]
    assert not tables.wide_table(df)["algorithm"].str.startswith("best exact kernel").any()


def _distinct(c1, c2) -> bool:
    """Told apart at a glance: hues 30 degrees apart (both coloured), one grey and one
    coloured, or two greys 0.4 apart in value. tab20's light/dark pairs of one hue fail."""
    from matplotlib.colors import rgb_to_hsv, to_rgb

    (h1, s1, v1), (h2, s2, v2) = rgb_to_hsv(to_rgb(c1)), rgb_to_hsv(to_rgb(c2))
    coloured1, coloured2 = s1 > 0.15 and v1 > 0.25, s2 > 0.15 and v2 > 0.25
    if coloured1 and coloured2:
        return min(abs(h1 - h2), 1 - abs(h1 - h2)) * 360 >= 30
    return coloured1 != coloured2 or abs(v1 - v2) >= 0.4


def test_plot_styles_fixed_and_objectives_grouped(tmp_path):
    """One colour and marker per algorithm, the same in every figure, for every registered
    algorithm; members of a family (one estimators module) differ in hue and marker.
    Objectives share a panel only when they are the same function."""
    import matplotlib
    import pandas as pd

    from kernelscale.pipeline import registry
    from kernelscale.pipeline.plots import ALGORITHM_STYLES, algorithm_style, objective_signature
    from test_cli_train import STANDINS

    assert not _distinct("#1f77b4", "#aec7e8")  # what dsg / udsg had (tab20 in registry order)
    names = [n for n in registry.ALGORITHMS if n not in STANDINS]
    assert set(names) <= set(ALGORITHM_STYLES)
    assert len({algorithm_style(n)[0] for n in names}) == len(names)
    assert all(algorithm_style(n)[1] in matplotlib.lines.Line2D.filled_markers for n in names)
    # a family: the algorithms of one paper's module, the baselines together
    baselines = {f"kernelscale.estimators.{m}" for m in ("rff_sgd", "nystrom", "exact", "pegasos",
                                                          "norma")}
    families: dict[str, list[str]] = {}
    for n in names:
        module = next(iter(registry.ALGORITHMS[n].values())).split(":")[0]
        families.setdefault("baselines" if module in baselines else module, []).append(n)
    assert len(families["baselines"]) == 7
    for members in families.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                (ca, ma), (cb, mb) = algorithm_style(a), algorithm_style(b)
                assert _distinct(ca, cb) and ma != mb, (a, b)
    # a config entry under its own name: its estimator's colour, a marker of its own
    colour, marker = algorithm_style("paper_dsg_medium", "dsg")
    assert colour == algorithm_style("dsg")[0] and marker != algorithm_style("dsg")[1]
    assert algorithm_style("my_variant") == algorithm_style("my_variant")

    def run(estimator, chosen=None, **params):
        return {"final": {"estimator": estimator, "task": "binary", "chosen": chosen or {}},
                "params": {"params": {"loss": None, "reg": 1e-4, "kernel": "gaussian",
                                      **params}},
                "metrics": pd.DataFrame({"time_s": [1.0]}), "history": None}

    assert objective_signature(run("dsg")) == objective_signature(run("udsg"))
    assert objective_signature(run("dsg")) != objective_signature(run("dsg", reg=1e-3))
    assert objective_signature(run("dsg")) != objective_signature(run("dsg", loss="hinge"))
    assert objective_signature(run("dsg")) != objective_signature(run("rff_sgd"))
    # "auto" is not one function: what it chose decides
    auto = run("dsg", {"reg": 1e-5}, reg="auto")
    assert objective_signature(auto) != objective_signature(run("dsg", {"reg": 2e-5}, reg="auto"))
    assert objective_signature(auto) == objective_signature(run("udsg", {"reg": 1e-5}, reg="auto"))


def test_chosen_settings_are_recorded(tmp_path):
    """What "auto" chose is in final.json under `chosen` and in MLflow as `chosen.*` params
    (params.json and `params.*` keep "auto"), read from the fitted estimator."""
    import pickle

    from mlflow.tracking import MlflowClient

    from test_cli_train import make_prepared

    data = make_prepared(tmp_path / "data", "toyr", "regression", n_train=400, n_test=100, d=3,
                         chunk_rows=100)
    spec = {"estimator": "rff_sgd", "params": {"n_iter": 4, "n_components": 50},
            "device": "cpu", "segments": 2}
    out = tmp_path / "runs" / "toyr" / "rff" / "seed0"
    final = train(data, out, "rff", spec, seed=0)
    est = pickle.loads((out / "model.pkl").read_bytes())
    chosen = json.loads((out / "final.json").read_text())["chosen"]
    assert chosen == final["chosen"]
    assert chosen["reg"] == est.reg_ and chosen["bandwidth"] == est.bandwidth_
    assert chosen["eta0"] == est.eta0_ and chosen["n_components"] == 50
    assert chosen["iterations"] == 8 and chosen["device"] == "cpu"
    assert json.loads((out / "params.json").read_text())["params"]["reg"] == "auto"
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    [rec] = tracking.import_runs(uri, "t", [out])
    params = MlflowClient(uri).get_run(rec["run_id"]).data.params
    assert params["params.reg"] == "auto" and params["chosen.reg"] == str(est.reg_)
    assert params["chosen.bandwidth"] == str(est.bandwidth_)
    assert {f"chosen.{k}" for k in chosen} <= set(params)


def test_chosen_settings_read_solvers_and_skip_what_is_not_a_setting():
    """DSG's step size is held by its solver (``solver_.eta0``); arrays, objects and a property
    that raises are not recorded; numpy scalars become plain numbers."""
    import numpy as np

    from kernelscale.pipeline import registry
    from kernelscale.pipeline.chosen import chosen_settings

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    est = registry.make_estimator("dsg", "regression", n_iter=3, batch_size=32, block_size=16,
                                  random_state=0).fit(X, X[:, 0])
    chosen = chosen_settings(est)
    assert chosen["eta0"] == est.solver_.eta0 and est.eta0 == "auto"
    assert chosen["reg"] == est.reg_ and chosen["bandwidth"] == est.bandwidth_
    # what the other families chose: NORMA's max_terms="auto", EigenPro's subsample and spectrum
    # (its step size follows them), Random Binning's bins per grid
    expected = {"norma": {"max_terms": "max_terms_"},
                "eigenpro": {"subsample_size": "subsample_size_", "beta": "beta_",
                             "lambda_top": "lambda_top_", "lambda_next": "lambda_next_",
                             "n_eigenvectors": "n_eigenvectors_", "eta": "eta_"},
                "rb_cg": {"kappa": "kappa_", "n_features_out": "n_features_out_"}}
    params = {"norma": {"n_iter": 3, "batch_size": 16},
              "eigenpro": {"n_iter": 3, "subsample_size": 100, "n_eigenvectors": 10},
              "rb_cg": {"n_components": 16}}
    for name, attrs in expected.items():
        est = registry.make_estimator(name, "regression", random_state=0,
                                      **params[name]).fit(X, X[:, 0])
        chosen = chosen_settings(est)
        assert {k: chosen.get(k) for k in attrs} == {k: getattr(est, a) for k, a in
                                                      attrs.items()}, name
    assert chosen["kappa"] == chosen["n_features_out"] / 16

    class Fitted:
        bandwidth_ = np.float32(0.5)
        reg_ = np.array(1e-3)  # 0-d: a number
        n_components_ = np.array([1, 2])  # not a setting
        solver_ = type("S", (), {"eta0": np.int64(3)})()

        @property
        def rank_(self):
            raise AttributeError("not fitted")

    got = chosen_settings(Fitted())
    assert got == {"bandwidth": 0.5, "reg": 1e-3, "eta0": 3}
    assert all(type(v) in (float, int) for v in got.values())


def _fake_run(algorithm, estimator, values, times, *, history=None, chosen=None, params=None,
              task="binary", metric="test_error"):
    import pandas as pd

    final = {"algorithm": algorithm, "estimator": estimator, "task": task, "metric": metric,
             "seed": 0, "value": values[-1], "train_time_s": times[-1], "predict_time_s": 0.1,
             "baseline_value": 0.9, "baseline": "majority class (0)", "chosen": chosen or {}}
    metrics = pd.DataFrame({"step": range(1, len(values) + 1), "time_s": times,
                            metric: values})
    if history is not None:
        metrics["iter"] = [len(history["iter"]) * (i + 1) // len(values)
                           for i in range(len(values))]
        history = pd.DataFrame(history)
    return {"final": final, "params": {"params": params or {}}, "metrics": metrics,
            "history": history}


def test_objective_figure_values_residuals_and_towering_first_steps():
    """Panel titles give the values "auto" chose; RB-CG's residual is drawn (it records no
    objective), runs without a curve are named; Pegasos's first steps, orders of magnitude
    above the rest, do not flatten its curve: the axis leaves them out and says so."""
    import numpy as np

    from kernelscale.pipeline.plots import objective_figure

    it = np.arange(1, 201)
    peg_obj = np.concatenate([[3e4, 5e3, 800.0], 1.0 + 0.3 / np.sqrt(it[3:])])
    pegasos = _fake_run("pegasos", "pegasos", [0.3, 0.2], [1.0, 2.0],
                        history={"iter": it, "time": it / 100, "objective": peg_obj},
                        chosen={"reg": 3.125e-05, "bandwidth": 4.377},
                        params={"reg": "auto", "bandwidth": "auto"})
    cg_it = np.arange(1, 41)
    rb_cg = _fake_run("rb_cg", "rb_cg", [0.2], [5.0],
                      history={"iter": cg_it, "time": cg_it / 100, "residual": 0.7 ** cg_it},
                      chosen={"reg": 1e-4}, params={"reg": "auto", "loss": "square"})
    nystrom = _fake_run("nystrom", "nystrom", [0.25], [0.5], params={"reg": "auto"})
    fig = objective_figure([pegasos, rb_cg, nystrom], "toy")
    axes = [ax for ax in fig.axes if ax.lines]
    titles = {ax.get_title().split("\n")[0]: ax for ax in axes}
    assert set(titles) == {"pegasos", "rb_cg"}
    assert "reg=3.13e-05" in titles["pegasos"].get_title()
    assert "σ=4.38" in titles["pegasos"].get_title()
    assert "auto" not in " ".join(ax.get_title() for ax in axes)
    assert "relative residual" in titles["rb_cg"].get_ylabel()
    assert titles["rb_cg"].get_ylim()[0] <= 0.7 ** 40  # the whole residual curve is shown
    lo, hi = titles["pegasos"].get_ylim()
    assert hi < 10 and lo <= 1.0
    assert "axis fits the steps after the first 10%" in titles["pegasos"].get_ylabel()
    assert "running mean" in titles["pegasos"].get_ylabel()  # 200 per-batch values
    assert "axis fits" not in titles["rb_cg"].get_ylabel()
    assert "running mean" not in titles["rb_cg"].get_ylabel()
    assert any(t.get_text() == "no objective recorded: nystrom" for t in fig.texts)


def test_metric_axis_labels_the_best_results():
    """The error axis has a label at or below its lowest point (a 0.14 .. 0.9 log axis used to
    start labelling at 0.2, under which the best methods lay), and markers tell methods
    apart."""
    import matplotlib.pyplot as plt

    from kernelscale.pipeline.plots import algorithm_style, metric_figure

    runs = [_fake_run("dsg", "dsg", [0.5, 0.3, 0.2], [1.0, 2.0, 4.0]),
            _fake_run("udsg", "udsg", [0.45, 0.28, 0.17], [1.2, 2.5, 5.0]),
            _fake_run("exact_krr", "exact_krr", [0.14], [3.0]),
            _fake_run("nystrom", "nystrom", [0.15], [0.8])]
    fig = metric_figure(runs, "toy")
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    labelled = [float(t.get_text()) for t in ax.get_yticklabels()
                if t.get_text() and lo <= t.get_position()[1] <= hi]
    assert ax.get_yscale() == "log" and min(labelled) <= 0.14 and max(labelled) >= 0.9
    assert len([v for v in labelled if v < 0.2]) >= 2, labelled  # 0.1 and 0.15
    markers = {ln.get_label(): ln.get_marker() for ln in ax.lines}
    assert markers["dsg"] == algorithm_style("dsg")[1] != markers["udsg"]
    plt.close(fig)
