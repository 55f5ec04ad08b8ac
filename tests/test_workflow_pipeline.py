"""The Snakemake workflow end to end on a tiny config, in a copy of the workflow in a tmp dir.

Training uses the stand-in estimators of test_cli_train (registered in every process of the run
through a sitecustomize on PYTHONPATH), so these tests check the workflow, not the solvers.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

TINY = {
    "datasets": {
        "tiny_clf": {"task": "multiclass",
                     "generator": {"name": "classification", "n_samples": 3000, "n_features": 6,
                                   "n_informative": 4, "n_classes": 3, "seed": 1},
                     "split": {"test_size": 0.25, "seed": 0}, "chunk_rows": 500},
        "tiny_reg": {"task": "regression",
                     "generator": {"name": "regression", "n_samples": 2000, "n_features": 4,
                                   "noise": 0.1, "seed": 2},
                     "split": {"test_size": 0.25, "seed": 0}, "chunk_rows": 500},
    },
    "algorithms": {
        "standin": {"estimator": "standin", "params": {"n_iter": 2}, "device": "cpu",
                    "segments": 3},
        "oneshot": {"estimator": "oneshot", "device": "cpu"},
    },
    "experiments": [
        {"datasets": ["tiny_clf", "tiny_reg"], "algorithms": ["standin"], "seeds": [0, 1]},
        {"datasets": ["tiny_reg"], "algorithms": ["oneshot"]},
    ],
    "tracking": {"experiment": "tiny"},
}
N_RUNS = 5


def data_stage_has_rules() -> bool:
    return (ROOT / "workflow" / "rules" / "prepare.smk").exists()


def make_workdir(tmp: Path, config: dict) -> tuple[Path, dict]:
    """Copy the workflow into ``tmp``, write the config, prepared data (unless the data stage's
    rules will make it) and a sitecustomize registering the stand-in estimators."""
    shutil.copy(ROOT / "Snakefile", tmp / "Snakefile")
    shutil.copytree(ROOT / "workflow", tmp / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "envs", tmp / "envs")
    shutil.copytree(ROOT / "profiles", tmp / "profiles")  # rerun-incomplete etc.
    (tmp / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        import test_cli_train
        test_cli_train.register_standins()
        """))
    if not data_stage_has_rules():
        from test_cli_train import make_prepared

        for name, spec in config["datasets"].items():
            g = spec["generator"]
            n_test = int(g["n_samples"] * spec["split"]["test_size"])
            make_prepared(tmp / "results" / "data", name, spec["task"],
                          n_train=g["n_samples"] - n_test, n_test=n_test, d=g["n_features"])
    # the caller's PYTHONPATH stays behind the sitecustomize (a checkout other than the one the
    # venv installed is tested through it)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}
    env.pop("KERNELSCALE_TRACEBACK", None)
    return tmp, env


def smk(workdir: Path, env: dict, *args, check=True, timeout=600):
    r = subprocess.run([*SNAKEMAKE, *args], cwd=workdir, env=env, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{r.stdout[-3000:]}\n"
                             f"{r.stderr[-5000:]}")
    return r


def repair(workdir: Path, env: dict) -> subprocess.CompletedProcess:
    """What `make run` runs before snakemake (`kernelscale repair config.yaml`)."""
    r = subprocess.run([sys.executable, "-m", "kernelscale.pipeline.cli", "repair"], cwd=workdir,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_lint_is_clean():
    r = subprocess.run([*SNAKEMAKE, "--lint"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Lints for" not in r.stdout + r.stderr


def test_default_config_dry_run():
    """The shipped config.yaml validates and plans every (dataset, algorithm, seed)."""
    from kernelscale.pipeline import runs as pipeline

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    runs = pipeline.runs(config)
    assert len({d for d, _, _ in runs}) >= 3
    if not data_stage_has_rules():
        pytest.skip("the data stage's rules (workflow/rules/prepare.smk) are not there yet")
    r = subprocess.run([*SNAKEMAKE, "-n", "--cores", "2", "--directory", str(ROOT)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for d, a, s in runs:
        assert f"results/runs/{d}/{a}/seed{s}/final.json" in out or "Nothing to be done" in out


def test_papers_catalogue_merges_into_a_dry_run():
    """config/papers.yaml (datasets with TODO checksums, named by no experiment) merged with
    config.yaml: the dry run plans the default experiment instead of failing on checksums."""
    if not data_stage_has_rules():
        pytest.skip("the data stage's rules (workflow/rules/prepare.smk) are not there yet")
    r = subprocess.run([*SNAKEMAKE, "-n", "--cores", "2", "--configfile", "config.yaml",
                        "config/papers.yaml"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "TODO" not in out and "covtype" not in out


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    workdir, env = make_workdir(tmp_path_factory.mktemp("wf"), TINY)
    r = smk(workdir, env, "--cores", "2")
    return workdir, env, r


@pytest.mark.slow
def test_end_to_end(finished):
    workdir, env, r = finished
    res = workdir / "results"
    import pandas as pd

    summary = pd.read_csv(res / "tables" / "summary.csv")
    runs = summary[summary["algorithm"] != "trivial baseline"]
    assert len(runs) == N_RUNS and len(summary) == N_RUNS + 2  # + one baseline per dataset
    assert set(runs["algorithm"]) == {"standin", "oneshot"}
    assert summary["value"].notna().all() and (runs["train_time_s"] > 0).all()
    assert (runs["predict_time_s"] > 0).all()
    assert (res / "tables" / "summary.md").read_text().count("| tiny_") >= N_RUNS
    wide = pd.read_csv(res / "tables" / "wide.csv")
    assert list(wide["algorithm"]) == ["standin", "oneshot", "trivial baseline"]
    for d in ("tiny_clf", "tiny_reg"):
        for kind in ("metric_vs_time", "objective_vs_time"):
            assert (res / "plots" / d / f"{kind}.png").stat().st_size > 1000
    run = res / "runs" / "tiny_clf" / "standin" / "seed1"
    for f in ("params.json", "metrics.csv", "final.json", "model.pkl"):
        assert (run / f).is_file()
    assert len(pd.read_csv(run / "metrics.csv")) == 3
    assert (res / "logs" / "train" / "tiny_clf" / "standin" / "seed1.log").stat().st_size > 0
    from kernelscale.pipeline.tracking import search_runs

    runs = search_runs(f"sqlite:///{res}/mlflow.db", "tiny")
    assert len(runs) == N_RUNS
    assert runs["tags.mlflow.parentRunId"].nunique() == 1  # one parent for this invocation
    assert runs["tags.kernelscale.config_hash"].notna().all()


@pytest.mark.slow
def test_second_run_does_no_training(finished):
    workdir, env, _ = finished
    logs = sorted((workdir / "results" / "logs" / "train").rglob("*.log"))
    before = {p: p.stat().st_mtime_ns for p in logs}
    r = smk(workdir, env, "--cores", "2")
    assert "Nothing to be done" in r.stdout + r.stderr
    assert {p: p.stat().st_mtime_ns for p in logs} == before
    # importing again does not duplicate MLflow runs
    finals = sorted(str(p) for p in (workdir / "results" / "runs").rglob("final.json"))
    c = subprocess.run([sys.executable, "-m", "kernelscale.pipeline.cli", "track", "--uri",
                        "sqlite:///results/mlflow.db", "--experiment", "tiny", *finals],
                       cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stderr
    assert "'unchanged': 5" in c.stdout
    from kernelscale.pipeline.tracking import search_runs

    assert len(search_runs(f"sqlite:///{workdir}/results/mlflow.db", "tiny")) == N_RUNS


@pytest.mark.slow
def test_report(finished):
    workdir, env, _ = finished
    smk(workdir, env, "--cores", "1", "--report", "results/report.html")
    html = (workdir / "results" / "report.html").read_text(errors="replace")
    assert len(html) > 10_000 and "metric_vs_time" in html


def _bad(config_edit):
    import copy

    c = copy.deepcopy(TINY)
    config_edit(c)
    return c


BAD = {
    "unknown dataset": (
        lambda c: c["experiments"][0]["datasets"].append("nope"),
        "config.yaml: experiments.0.datasets: unknown dataset 'nope'"),
    "unknown algorithm": (
        lambda c: c["experiments"][1]["algorithms"].append("nope"),
        "config.yaml: experiments.1.algorithms: unknown algorithm 'nope'"),
    "unknown estimator": (
        lambda c: c["algorithms"]["oneshot"].update(estimator="nope"),
        "config.yaml: algorithms.oneshot.estimator: unknown estimator 'nope'"),
    "schema: bad device": (
        lambda c: c["algorithms"]["standin"].update(device="tpu"),
        "config.yaml: algorithms.standin.device: 'tpu' is not one of"),
    "schema: seeds not integers": (
        lambda c: c["experiments"][0].update(seeds=["a"]),
        "config.yaml: experiments.0.seeds.0: 'a' is not of type 'integer'"),
    "schema: unknown key": (
        lambda c: c.update(tracking={"uri": "sqlite:///x.db", "oops": 1}),
        "config.yaml: tracking: Additional properties are not allowed ('oops' was unexpected)"),
    "task the algorithm cannot do": (
        lambda c: c["experiments"][1]["datasets"].append("tiny_clf"),
        "config.yaml: experiments.1: algorithm 'oneshot' does not do multiclass"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_one_line_error_nothing_written(tmp_path, case):
    edit, expected = BAD[case]
    workdir, env = make_workdir(tmp_path, _bad(edit))
    before = sorted(p.relative_to(workdir) for p in (workdir / "results").rglob("*")) \
        if (workdir / "results").exists() else []
    r = smk(workdir, env, "--cores", "2", check=False, timeout=300)
    assert r.returncode != 0
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("config.yaml:")]
    assert len(errors) == 1 and errors[0].startswith(expected), lines
    assert "Traceback" not in r.stderr
    after = sorted(p.relative_to(workdir) for p in (workdir / "results").rglob("*")) \
        if (workdir / "results").exists() else []
    assert after == before


def _tree(folder: Path) -> list:
    return sorted(p.relative_to(folder) for p in folder.rglob("*")) if folder.exists() else []


def _empty_config(workdir: Path):
    (workdir / "config.yaml").write_text("")
    return contextlib.nullcontext()


def _missing_dataset_file(workdir: Path):
    c = copy.deepcopy(TINY)
    c["datasets"]["mine"] = {"task": "binary", "path": "data/mine.libsvm", "format": "libsvm"}
    c["experiments"][0]["datasets"].append("mine")
    (workdir / "config.yaml").write_text(yaml.safe_dump(c))
    return contextlib.nullcontext()


def _read_only_results(workdir: Path):
    from test_faults import read_only

    (workdir / "results" / "logs").mkdir(parents=True, exist_ok=True)
    return read_only(workdir / "results")


# files and folders the workflow needs: (set-up, start of the one line it must print)
BAD_FILES = {
    "empty config.yaml": (_empty_config, "config.yaml: the file is empty; expected a mapping"),
    "dataset path missing": (
        _missing_dataset_file,
        "config.yaml: datasets.mine.path: data/mine.libsvm: no such file (relative to "),
    "read-only results": (
        _read_only_results,
        "kernelscale: results: read-only folder where the workflow writes; nothing has run"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_one_line_before_any_job(tmp_path, case):
    """An empty config.yaml, a dataset `path:` that is not there, a read-only results/: one
    line naming the file or folder, before any job runs (Snakemake: a WorkflowError naming the
    Snakefile, a 27-line MissingInputException, a ProtectedOutputException or a job failing to
    create its output folder after others have written theirs)."""
    setup, expected = BAD_FILES[case]
    workdir, env = make_workdir(tmp_path, TINY)
    with setup(workdir):
        before = _tree(workdir / "results")
        r = smk(workdir, env, "--cores", "1", check=False, timeout=300)
        after = _tree(workdir / "results")
    out = r.stdout + r.stderr
    lines = [ln for ln in out.splitlines() if ln.strip()
             and not ln.startswith("Using workflow specific profile")]  # Snakemake's info
    assert r.returncode == 1, out
    assert len(lines) == 1 and lines[0].startswith(expected), out
    assert not re.search(r"Exception|Error|Traceback", out), out
    assert after == before  # nothing half-written


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("text", [None, "", "datasets: [1,\n"], ids=["missing", "empty", "yaml"])
def test_make_checks_config_files_before_snakemake(tmp_path, text):
    """`make run CONFIG=FILE`: Snakemake reads --configfile files before the Snakefile runs
    (a missing one ends in a FileNotFoundError traceback), so the Makefile checks them first:
    one line naming the file, and Snakemake is not started."""
    workdir, env = make_workdir(tmp_path, TINY)
    shutil.copy(ROOT / "Makefile", workdir / "Makefile")
    for name in ("pyproject.toml", "requirements.lock"):  # older than the stamp: the venv
        shutil.copy(ROOT / name, workdir / name)         # (this interpreter's) counts as built
        os.utime(workdir / name, (0, 0))
    (workdir / "stamp").touch()
    if text is not None:
        (workdir / "c.yaml").write_text(text)
    r = subprocess.run(["make", "-s", "dryrun", "CONFIG=c.yaml", f"VENV={sys.prefix}",
                        "STAMP=stamp"], cwd=workdir, env=env, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("make")]
    assert r.returncode != 0, out
    expected = {None: "c.yaml: no such file", "": "c.yaml: the file is empty",
                "datasets: [1,\n": "c.yaml:2:1: not valid YAML"}[text]
    assert len(lines) == 1 and expected in lines[0], out
    assert "Traceback" not in out, out
    # snakemake never started: it would have made .snakemake/
    assert not (workdir / "results").exists() and not (workdir / ".snakemake").exists()


# ----------------------------------------------------------------------------- kill and resume
KILL = {
    "datasets": {"tiny_clf": TINY["datasets"]["tiny_clf"]},
    "algorithms": {"slow": {"estimator": "standin", "params": {"n_iter": 1, "sleep": 0.3},
                            "device": "cpu", "segments": 12}},
    "experiments": [{"datasets": ["tiny_clf"], "algorithms": ["slow"], "seeds": [0]}],
    "tracking": {"experiment": "kill"},
}
SAME = ["dataset", "algorithm", "seed", "metric", "value", "test_accuracy", "n_train", "d"]


def _checkpoint_segment(run: Path) -> int:
    import pickle

    try:
        return pickle.loads((run / "checkpoint.pkl").read_bytes())["segment"]
    except Exception:  # absent, or being replaced
        return 0


def _wait_for_segment(proc, run: Path, segment: int, timeout=240) -> None:
    deadline = time.time() + timeout
    while _checkpoint_segment(run) < segment:
        assert proc.poll() is None, "snakemake ended before the kill: " + proc.stdout.read()[-3000:]
        assert time.time() < deadline, "training did not reach the checkpoint in time"
        time.sleep(0.05)


def _train_pids(workdir: Path) -> list[int]:
    """The `kernelscale.pipeline.cli train` python processes working in ``workdir``."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            cwd = Path(os.readlink(p / "cwd")).resolve()
        except OSError:
            continue
        if cwd == workdir.resolve() and b"kernelscale.pipeline.cli" in argv and b"train" in argv \
                and Path(argv[0].decode()).name.startswith("python"):
            pids.append(int(p.name))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="finds the train process in /proc")
def test_plain_rerun_resumes_after_kill_9(tmp_path):
    """kill -9 of a train job, then kill -9 of snakemake with its jobs mid-training: a plain
    `make run` (`kernelscale repair`, then `snakemake --cores 1`: no --unlock, no
    --rerun-incomplete on the command line) resumes from the checkpoint and ends with the table
    of an uninterrupted run."""
    import signal

    import pandas as pd

    (tmp_path / "ref").mkdir()
    ref, env = make_workdir(tmp_path / "ref", KILL)
    smk(ref, env, "--cores", "1")
    expected = pd.read_csv(ref / "results" / "tables" / "summary.csv")[SAME]

    (tmp_path / "killed").mkdir()
    workdir, env = make_workdir(tmp_path / "killed", KILL)
    run = workdir / "results" / "runs" / "tiny_clf" / "slow" / "seed0"

    def start():
        return subprocess.Popen([*SNAKEMAKE, "--cores", "1"], cwd=workdir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    # 1. the train job alone is killed: snakemake reports the failed job and stops
    proc = start()
    _wait_for_segment(proc, run, 2)
    pids = _train_pids(workdir)
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    proc.stdout.close()
    first = _checkpoint_segment(run)
    assert not (run / "final.json").exists() and 2 <= first <= 8

    # 2. snakemake and its jobs are killed (kill -9 of the process group: lock + incomplete left)
    proc = start()
    _wait_for_segment(proc, run, first + 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert any((workdir / ".snakemake" / "locks").glob("*.lock")), "no stale lock to handle"
    assert any((workdir / ".snakemake" / "incomplete").iterdir()), "no incomplete marker"
    assert not (run / "final.json").exists() and _checkpoint_segment(run) < 12

    # 3. a plain rerun (`make run`: repair, then snakemake) resumes
    assert "removed a stale Snakemake lock" in repair(workdir, env).stderr
    smk(workdir, env, "--cores", "1")
    log = (workdir / "results" / "logs" / "train" / "tiny_clf" / "slow" / "seed0.log").read_text()
    assert "resuming tiny_clf/slow/seed0 from checkpoint after segment" in log
    final = json.loads((run / "final.json").read_text())
    assert final["resumed"] == 2 and final["n_iter"] == 12
    assert list(pd.read_csv(run / "metrics.csv")["step"]) == list(range(1, 13))
    got = pd.read_csv(workdir / "results" / "tables" / "summary.csv")[SAME]
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.slow
def test_todo_checksum_dataset_runs_and_prints_its_hash(tmp_path):
    """A url dataset whose sha256 is TODO-verify-on-first-download (served from 127.0.0.1)
    trains next to a generated one: its first download is pinned, and the run ends with the
    line giving its sha256 to paste."""
    import hashlib
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import numpy as np

    www = tmp_path / "www"
    www.mkdir()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    lines = [f"{int(x[0] + x[1] > 0)} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x))
             for x in X]
    (www / "toy.svm").write_text("\n".join(lines) + "\n")
    digest = hashlib.sha256((www / "toy.svm").read_bytes()).hexdigest()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(www)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        config = {**TINY, "datasets": {
            "tiny_reg": TINY["datasets"]["tiny_reg"],
            "toy": {"task": "binary", "url": f"http://127.0.0.1:{httpd.server_address[1]}/toy.svm",
                    "sha256": "TODO-verify-on-first-download", "format": "libsvm",
                    "n_features": 4, "split": {"test_size": 0.25, "seed": 0}}},
            "experiments": [{"datasets": ["toy", "tiny_reg"], "algorithms": ["standin"]}]}
        (tmp_path / "wf").mkdir()
        workdir, env = make_workdir(tmp_path / "wf", config)
        env.pop("KERNELSCALE_CACHE", None)
        env.pop("KERNELSCALE_REQUIRE_SHA256", None)
        r = smk(workdir, env, "--cores", "2")
    finally:
        httpd.shutdown()
        httpd.server_close()
    res = workdir / "results"
    for d in ("toy", "tiny_reg"):
        assert (res / "runs" / d / "standin" / "seed0" / "final.json").is_file()
    pin = res / "downloads" / "toy" / "toy.svm.sha256"
    assert pin.read_text() == f"{digest}  toy.svm\n"
    [line] = [ln for ln in r.stderr.splitlines() if "is not filled in" in ln]
    assert "datasets.toy.sha256" in line and digest in line and "paste it there" in line
