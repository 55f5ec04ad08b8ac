"""`make reproduce` (`kernelscale reproduce`, kernelscale.pipeline.reproduce): the verdict rules on made-up curves, one claim end
to end on a tiny devdata subsample, the Snakemake target's plan and its figures in the report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelscale.pipeline import reproduce, reproduce_runs

ROOT = Path(__file__).resolve().parents[1]
DEVDATA = Path(__file__).resolve().parents[2] / "shared" / "devdata"


def test_003_dsg_against_baselines_within_its_time():
    pts = {"dsg": [(1.0, 0.30), (2.0, 0.20)],
           "rff_sgd": [(1.0, 0.25), (3.0, 0.10)],      # better, but only after DSG's time
           "nystrom": [(0.5, 0.22), (4.0, 0.15)]}
    measured, holds, note = reproduce.decide_003(pts)
    assert holds and "DSG / best rival = 0.909" in measured and not note
    pts["nystrom"] = [(0.5, 0.19)]
    assert not reproduce.decide_003(pts)[1]
    # a baseline with no model within DSG's time is beaten, and the note says so
    measured, holds, note = reproduce.decide_003({"dsg": [(1.0, 0.3)], "nystrom": [(5.0, 0.1)]})
    assert holds and "nystrom: no model within 1.0 s" in note


def test_000_order_at_equal_time_with_tolerance():
    curves = {"dsg": [(0, 1.0), (10, 0.50)], "udsg": [(0, 1.0), (10, 0.45)],
              "cdsg": [(0, 1.0), (4, 0.40), (8, 0.30)]}
    measured, holds, t_eq, at = reproduce.decide_000(curves, tol=0.01)
    assert t_eq == 8 and holds and at["dsg"] == pytest.approx(0.6)
    curves["cdsg"] = [(0, 1.0), (8, 0.56)]  # CDSG 0.56 vs UDSG 0.56: within 1 %
    assert reproduce.decide_000(curves, tol=0.01)[1]
    curves["cdsg"] = [(0, 1.0), (8, 0.60)]  # 7 % worse than UDSG
    measured, holds, *_ = reproduce.decide_000(curves, tol=0.01)
    assert not holds and "CDSG/UDSG = 1.071" in measured


def test_002_majority_of_R_and_unmeasurable_speedup():
    rows = [dict(R=R, method=m, test_error=e) for R, rb, rf in
            ((16, 0.2, 0.3), (32, 0.2, 0.25), (64, 0.2, 0.1)) for m, e in (("RB+CG", rb), ("RFF", rf))]
    measured, holds = reproduce.decide_002_rb(rows)
    assert holds and measured.startswith("RB <= RFF at 2/3 R")
    assert not reproduce.decide_002_rb(rows[:2] + [dict(R=32, method="RB+CG", test_error=1),
                                                   dict(R=32, method="RFF", test_error=0.5),
                                                   *rows[4:]])[1]

    def cd(speedup, util):
        return [dict(features="RB", tau=1, speedup=1.0, predicted=1.0, cpu_per_wall=1.0),
                dict(features="RB", tau=2, speedup=speedup, predicted=1.9, cpu_per_wall=util)]

    assert reproduce.decide_002_cd(cd(1.7, 1.95))[1] is True
    assert reproduce.decide_002_cd(cd(1.0, 1.95))[1] is False
    measured, holds, note = reproduce.decide_002_cd(cd(0.5, 0.9))
    assert holds is None and "not measurable" in note


def test_004_epochs_to_target():
    m, holds = reproduce.decide_004({"epochs": 2, "time": 1.0}, {"epochs": 10, "time": 3.0}, 15)
    assert holds and "(5.0x)" in m
    m, holds = reproduce.decide_004({"epochs": 3, "time": 1.0}, {"epochs": None, "time": None}, 15)
    assert holds and "SGD >15" in m and "not reached in 15 epochs" in m
    assert not reproduce.decide_004({"epochs": None, "time": None}, {"epochs": 4, "time": 1}, 15)[1]
    assert not reproduce.decide_004({"epochs": 4, "time": 1}, {"epochs": 4, "time": 1}, 15)[1]


def test_select_by_paper_number():
    assert reproduce.select(["002"]) == ["paper002_rb_vs_rff", "paper002_cd_speedup"]
    assert reproduce.select(["000", "paper000_ordering"]) == ["paper000_ordering"]
    with pytest.raises(SystemExit, match="unknown claim"):
        reproduce.select(["999"])


def test_one_claim_end_to_end_on_devdata(tmp_path):
    if not DEVDATA.is_dir():
        pytest.skip(f"{DEVDATA} is absent")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert reproduce.main(["--claims", "002", "--datasets", "dev_phoneme", "--max-train", "600",
                           "--max-test", "300", "--out", str(tmp_path), "--tracking-uri", uri,
                           "--cache", str(tmp_path / "cache"), "--devdata", str(DEVDATA)]) == 0
    for stem in ("paper002_rb_vs_rff", "paper002_cd_speedup"):
        assert (tmp_path / f"{stem}.png").stat().st_size > 0
        assert (tmp_path / f"{stem}.csv").stat().st_size > 0
    md = (tmp_path / "verdicts.md").read_text()
    assert md.count("| 002 |") == 2 and "600 of 4,326" in md
    assert any(m in md for m in ("**HOLDS**", "**DOES NOT HOLD**", "**NOT MEASURABLE**"))
    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=[reproduce.EXPERIMENT], output_format="list")
    assert {r.info.run_name for r in runs} == {"paper002_rb_vs_rff", "paper002_cd_speedup"}


def test_snakemake_plans_the_reproduce_target():
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "reproduce", "--cores",
                        "2", "--forcerun", "reproduce"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-2000:]
    cmd = [ln for ln in out.splitlines() if "kernelscale.pipeline.cli reproduce" in ln]
    assert cmd and "--config config/reproduce.yaml" in cmd[0] and "--tracking-uri" in cmd[0]
    assert "results/reproduce/paper003_dsg_equal_time.png" in out


def test_prepared_pipeline_datasets_join_the_claims(tmp_path, monkeypatch, capsys):
    """A dataset of config/papers.yaml that the pipeline has prepared (results/data/<name>) is
    loaded as a seeded subsample of its zarr rows; one that is not prepared is skipped with a
    line, and never blocks the claim's other datasets."""
    import numpy as np

    from kernelscale.pipeline.data import open_prepared, prepare_dataset

    spec = {"task": "binary", "chunk_rows": 1_000, "split": {"test_size": 0.25, "seed": 0},
            "generator": {"name": "bayes", "n_samples": 4_000, "n_features": 6}}
    prepare_dataset("papers_set", spec, tmp_path / "papers_set")
    monkeypatch.setattr(reproduce, "PREPARED", tmp_path)
    monkeypatch.setenv("KERNELSCALE_DEVDATA", str(DEVDATA))
    assert reproduce.prepared_path("papers_set") == tmp_path / "papers_set"
    assert reproduce.prepared_path("covtype") is None
    d = reproduce.load("papers_set", 500, 200)
    _, arrays = open_prepared(tmp_path / "papers_set")
    assert d.task == "binary" and d.X.shape == (500, 6) and d.Xt.shape == (200, 6)
    assert d.n_full == arrays["X_train"].shape[0] > 500
    X = arrays["X_train"][:]
    rows = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in d.X[:20]]
    assert rows == sorted(rows)  # rows of the stored set, in storage order
    np.testing.assert_array_equal(d.X, reproduce.load("papers_set", 500, 200).X)  # seeded
    with pytest.raises(SystemExit, match="neither a devdata set"):
        reproduce.load("covtype", 500)

    seen = {}
    monkeypatch.setitem(reproduce.CLAIMS, "paper000_ordering",
                        lambda datasets, *a, **k: seen.setdefault("datasets", datasets) and [])
    config = tmp_path / "r.yaml"
    config.write_text("claims:\n  paper000_ordering: {datasets: [dev_ring], "
                      "optional_datasets: [papers_set, covtype], max_train: 100}\n")
    reproduce.main(["--config", str(config), "--out", str(tmp_path / "out"),
                    "--tracking-uri", ""])
    assert seen["datasets"] == ["dev_ring", "papers_set"]
    assert "covtype skipped (not prepared" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_report_takes_the_reproduce_figures(tmp_path):
    """Snakemake reports only the targets it is given: `make report` adds `reproduce` once its
    outputs are there (with `all` when a run left its tables), and the report then holds every
    claim's figure and verdicts.csv (the rule's report() marks), under "Reproduce"."""
    import matplotlib.image
    import numpy as np

    from kernelscale.pipeline import runs
    from test_workflow_pipeline import TINY, make_workdir

    workdir, env = make_workdir(tmp_path, TINY)
    shutil.copy(ROOT / "Makefile", workdir / "Makefile")
    (workdir / "config").mkdir()
    shutil.copy(ROOT / "config" / "reproduce.yaml", workdir / "config" / "reproduce.yaml")
    for name in ("pyproject.toml", "requirements.lock"):  # older than the stamp: the venv
        shutil.copy(ROOT / name, workdir / name)         # (this interpreter's) counts as built
        os.utime(workdir / name, (0, 0))
    (workdir / "stamp").touch()
    make = ["make", "-s", f"VENV={sys.prefix}", "STAMP=stamp", "CORES=1"]

    def planned():
        r = subprocess.run([*make, "-n", "report"], cwd=workdir, env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        [line] = [ln for ln in r.stdout.splitlines() if "--report" in ln]
        return line.split("snakemake", 1)[1].split("--cores")[0].split()

    assert planned() == []  # nothing reproduced: the default target, as before
    out = workdir / "results" / "reproduce"
    out.mkdir(parents=True)
    claims = runs.reproduce_claims(ROOT / "config" / "reproduce.yaml")
    assert len(claims) >= 5
    for claim in claims:
        matplotlib.image.imsave(out / f"{claim}.png", np.zeros((4, 4, 3)))
    (out / "verdicts.csv").write_text("paper,claim,dataset,holds\n003,c,dev_x,True\n")
    (out / "verdicts.md").write_text("| verdicts |\n")
    assert planned() == ["reproduce"]
    (workdir / "results" / "tables").mkdir()
    (workdir / "results" / "tables" / "summary.csv").write_text("")
    assert planned() == ["all", "reproduce"]
    (workdir / "results" / "tables" / "summary.csv").unlink()

    r = subprocess.run([*make, "report"], cwd=workdir, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    html = (workdir / "results" / "report.html").read_text(errors="replace")
    for claim in claims:
        assert f"{claim}.png" in html, claim
    assert "verdicts.csv" in html and "Reproduce" in html


def test_figures_use_each_methods_fixed_style(monkeypatch):
    """Every method keeps the colour and marker it has in all of the project's figures
    (kernelscale.pipeline.plots.algorithm_style), not matplotlib's colour cycle."""
    import types

    import numpy as np
    from matplotlib.colors import to_hex

    from kernelscale.pipeline.plots import algorithm_style

    d = reproduce.Data(task="binary", X=np.zeros((10, 2)), y=np.zeros(10), Xt=np.zeros((5, 2)),
                       yt=np.zeros(5), n_full=10, name="dev_x")
    monkeypatch.setattr(reproduce, "load", lambda *a, **k: d)
    figures = []
    monkeypatch.setattr(reproduce, "_finish", lambda out, stem, rows, fig: figures.append(fig))
    # nystrom first: matplotlib's cycle would have given it dsg's blue
    curves = {"nystrom": [(0.5, 0.3), (2.0, 0.2)], "dsg": [(1.0, 0.25), (3.0, 0.15)],
              "rff_sgd": [(0.2, 0.4), (4.0, 0.1)]}
    monkeypatch.setattr(reproduce, "shared_sigma_nu", lambda d: (1.0, "1.0/n"))

    def curve(m, kind, data, segments, on_fit, **params):
        on_fit(types.SimpleNamespace(kernel="gaussian", bandwidth_=params["bandwidth"], reg_=0.1,
                                     _loss_name=lambda: "square"))
        return [(i, t, s) for i, (t, s) in enumerate(curves[m])]

    monkeypatch.setattr(reproduce_runs, "curve", curve)
    reproduce.paper003_dsg_equal_time(["dev_x"], 10, "unused",
                                      methods=("nystrom", "dsg", "rff_sgd"))
    [fig] = figures
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    for m in curves:
        colour, marker = algorithm_style(m)
        assert (to_hex(lines[m].get_color()), lines[m].get_marker()) == (colour.lower(), marker)
    # the labels of the other claims' figures map onto registered methods
    assert reproduce.method_style("EigenPro")["color"] == algorithm_style("eigenpro")[0]
    assert reproduce.method_style("SGD")["color"] == algorithm_style("kernel_sgd")[0]
    assert reproduce.method_style("RB+CG")["color"] == algorithm_style("rb_cg")[0]
    assert reproduce.method_style("RB")["color"] == algorithm_style("rb_cd")[0]
    rff = reproduce.method_style("RFF")
    assert rff["color"] == algorithm_style("rff_sgd")[0]
    assert rff["marker"] != algorithm_style("rff_sgd")[1]
    assert reproduce.method_style("CDSG") == reproduce.method_style("cdsg")
