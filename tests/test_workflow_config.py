"""kernelscale.pipeline.{configuration,runs,provenance,recovery}: the config checks, the run list and
the run-time helpers the Snakefile uses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from kernelscale.pipeline import configuration, provenance, recovery, registry, runs

ROOT = Path(__file__).resolve().parents[1]

BASE = {
    "datasets": {"a": {"task": "binary", "sklearn": "breast_cancer"},
                 "r": {"task": "regression", "sklearn": "diabetes"}},
    "algorithms": {"dsg": {"estimator": "dsg", "params": {"n_iter": 5}, "device": "cpu"},
                   "big": {"estimator": "dsg", "device": "gpu",
                           "resources": {"threads": 4, "mem_mb": 9000}}},
    "experiments": [{"datasets": ["a", "r"], "algorithms": ["dsg"], "seeds": [0, 1]},
                    {"datasets": ["a"], "algorithms": ["dsg", "big"], "seeds": [1]}],
}


def test_runs_are_the_union_without_duplicates():
    assert runs.runs(BASE) == [("a", "dsg", 0), ("a", "dsg", 1), ("r", "dsg", 0),
                                   ("r", "dsg", 1), ("a", "big", 1)]
    assert runs.run_datasets(BASE) == ["a", "r"]
    assert runs.final_files(BASE, "r") == ["results/runs/r/dsg/seed0/final.json",
                                                "results/runs/r/dsg/seed1/final.json"]


def test_specs_and_resources():
    spec = json.loads(runs.algorithm_spec_json(BASE, "dsg"))
    assert spec == {"estimator": "dsg", "params": {"n_iter": 5}, "device": "cpu", "segments": 10,
                    "step_test_rows": 10000}
    assert runs.train_resources(BASE, "dsg") == {"threads": 1, "mem_mb": 2000,
                                                     "runtime": 60, "gpu": 0}
    res = runs.train_resources({**BASE, "resources": {"train": {"runtime": 5}}}, "big")
    assert res == {"threads": 4, "mem_mb": 9000, "runtime": 5, "gpu": 1}
    assert provenance.conda_env(BASE, "big", "/w").endswith("envs/gpu.yaml")
    assert configuration.tracking({}) == {"uri": "sqlite:///results/mlflow.db",
                                     "experiment": "kernelscale"}


def test_semantic_errors_name_the_key():
    assert configuration.semantic_errors(BASE) == []
    c = copy.deepcopy(BASE)
    c["experiments"][0]["datasets"].append("zz")
    c["experiments"][1]["algorithms"].append("yy")
    c["algorithms"]["dsg"]["estimator"] = "nope"
    errs = configuration.semantic_errors(c)
    assert all("\n" not in e for e in errs)
    assert any(e.startswith("config.yaml: experiments.0.datasets: unknown dataset 'zz'")
               for e in errs)
    assert any(e.startswith("config.yaml: experiments.1.algorithms: unknown algorithm 'yy'")
               for e in errs)
    assert any(e.startswith("config.yaml: algorithms.dsg.estimator: unknown estimator 'nope'")
               for e in errs)
    with pytest.raises(configuration.ConfigError):
        configuration.check(c)


def test_schema_error_line():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    schema["properties"]["datasets"] = {"type": "object"}
    bad = copy.deepcopy(BASE)
    bad["algorithms"]["dsg"]["device"] = "tpu"
    with pytest.raises(jsonschema.ValidationError) as e:
        jsonschema.validate(bad, schema)
    line = configuration.schema_error_line(RuntimeError("wrapped", e.value))
    assert line.startswith("config.yaml: algorithms.dsg.device: 'tpu' is not one of")
    assert "\n" not in line


def test_shipped_config_is_valid_and_runs_every_registered_algorithm(capsys):
    from kernelscale.pipeline.cli import main

    assert main(["check-config", str(ROOT / "config.yaml"), "--schema",
                 str(ROOT / "workflow/schemas/config.schema.yaml")]) == 0
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    used = {config["algorithms"][a]["estimator"] for _, a, _ in runs.runs(config)}
    shipped = {n for n in registry.ALGORITHMS if n not in ("standin", "oneshot")}  # test stand-ins
    assert shipped <= used, f"registered but not in the default experiment: {shipped - used}"
    assert len(runs.run_datasets(config)) >= 3


def test_check_config_cli_reports_one_line(tmp_path, capsys):
    from kernelscale.pipeline.cli import main

    c = copy.deepcopy(BASE)
    c["experiments"][0]["seeds"] = ["x"]
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(c))
    with pytest.raises(SystemExit) as e:
        main(["check-config", str(p), "--schema", str(ROOT / "workflow/schemas/config.schema.yaml")])
    assert str(e.value) == f"{p}: experiments.0.seeds.0: 'x' is not of type 'integer'"


def test_check_config_merges_files_and_names_the_one_with_the_mistake(tmp_path, capsys):
    from kernelscale.pipeline.cli import main

    schema = str(ROOT / "workflow/schemas/config.schema.yaml")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(BASE))
    b.write_text(yaml.safe_dump({"algorithms": {"dsg": {"device": "tpu"}}}))
    with pytest.raises(SystemExit) as e:
        main(["check-config", str(a), str(b), "--schema", schema])
    assert str(e.value).startswith(f"{b}: algorithms.dsg.device: 'tpu' is not one of")
    b.write_text(yaml.safe_dump({"algorithms": {"dsg": {"device": "cpu"}}}))
    assert main(["check-config", str(a), str(b), "--schema", schema]) == 0
    assert capsys.readouterr().out.strip() == f"{a} + {b}: ok"
    configuration.set_config_files([])


def test_bench_target_passes_the_config_to_kernelscale_bench(tmp_path):
    import subprocess
    import sys

    assert runs.bench_args({}) == ""
    assert runs.bench_args({"bench": {"sections": ["blocks", "memory"], "quick": True,
                                          "huge": False, "n_train": 20000}}) == \
        "--sections blocks memory --n-train 20000 --quick"
    from kernelscale.pipeline.cli import main

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    bad = tmp_path / "c.yaml"
    bad.write_text(yaml.safe_dump({**config, "bench": {"sections": ["nope"]}}))
    with pytest.raises(SystemExit, match=r"bench\.sections"):
        main(["check-config", str(bad), "--schema",
              str(ROOT / "workflow/schemas/config.schema.yaml")])
    override = tmp_path / "bench.yaml"
    override.write_text("bench: {quick: true, sections: [blocks]}\n")
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "bench", "--cores", "1",
                        "--forcerun", "bench", "--configfile", "config.yaml", str(override)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    cmd = [ln for ln in (r.stdout + r.stderr).splitlines() if "kernelscale.pipeline.cli bench" in ln]
    assert cmd and "--sections blocks --quick" in cmd[0] and "--tracking-uri" in cmd[0]


def test_todo_checksums_block_no_experiment():
    """config/papers.yaml merged into config.yaml validates, and still does when an experiment
    names a dataset whose checksum is TODO: its download trusts and pins the first copy
    (data.download), so no other dataset's runs wait on it."""
    from snakemake.utils import update_config

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    papers = yaml.safe_load((ROOT / "config" / "papers.yaml").read_text())
    update_config(config, papers)
    configuration.set_config_files(["config.yaml"], ["config.yaml", "config/papers.yaml"])
    try:
        assert configuration.semantic_errors(config) == []
        todo = next(n for n, s in papers["datasets"].items()
                    if "TODO" in str(s.get("sha256", "")))
        config["experiments"].append({"datasets": [todo], "algorithms": ["dsg"], "seeds": [0]})
        assert configuration.semantic_errors(config) == []
        config["datasets"][todo]["sha256"] = "TODO"  # anything else is still an error
        [line] = configuration.semantic_errors(config)
        assert line.startswith(f"config/papers.yaml: datasets.{todo}.sha256: must be 64 hex")
    finally:
        configuration.set_config_files([])


def test_missing_local_files_skip_only_their_runs(tmp_path, monkeypatch):
    """A `path:` dataset marked optional whose file is absent (licensed data not there yet) is
    taken out of the experiments with one line; the other datasets' runs stay. No run left is an
    error. Without the mark the same absence is an error (``missing_file_errors``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.npz").write_bytes(b"x")
    config = copy.deepcopy(BASE)
    config["datasets"]["lic"] = {"task": "binary", "path": "gone.npz", "test_path": "here.npz",
                                 "format": "npz"}
    config["datasets"]["ok"] = {"task": "binary", "path": "here.npz", "format": "npz"}
    config["experiments"][0]["datasets"] += ["lic", "ok"]
    assert runs.missing_local_files(config) == {}
    assert any("datasets.lic.path: gone.npz: no such file" in e
               for e in configuration.missing_file_errors(config, tmp_path))
    config["datasets"]["lic"]["optional"] = True
    assert configuration.missing_file_errors(config, tmp_path) == []
    assert runs.missing_local_files(config) == {"lic": ["gone.npz"]}
    [line] = configuration.skip_missing_datasets(config)
    assert "datasets.lic: gone.npz not found; its 2 run(s) are skipped" in line
    assert "lic" not in runs.run_datasets(config) and "ok" in runs.run_datasets(config)
    assert configuration.skip_missing_datasets(config) == []
    only = {**config, "experiments": [{"datasets": ["lic"], "algorithms": ["dsg"]}]}
    with pytest.raises(configuration.ConfigError, match="no run left to do"):
        configuration.skip_missing_datasets(only)


def test_paper_configs_build_their_dag():
    """`snakemake -n` of each paper config builds the whole DAG offline: datasets with TODO
    checksums get download jobs, absent licensed files only skip their own runs."""
    import subprocess
    import sys

    for paper, skipped in (("dsg", ()), ("rb", ()), ("eigenpro", ("cifar10", "timit"))):
        r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                            "--configfile", "config.yaml", "config/papers.yaml",
                            f"config/papers/{paper}.yaml"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-2000:]
        assert [ln.split(": ")[2] for ln in out.splitlines() if "run(s) are skipped" in ln] \
            == [f"datasets.{d}" for d in skipped]
        jobs = {ln.split()[0]: int(ln.split()[1]) for ln in out.splitlines()
                if len(ln.split()) == 2 and ln.split()[1].isdigit()}
        assert jobs.get("download", 0) > 0 and jobs.get("train", 0) > 0, out[-2000:]


def test_errors_name_the_config_file_holding_the_key(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(BASE))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(
        {"algorithms": {"dsg": {"estimator": "nope"}}}))
    a, b = str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")
    configuration.set_config_files([a], [a, b])
    try:
        config = copy.deepcopy(BASE)
        config["algorithms"]["dsg"]["estimator"] = "nope"  # as Snakemake merges b over a
        errors = configuration.semantic_errors(config)
        assert len(errors) == 1 and errors[0].startswith(
            f"{b}: algorithms.dsg.estimator: unknown estimator 'nope'")
        assert configuration.config_file_of(("experiments", 0, "datasets")) == a
        # the Snakefile's own config.yaml loses to --configfile files holding the same key
        configuration.set_config_files([a, b], [b])
        assert configuration.config_file_of(("algorithms", "dsg")) == b
    finally:
        configuration.set_config_files([])
    assert configuration.config_file_of(("algorithms",)) == "config.yaml"


def test_failed_job_lines(tmp_path):
    log = tmp_path / "results" / "logs" / "train" / "x" / "dsg" / "seed0.log"
    log.parent.mkdir(parents=True)
    log.write_text("train x/dsg/seed0: ...\nkernelscale train: error: ValueError: bad thing\n")
    smk_log = tmp_path / "snakemake.log"
    smk_log.write_text(f"""[Mon]
Error in rule train:
    message: None
    jobid: 4
    input: results/data/x/meta.json
    output: results/runs/x/dsg/seed0/final.json
    log: {log} (check log file(s) for error details)
    shell:
        python -m kernelscale.pipeline.cli train --spec '{{"a": 1}}' > {log} 2>&1
""")
    assert recovery.failed_job_lines([smk_log]) == [
        "failed: rule train (x/dsg; config algorithms.dsg in config.yaml): kernelscale train: "
        f"error: ValueError: bad thing [log: {log}]"]
    assert recovery.failed_job_lines(tmp_path / "missing.log") == []


@pytest.mark.parametrize("report,cause", [
    ("returned non-zero exit status 137.", "killed by SIGKILL (out of memory, or kill -9)"),
    ("died with <Signals.SIGTERM: 15>.", "killed by SIGTERM"),
    ("returned non-zero exit status 1.", "train x/dsg/seed0: segment 3/5 test_error=0.12"),
])
def test_failed_job_line_of_a_killed_job_says_it_was_killed(tmp_path, report, cause):
    """A killed job's log ends with a progress line: the line names the signal instead."""
    log = tmp_path / "seed0.log"
    log.write_text("train x/dsg/seed0: segment 3/5 test_error=0.12\n")
    smk_log = tmp_path / "snakemake.log"
    smk_log.write_text(f"""RuleException:
CalledProcessError in file "Snakefile", line 3:
Command 'set -euo pipefail;  python -m kernelscale.pipeline.cli train' {report}
[Mon]
Error in rule train:
    jobid: 4
    log: {log} (check log file(s) for error details)
""")
    assert recovery.failed_job_lines([smk_log]) == [f"failed: rule train: {cause} [log: {log}]"]


def test_a_lock_held_by_a_running_snakemake_is_one_line(tmp_path):
    """A second `make run` beside a running one (the Makefile asks before snakemake starts)."""
    import subprocess
    import sys
    import time

    assert recovery.held_lock_line(tmp_path) is None  # no lock
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.output.lock").write_text("results/x\n")
    assert recovery.held_lock_line(tmp_path) is None  # a stale lock: `repair` removes it
    fake = tmp_path / "snakemake"  # a process named snakemake working in tmp_path
    fake.write_text("import time\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(fake)], cwd=tmp_path)
    try:
        time.sleep(0.2)
        line = recovery.held_lock_line(tmp_path)
    finally:
        proc.kill()
        proc.wait()
    assert line == (f"kernelscale: another snakemake (pid {proc.pid}) runs in {tmp_path.resolve()}"
                    " and holds its lock: wait for it or stop it; if it is no run of this "
                    "workflow, clear the lock with `.venv/bin/snakemake --unlock`")


@pytest.mark.parametrize("paper", ["dsg", "rb", "eigenpro"])
def test_paper_experiment_files_validate(paper, capsys):
    """config/papers/<paper>.yaml merged over config.yaml and config/papers.yaml passes the
    schema and the name checks (TODO checksums and the licensed datasets, marked optional,
    included)."""
    from kernelscale.pipeline.cli import main

    files = ["config.yaml", "config/papers.yaml", f"config/papers/{paper}.yaml"]
    schema = str(ROOT / "workflow/schemas/config.schema.yaml")
    rc = main(["check-config", *(str(ROOT / f) for f in files), "--schema", schema])
    assert rc == 0, capsys.readouterr().err


def test_shared_params_give_every_run_algorithm_one_objective(tmp_path):
    """A top-level ``params: {reg: ...}`` reaches every algorithm an experiment runs (an entry's
    own value wins); one that has no such parameter is an error naming both, not a silent skip."""
    config = copy.deepcopy(BASE)
    config["params"] = {"reg": 1e-5}
    config["algorithms"]["rff"] = {"estimator": "rff_sgd", "params": {"reg": 3e-4}}
    config["algorithms"]["ep"] = {"estimator": "eigenpro"}
    config["experiments"].append({"datasets": ["r"], "algorithms": ["rff"]})
    assert runs.algorithm_spec(config, "dsg")["params"] == {"reg": 1e-5, "n_iter": 5}
    assert runs.algorithm_spec(config, "rff")["params"] == {"reg": 3e-4}
    assert configuration.semantic_errors(config) == []  # "ep" is not run: nothing to give it
    config["experiments"].append({"datasets": ["r"], "algorithms": ["ep"]})
    [line] = configuration.semantic_errors(config)
    assert line.startswith("config.yaml: params.reg (shared, given to algorithms.ep): "
                           "unknown parameter for eigenpro")
    # RB-CD's L1 weight is l1_reg: a shared ridge reg is refused there too
    config["algorithms"]["cd"] = {"estimator": "rb_cd"}
    config["experiments"][-1]["algorithms"] = ["cd"]
    [line] = configuration.semantic_errors(config)
    assert line == ("config.yaml: params.reg (shared, given to algorithms.cd): 1e-05 is only "
                    "used with solver='cg' (here solver='cd'); leave it at its default 'auto'")
    config["params"] = {"alpha": 1.0}
    lines = configuration.semantic_errors(config)
    assert lines and all("params.alpha (shared" in ln and "unknown parameter" in ln for ln in lines)


def test_engine_options_in_a_config_entry():
    spec = {"estimator": "dsg", "params": {"engine": {"memory_budget": 100}}, "device": "cpu"}
    from kernelscale.pipeline.checks import spec_errors
    from kernelscale.pipeline.train_run import build_estimator

    assert spec_errors("algorithms.x", spec) == []
    est, device = build_estimator(spec, "binary", seed=3)
    assert est.engine == {"memory_budget": 100, "device": "cpu"} and device == "cpu"
    assert est.random_state == 3 and est.warm_start is True
    bad = {**spec, "params": {"engine": {"device": "gpu"}}}
    assert "set the entry's own key instead" in spec_errors("algorithms.x", bad)[0]
    bad = {**spec, "params": {"engine": {"dtype": "float16"}}}
    assert spec_errors("algorithms.x", bad)[0].startswith(
        "algorithms.x.params.engine.dtype='float16' must be")


def _with_local_dataset(path, used=True):
    c = copy.deepcopy(BASE)
    c["datasets"]["mine"] = {"task": "binary", "path": str(path), "format": "libsvm"}
    if used:
        c["experiments"][0]["datasets"].append("mine")
    return c


def test_a_missing_local_dataset_file_is_one_line_before_the_dag(tmp_path):
    """`path:` naming no file: one line with the key and the file (Snakemake: 27 lines of
    MissingInputException for rule prepare once the DAG is built)."""
    missing = tmp_path / "nowhere" / "a9a.libsvm"
    assert configuration.semantic_errors(_with_local_dataset(missing)) == [
        f"config.yaml: datasets.mine.path: {missing}: no such file"]
    assert configuration.semantic_errors(_with_local_dataset(missing, used=False)) == []  # a catalogue
    assert configuration.missing_file_errors(_with_local_dataset("data/a.libsvm"), tmp_path) == [
        f"config.yaml: datasets.mine.path: data/a.libsvm: no such file (relative to {tmp_path})"]
    (tmp_path / "data" / "a.libsvm").mkdir(parents=True)
    assert configuration.missing_file_errors(_with_local_dataset("data/a.libsvm"), tmp_path) == [
        "config.yaml: datasets.mine.path: data/a.libsvm: is a folder, expected a file "
        f"(relative to {tmp_path})"]
    (tmp_path / "data" / "a.libsvm").rmdir()
    (tmp_path / "data" / "a.libsvm").write_text("1 1:0.5\n")
    assert configuration.missing_file_errors(_with_local_dataset("data/a.libsvm"), tmp_path) == []
    c = _with_local_dataset(tmp_path / "data" / "a.libsvm")
    c["datasets"]["mine"]["test_path"] = "data/test.libsvm"
    assert [e.split(": ")[1] for e in configuration.missing_file_errors(c, tmp_path)] == [
        "datasets.mine.test_path"]


def test_config_file_empty_or_not_a_mapping_is_one_line(tmp_path):
    for text, words in [("", "the file is empty; expected a mapping"),
                        ("# nothing but a comment\n", "the file is empty"),
                        ("- a\n- b\n", "expected a mapping (datasets:, algorithms:, "
                                       "experiments:, ...) at the top level, got list")]:
        (tmp_path / "c.yaml").write_text(text)
        with pytest.raises(ValueError) as e:
            configuration.load_config_checked(tmp_path / "c.yaml")
        assert str(e.value).startswith(f"{tmp_path / 'c.yaml'}: {words}"), str(e.value)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"none\.yaml: no such file$"):
        configuration.load_config_checked(tmp_path / "none.yaml")
    (tmp_path / "c.yaml").write_text("datasets: {}\n")
    assert configuration.load_config_checked(tmp_path / "c.yaml") == {"datasets": {}}


def test_read_only_results_is_one_line(tmp_path):
    """A results folder (or a folder in it, or the MLflow file) the workflow cannot write:
    one line naming it, instead of Snakemake's ProtectedOutputException or a job failing
    to create its output folder after other jobs have run."""
    from test_faults import read_only

    work = tmp_path / "work"
    work.mkdir()
    c = copy.deepcopy(BASE)
    assert recovery.unwritable_output_line(c, work) is None  # results/ is created by the run
    results = work / "results"
    (results / "tracking").mkdir(parents=True)
    store = results / "data" / "a" / "data.zarr" / "c"
    store.mkdir(parents=True)
    assert recovery.unwritable_output_line(c, work) is None
    with read_only(results):
        line = recovery.unwritable_output_line(c, work)
    assert line.startswith("kernelscale: results: read-only folder where the workflow "
                           "writes; nothing has run"), line
    with read_only(results / "tracking"):
        line = recovery.unwritable_output_line(c, work)
    assert line.startswith("kernelscale: results/tracking: read-only folder where"), line
    with read_only(store):  # inside a Zarr store: prepare replaces the whole folder
        assert recovery.unwritable_output_line(c, work) is None
    elsewhere = tmp_path / "store"  # outside the working directory: named in full
    c["tracking"] = {"uri": f"sqlite:///{elsewhere}/m.db"}
    with read_only(elsewhere):
        line = recovery.unwritable_output_line(c, work)
    assert line.startswith(f"kernelscale: {elsewhere}: read-only folder"), line
