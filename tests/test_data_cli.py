"""The data CLI (download / prepare), the rule helpers, and the two rules under Snakemake."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernelscale.pipeline.data import open_prepared
from kernelscale.pipeline.data import rule_helpers as helpers
from kernelscale.pipeline.data.cli import main

REPO = Path(__file__).resolve().parents[1]


def _config(tmp_path) -> dict:
    data = b"1 1:0.5 2:1\n-1 2:2\n1 1:1.5\n-1 1:2 2:0.5\n" * 50
    (tmp_path / "toy.svm").write_bytes(data)
    return {"datasets": {
        "toy": {"task": "binary", "url": (tmp_path / "toy.svm").as_uri(),
                "sha256": hashlib.sha256(data).hexdigest(), "format": "libsvm",
                "split": {"test_size": 0.25, "seed": 0}, "chunk_rows": 64},
        "gen": {"task": "regression", "chunk_rows": 500,
                "generator": {"name": "regression", "n_samples": 2000, "n_features": 3}},
        "local": {"task": "binary", "path": str(tmp_path / "toy.svm"), "format": "libsvm"},
    }}


def test_cli_download_and_prepare_from_config(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_config(tmp_path)))
    cache = tmp_path / "cache"
    assert main(["download", "--config", str(config), "--dataset", "toy",
                 "--cache-dir", str(cache)]) == 0
    assert capsys.readouterr().out.strip() == str(cache / "toy" / "toy.svm")
    assert main(["prepare", "--configfile", str(config), "--dataset", "toy",
                 "--cache-dir", str(cache), "--out", str(tmp_path / "out")]) == 0
    meta, arrays = open_prepared(tmp_path / "out")
    assert meta["n_train"] + meta["n_test"] == 200 and arrays["X_train"].chunks == (64, 2)
    assert main(["download", "--config", str(config), "--dataset", "gen"]) == 0  # nothing to do


def test_cli_spec_json_and_one_line_error(tmp_path, capsys):
    spec = json.dumps(_config(tmp_path)["datasets"]["gen"])
    assert main(["prepare", "--spec-json", spec, "--dataset", "gen",
                 "--out", str(tmp_path / "gen")]) == 0
    assert "1600" in capsys.readouterr().out or (tmp_path / "gen" / "meta.json").exists()
    bad = json.dumps({"task": "binary", "path": str(tmp_path / "missing.svm"), "format": "libsvm"})
    with pytest.raises(SystemExit) as exit_info:
        main(["prepare", "--spec-json", bad, "--dataset", "m", "--out", str(tmp_path / "m")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("kernelscale prepare: error: datasets.m.path: file not found")
    with pytest.raises(SystemExit):
        main(["prepare", "--config", str(tmp_path / "nope.yaml"), "--dataset", "x",
              "--out", str(tmp_path / "x")])
    assert "nope.yaml: config file not found" in capsys.readouterr().err


def test_rule_helpers(tmp_path):
    config = _config(tmp_path)
    cache = tmp_path / "c"
    assert helpers.url_dataset_pattern(config) == "toy"
    assert helpers.url_dataset_pattern({"datasets": {}}) == r"(?!x)x"
    assert helpers.prepare_inputs(config, "toy", cache) == [str(cache / "toy" / "toy.svm")]
    assert helpers.prepare_inputs(config, "local", cache) == [str(tmp_path / "toy.svm")]
    assert helpers.prepare_inputs(config, "gen", cache) == []
    assert helpers.download_outputs(config, cache) == [str(cache / "toy" / "toy.svm")]
    assert json.loads(helpers.spec_json(config, "gen")) == config["datasets"]["gen"]
    resources = helpers.prepare_resources(config, "gen")
    assert resources["threads"] == 1 and resources["mem_mb"] >= 600
    config["resources"] = {"prepare": {"mem_mb": 123}}
    assert helpers.prepare_resources(config, "gen")["mem_mb"] == 123


@pytest.mark.timeout(180)
def test_download_and_prepare_rules_under_snakemake(tmp_path):
    """The two rule files in a minimal Snakefile: url -> download job -> prepare job."""
    work = tmp_path / "wf"
    work.mkdir()
    (work / "config.yaml").write_text(yaml.safe_dump(_config(tmp_path)))
    (work / "Snakefile").write_text(
        "import sys\nfrom pathlib import Path\n"
        f"sys.path.insert(0, {str(REPO / 'src')!r})\n"
        'configfile: "config.yaml"\n'
        f"include: {str(REPO / 'workflow/rules/download.smk')!r}\n"
        f"include: {str(REPO / 'workflow/rules/prepare.smk')!r}\n"
        "rule all:\n"
        '    input: expand("results/data/{d}/meta.json", d=["toy", "gen"])\n')
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO / "src")}
    env.pop("KERNELSCALE_CACHE", None)
    snakemake = str(Path(sys.executable).parent / "snakemake")
    run = subprocess.run([snakemake, "--cores", "2", "--quiet"], cwd=work, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (work / "results/downloads/toy/toy.svm").exists()
    meta, _ = open_prepared(work / "results/data/toy")
    assert meta["source"]["kind"] == "url"
    assert (work / "results/logs/prepare/gen.log").exists()
    again = subprocess.run([snakemake, "--cores", "1", "-n"], cwd=work, env=env,
                           capture_output=True, text=True)
    assert "Nothing to be done" in again.stdout + again.stderr
