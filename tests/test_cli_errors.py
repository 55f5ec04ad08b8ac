"""Every CLI and config error is one line about the problem in the user's words (key, file,
value, expected), never a Python exception class name; nonsense numbers are refused; a command
that produced nothing useful exits non-zero and leaves no output."""

from __future__ import annotations

import json
import re

import pytest

from kernelscale.pipeline.cli import main
from test_cli_train import make_prepared, standins  # noqa: F401

# Python's exception class names a user must never see
CLASS_NAMES = re.compile(r"\b(\w*Error|\w*Exception|Traceback|KeyError|JSONDecodeError)\b")


def run(argv, capsys, expect_rc=1) -> str:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse usage errors exit 2
        rc = e.code
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.strip().splitlines() if ln.strip()]
    assert rc == expect_rc, captured.err
    assert len(lines) == 1, captured.err
    assert not CLASS_NAMES.search(lines[0]), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory, standins):  # noqa: F811
    return make_prepared(tmp_path_factory.mktemp("d"), "toy", "binary", n_train=1000, n_test=200)


def _train(data, out, spec, *extra):
    return ["train", "--data", str(data), "--out", str(out), "--algorithm", "a",
            "--spec", spec if isinstance(spec, str) else json.dumps(spec), *extra]


DSG = {"estimator": "dsg", "params": {"n_iter": 2}, "segments": 1}

# (argv tail or spec, words the line must contain)
SPEC_CASES = [
    ("{", ["--spec", "not valid JSON", "expected"]),
    ("[1, 2]", ["--spec", "expected a mapping", "list"]),
    ({"params": {}}, ["missing key 'estimator'", "dsg"]),
    ({"estimator": "dsg", "params": [["n_iter", 3]]}, ["--spec.params", "expected a mapping"]),
    ({"estimator": "nope"}, ["--spec.estimator", "unknown estimator 'nope'"]),
    ({"estimator": "dsg", "params": {"n_iter": 0}}, ["params.n_iter", "0", ">= 1"]),
    ({"estimator": "dsg", "params": {"batch_size": -4}}, ["params.batch_size", ">= 1"]),
    ({"estimator": "dsg", "params": {"n_iter": 2.5}}, ["params.n_iter", "integer"]),
    ({"estimator": "dsg", "params": {"bandwidth": -1.0}}, ["params.bandwidth", "> 0"]),
    ({"estimator": "dsg", "params": {"reg": float("nan")}}, ["params.reg", "finite"]),
    ({"estimator": "dsg", "params": {"bogus": 1}}, ["params.bogus", "unknown parameter for dsg"]),
    ({"estimator": "dsg", "params": {"block_size": 100_000_000}},
     ["needs at least", "block_size", "memory here"]),
    ({"estimator": "dsg", "params": {"block_size": 1e8}}, ["needs at least", "block_size"]),
    ({"estimator": "rb_cg", "params": {"n_components": 100_000_000}},
     ["needs at least", "n_components", "memory here"]),
    ({"estimator": "nystrom", "params": {"n_components": 10_000_000}},
     ["needs at least", "n_components"]),
    ({**DSG, "segments": 0}, ["--spec.segments", ">= 1"]),
    ({**DSG, "device": "tpu"}, ["--spec.device", "'tpu'", "auto, cpu, gpu"]),
    ({"estimator": "libsvm", "device": "gpu"}, ["--spec.device", "libsvm runs on the CPU only"]),
    ({**DSG, "step_test_rows": -1}, ["step_test_rows", ">= 0"]),
    ({"estimator": "dsg", "params": {"kernel": "rbff"}}, ["--spec.params.kernel", "'rbff'", "rbf"]),
    ({"estimator": "rff_sgd", "params": {"n_components": 1000, "engine": {"memory_budget": 0.1}}},
     ["--spec.params.engine.memory_budget", "too small for one batch", "needs at least"]),
]


@pytest.mark.parametrize("spec,words", SPEC_CASES, ids=range(len(SPEC_CASES)))
def test_bad_spec_is_one_line_and_trains_nothing(data, tmp_path, capsys, spec, words):
    line = run(_train(data, tmp_path / "run", spec), capsys)
    assert line.startswith("kernelscale train: error: ")
    for w in words:
        assert w in line, line
    assert not (tmp_path / "run" / "metrics.csv").exists()


@pytest.mark.skipif(__import__("kernelscale.backend").backend.gpu_available(),
                    reason="a GPU is present")
def test_gpu_train_job_on_a_host_without_gpu_is_one_line(data, tmp_path, capsys):
    """`device: gpu` on a CPU-only node stops with one line, never a silent CPU run."""
    line = run(_train(data, tmp_path / "run", {**DSG, "device": "gpu"}), capsys)
    assert "device='gpu'" in line and "no usable CUDA GPU" in line, line
    assert not (tmp_path / "run" / "metrics.csv").exists()


OPTION_CASES = [
    (["--threads", "-3"], "argument --threads: -3 must be >= 0"),
    (["--eval-chunk-rows", "-5"], "argument --eval-chunk-rows: -5 must be >= 1"),
    (["--eval-chunk-rows", "0"], "argument --eval-chunk-rows: 0 must be >= 1"),
    (["--seed", "-1"], "argument --seed: -1 must be >= 0"),
    (["--stop-after", "x"], "argument --stop-after: 'x' is not an integer"),
    (["--dask-workers", "0"], "argument --dask-workers: 0 must be >= 1"),
]


@pytest.mark.parametrize("extra,expected", OPTION_CASES, ids=range(len(OPTION_CASES)))
def test_nonsense_numeric_options_are_refused(data, tmp_path, capsys, extra, expected):
    line = run(_train(data, tmp_path / "run", DSG, *extra), capsys, expect_rc=2)
    assert expected in line


def test_data_stage_options_are_checked_too(tmp_path, capsys):
    line = run(["prepare", "--dataset", "x", "--spec-json", "{}", "--out", str(tmp_path),
                "--threads", "0"], capsys, expect_rc=2)
    assert "argument --threads: 0 must be >= 1" in line


def test_missing_dataset_and_broken_meta(tmp_path, capsys):
    line = run(_train(tmp_path / "nowhere", tmp_path / "run", DSG), capsys)
    assert "meta.json not found" in line
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "meta.json").write_text("{oops")
    line = run(_train(tmp_path / "broken", tmp_path / "run", DSG), capsys)
    assert "meta.json is not valid JSON" in line and "re-run prepare" in line


def test_tables_for_an_unknown_or_empty_experiment_fails_and_writes_nothing(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    csv, md = tmp_path / "t" / "s.csv", tmp_path / "t" / "s.md"
    assert main(["tracking-init", "--uri", uri, "--experiment", "empty"]) == 0
    capsys.readouterr()
    line = run(["tables", "--uri", uri, "--experiment", "nope", "--csv", str(csv),
                "--md", str(md)], capsys)
    assert "experiment 'nope' does not exist" in line
    line = run(["tables", "--uri", uri, "--experiment", "empty", "--csv", str(csv),
                "--md", str(md)], capsys)
    assert "experiment 'empty' has no runs" in line
    assert not csv.exists() and not md.exists()


def test_track_names_a_damaged_run_record(data, tmp_path, capsys):
    run_dir = tmp_path / "runs" / "toy" / "a" / "seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "final.json").write_text("")  # e.g. a full disk
    line = run(["track", "--uri", f"sqlite:///{tmp_path}/m.db", "--experiment", "x",
                str(run_dir)], capsys)
    assert "final.json is not valid JSON" in line and str(run_dir) in line


CONFIG_CASES = [
    ("datasets: {a: 1\nalgorithms: {}\n", ["bad.yaml:2:", "not valid YAML"]),
    ("- just\n- a list\n", ["expected a mapping", "list"]),
    ("", ["bad.yaml: the file is empty; expected a mapping"]),  # snakemake refuses it too
    ("algorithms:\n  dsg: {estimator: dsg, params: {n_iter: 0}}\n",
     ["algorithms.dsg.params.n_iter: 0 must be 'auto', an integer >= 1"]),
    ("algorithms:\n  rb: {estimator: rb_cg, params: {n_components: 100000000}}\n",
     ["algorithms.rb", "needs at least", "n_components"]),
    ("algorithms:\n  dsg: {estimator: dsg, params: {block_size: 100000000}}\n",
     ["algorithms.dsg", "needs at least", "block_size"]),
    # found here, not in the train job after prepare
    ("algorithms:\n  dsg: {estimator: dsg, params: {kernel: rbff}}\n",
     ["algorithms.dsg.params.kernel: 'rbff' must be 'gaussian', 'rbf'"]),
    ("algorithms:\n  dsg: {estimator: dsg, params: {batch_size: 2048, block_size: 256, engine: {memory_budget: 1}}}\n",
     ["algorithms.dsg.params.engine.memory_budget", "too small for one batch", "x 10 features"]),
    ("tracking:\n  uri: postgresql://user:secret@host/db\n",
     ["tracking.uri: scheme 'postgresql' needs the driver module 'psycopg2'"]),
]


@pytest.mark.parametrize("text,words", CONFIG_CASES, ids=range(len(CONFIG_CASES)))
def test_check_config_names_the_file_line_and_key(tmp_path, capsys, text, words):
    import yaml

    base = yaml.safe_load(open("config.yaml"))
    path = tmp_path / "bad.yaml"
    if text.startswith("algorithms:"):  # a valid config with one algorithm entry replaced
        entry = yaml.safe_load(text)["algorithms"]
        name = next(iter(entry))
        base["algorithms"][name] = entry[name]
        # on the generated set: its size is in the config, so n_train-sized terms are checked
        base["experiments"] = [{"datasets": ["synth_reg"], "algorithms": [name], "seeds": [0]}]
        path.write_text(yaml.safe_dump(base))
    elif text.startswith("tracking:"):
        base["tracking"].update(yaml.safe_load(text)["tracking"])
        path.write_text(yaml.safe_dump(base))
    else:
        path.write_text(text)
    try:
        rc = main(["check-config", str(path)])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1, err
    assert not CLASS_NAMES.search(err), err
    for w in words:
        assert w in err, err
    assert "secret" not in err  # a password in the URI is never printed


def test_missing_config_file(tmp_path, capsys):
    line = run(["check-config", str(tmp_path / "none.yaml")], capsys)
    assert "none.yaml: no such file" in line
    line = run(["prepare", "--dataset", "x", "--config", str(tmp_path / "none.yaml"),
                "--out", str(tmp_path / "o")], capsys)
    assert "config file not found" in line
    (tmp_path / "bad.yaml").write_text("datasets:\n  x: [1,\n")
    line = run(["prepare", "--dataset", "x", "--config", str(tmp_path / "bad.yaml"),
                "--out", str(tmp_path / "o")], capsys)
    assert "bad.yaml:3:" in line and "not valid YAML" in line
