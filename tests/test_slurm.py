"""The workflow through Snakemake's Slurm executor on a one-node Slurm cluster on localhost.

Changes the machine, so it runs only when asked: ``make test-slurm`` (or ``KERNELSCALE_TEST_SLURM=1``,
as CI sets it); otherwise the cluster's tests skip, saying so. Needs root and Debian's apt (installs
slurm-wlm + munge when missing); skipped otherwise, with the reason. Writes /etc/slurm/slurm.conf (an existing one is put back afterwards), starts munged,
slurmctld and slurmd in the foreground as child processes and stops them by PID in a finally block.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by kernelscale tests/test_slurm.py"


OPT_IN = "KERNELSCALE_TEST_SLURM"


def _why_not() -> str | None:
    if os.environ.get(OPT_IN) != "1":
        return (f"installs and starts Slurm (apt-get, /etc/slurm, daemons): run `make test-slurm` "
                f"or set {OPT_IN}=1")
    if sys.platform != "linux":
        return "Slurm test runs on Linux only"
    if os.geteuid() != 0:
        return "needs root to install and run slurm-wlm (run the tests as root)"
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        return "slurm-wlm is not installed and there is no apt-get to install it"
    return None


def _install() -> None:
    if all(shutil.which(x) for x in ("slurmctld", "slurmd", "munged", "sbatch", "squeue")):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.skip(f"could not install slurm-wlm: {' '.join(cmd)}: "
                        f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")


def _node_line() -> str:
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    return next(ln for ln in out.splitlines() if ln.startswith("NodeName="))


def slurm_conf(host: str, node_line: str, state: Path) -> str:
    return f"""{MARK}
ClusterName=kstest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/d
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
{node_line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=15)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = _why_not()
    if why:
        pytest.skip(why)
    _install()
    state = tmp_path_factory.mktemp("slurm")
    for sub in ("ctld", "d"):
        (state / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    node_line = _node_line()
    if f"NodeName={host} " not in node_line + " ":
        node_line = f"NodeName={host} " + node_line.split(" ", 1)[1]
    backup = None
    if CONF.exists() and MARK not in CONF.read_text():
        backup = CONF.read_text()
    procs: list[subprocess.Popen] = []
    logs = state / "daemons.log"
    try:
        CONF.parent.mkdir(parents=True, exist_ok=True)
        CONF.write_text(slurm_conf(host, node_line, state))
        run_munge = Path("/run/munge")
        sock = run_munge / "munge.socket.2"
        if not sock.exists():  # no munged running yet: start ours
            run_munge.mkdir(parents=True, exist_ok=True)
            shutil.chown(run_munge, "munge", "munge")
            if not Path("/etc/munge/munge.key").exists():
                subprocess.run(["mungekey", "--create"], check=True, timeout=60)
                shutil.chown("/etc/munge/munge.key", "munge", "munge")
            procs.append(subprocess.Popen(
                ["setpriv", "--reuid", "munge", "--regid", "munge", "--init-groups",
                 "munged", "--foreground"], stdout=open(logs, "a"), stderr=subprocess.STDOUT))
            for _ in range(50):
                if sock.exists():
                    break
                time.sleep(0.1)
        procs.append(subprocess.Popen(["slurmctld", "-D", "-i"], stdout=open(logs, "a"),
                                      stderr=subprocess.STDOUT))
        time.sleep(1)
        procs.append(subprocess.Popen(["slurmd", "-D"], stdout=open(logs, "a"),
                                      stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        states = ""
        while time.time() < deadline:
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
            states = r.stdout.strip()
            if r.returncode == 0 and states.startswith("idle"):
                break
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.5)
        else:
            pass
        if not states.startswith("idle"):
            raise RuntimeError(f"Slurm did not come up (sinfo: {states!r}); see {logs}:\n"
                               + logs.read_text()[-3000:])
        yield {"state": state, "host": host}
    finally:
        _stop(procs)
        if backup is not None:
            CONF.write_text(backup)
        elif CONF.exists() and MARK in CONF.read_text():
            CONF.unlink()


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_workflow_on_slurm(cluster, tmp_path):
    from test_workflow_pipeline import TINY, make_workdir, smk

    config = {**TINY, "experiments": [
        {"datasets": ["tiny_reg"], "algorithms": ["standin"], "seeds": [0, 1]}]}
    config["datasets"] = {"tiny_reg": TINY["datasets"]["tiny_reg"]}
    workdir, env = make_workdir(tmp_path, config)
    shutil.copytree(ROOT / "slurm", workdir / "slurm")
    t0 = time.time()
    r = smk(workdir, env, "--profile", "slurm", "--jobs", "4", "--slurm-keep-successful-logs",
            "--slurm-init-seconds-before-status-checks", "3",
            "--seconds-between-status-checks", "2", timeout=400)
    out = r.stdout + r.stderr
    print(f"workflow on Slurm: {time.time() - t0:.0f} s")
    assert out.count("has been submitted with SLURM jobid") >= 2, out[-3000:]
    res = workdir / "results"
    for seed in (0, 1):
        assert (res / "runs" / "tiny_reg" / "standin" / f"seed{seed}" / "final.json").is_file()
    # the train jobs really went through Slurm
    slurm_logs = list((workdir / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert any("rule_train" in str(p) for p in slurm_logs), slurm_logs
    from kernelscale.pipeline.tracking import search_runs

    runs = search_runs(f"sqlite:///{res}/mlflow.db", "tiny")
    assert len(runs) == 2
    # two runs + the trivial-baseline row of the dataset
    assert (res / "tables" / "summary.csv").read_text().count("tiny_reg,standin,") == 2
    assert (res / "tables" / "summary.csv").read_text().count("tiny_reg,") == 3


def test_gpu_algorithms_ask_slurm_for_a_gpu(tmp_path):
    """A `device: gpu` algorithm's train job carries gpu=1 (the plugin submits --gpus=1)."""
    from test_workflow_pipeline import TINY, make_workdir, smk

    config = yaml.safe_load(yaml.safe_dump(TINY))
    config["algorithms"]["standin"]["device"] = "gpu"
    workdir, env = make_workdir(tmp_path, config)
    r = smk(workdir, env, "-n", "--cores", "2", "--printshellcmds", timeout=300)
    out = r.stdout + r.stderr
    blocks = out.split("rule ")
    train_std = [b for b in blocks if b.startswith("train:") and "algorithm=standin" in b]
    train_one = [b for b in blocks if b.startswith("train:") and "algorithm=oneshot" in b]
    assert train_std and all("gpu=1" in b for b in train_std), out[-3000:]
    assert train_one and not any("gpu=1" in b for b in train_one)
    profile = yaml.safe_load((ROOT / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["slurm-status-command"] == "squeue"


def test_plugin_turns_gpu_resource_into_gpus_flag():
    """What the slurm plugin submits for the train rule's resources (gpu=1 -> --gpus=1)."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    class Resources(dict):
        __getattr__ = dict.get

    class Job:
        def __init__(self, **res):
            self.resources = Resources(res)

    assert set_gres_string(Job(gpu=1)).strip() == "--gpus=1"
    assert set_gres_string(Job(gpu=0)).strip() == ""


def test_gpu_10m_config_asks_slurm_for_a_gpu_per_train_job(tmp_path):
    """config/gpu-10m.yaml (issue 21's 10^7-point race as a pipeline run) under the Slurm
    profile: every train job carries gpu=1 (--gpus=1, test above), prepare asks for none."""
    from test_workflow_pipeline import SNAKEMAKE

    for name in ("Snakefile", "config.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in ("workflow", "config", "slurm", "profiles", "envs"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([*SNAKEMAKE, "-n", "--profile", "slurm", "--configfile", "config.yaml",
                        "config/gpu-10m.yaml"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    blocks = out.split("rule ")
    train = [b for b in blocks if b.startswith("train:")]
    algorithms = yaml.safe_load((ROOT / "config" / "gpu-10m.yaml").read_text())["algorithms"]
    assert len(train) == len(algorithms), out[-3000:]
    assert all("gpu=1" in b and "dataset=bayes_10m" in b for b in train), out[-3000:]
    prepare = [b for b in blocks if b.startswith("prepare:")]
    assert prepare and not any("gpu=1" in b for b in prepare)


def _spread_data(tmp_path):
    import numpy as np
    import zarr

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 6))
    y = (np.sin(X[:, :3].sum(axis=1)) > 0).astype(int)
    Xz = zarr.open_group(str(tmp_path / "d.zarr"), mode="w").create_array(
        "X", shape=X.shape, chunks=(1000, 6), dtype="f8")
    Xz[:] = X
    return Xz, X, y


@pytest.mark.slurm
@pytest.mark.slow  # the cluster fixture installs and starts Slurm
@pytest.mark.timeout(600)
def test_dask_workers_started_by_slurm_train_dsg_like_in_process(cluster, tmp_path):
    """config `dask: {scheduler: slurm, n_workers: 2}`: two dask-jobqueue worker jobs on the
    one-node Slurm, DSG spread over them (the same model as in-process), the jobs gone after."""
    import numpy as np

    from kernelscale.estimators import DSGClassifier
    from kernelscale.spread.cluster import client_from_setting, use_client

    Xz, X, y = _spread_data(tmp_path)
    kw = dict(n_iter=16, batch_size=512, block_size=32, random_state=0,
              engine={"dtype": "float64"})
    local = DSGClassifier(**kw).fit(Xz, y)
    options = {"cores": 1, "memory": "1GB", "walltime": "00:10:00", "host": "127.0.0.1",
               "start_timeout_s": 120, "log_directory": str(tmp_path / "logs")}
    with client_from_setting("slurm", 2, options) as client:
        jobs = subprocess.run(["squeue", "-h", "-o", "%j %T"], capture_output=True,
                              text=True).stdout
        assert jobs.count("RUNNING") >= 2, jobs
        with use_client(client):
            spread = DSGClassifier(**kw).fit(Xz, y)
    assert spread.spread_["workers"] == 2
    assert len(list((tmp_path / "logs").glob("*.out"))) >= 2  # the worker jobs' own output
    a, b = local.decision_function(X[:300]), spread.decision_function(X[:300])
    assert np.max(np.abs(a - b)) <= 1e-9 * (1 + np.max(np.abs(a)))
    deadline = time.time() + 30
    while time.time() < deadline and "dask-worker" in subprocess.run(
            ["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout:
        time.sleep(0.5)
    assert "dask-worker" not in subprocess.run(["squeue", "-h", "-o", "%j"],
                                               capture_output=True, text=True).stdout


@pytest.mark.slurm
@pytest.mark.slow  # the cluster fixture installs and starts Slurm
@pytest.mark.timeout(600)
def test_dask_workers_that_never_start_are_a_one_line_error(cluster, tmp_path):
    """Worker jobs held in the queue (a begin time an hour away) past start_timeout_s: one line
    naming the cause, and the pending jobs cancelled."""
    from kernelscale.spread.cluster import slurm_client

    options = {"memory": "1GB", "host": "127.0.0.1", "start_timeout_s": 8,
               "job_extra": ["--begin=now+3600"], "log_directory": str(tmp_path)}
    with pytest.raises(RuntimeError) as e:
        slurm_client(2, options)
    msg = str(e.value)
    assert "\n" not in msg and "0 of 2 worker jobs running after 8 s" in msg, msg
    assert "queue stuck" in msg and "Error" not in msg, msg  # the cause in words, no class name
    deadline = time.time() + 30
    while time.time() < deadline and "dask-worker" in subprocess.run(
            ["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout:
        time.sleep(0.5)
    assert "dask-worker" not in subprocess.run(["squeue", "-h", "-o", "%j"],
                                               capture_output=True, text=True).stdout


@pytest.mark.slurm
@pytest.mark.slow  # the cluster fixture installs and starts Slurm
@pytest.mark.timeout(600)
def test_dsg_fit_survives_a_worker_job_cancelled_mid_fit(cluster, tmp_path):
    """Two dask-jobqueue worker jobs, a DSG fit spread over them, and one job cancelled with
    `scancel` after the first iterations: the fit goes on on the other job's worker (one warning
    line naming the lost worker) and ends with the in-process fit's model."""
    import threading
    import warnings

    import numpy as np

    from kernelscale.estimators import DSGClassifier
    from kernelscale.spread.cluster import slurm_client, use_client

    Xz, X, y = _spread_data(tmp_path)
    # long enough that the cancelled worker leaves (SIGTERM, then the scheduler notices) well
    # before the last step: the loss must happen mid-fit, not after it
    kw = dict(n_iter=200, batch_size=512, block_size=32, random_state=0,
              engine={"dtype": "float64"})
    local = DSGClassifier(**kw).fit(Xz, y)
    options = {"cores": 1, "memory": "1GB", "walltime": "00:10:00", "host": "127.0.0.1",
               "start_timeout_s": 120, "log_directory": str(tmp_path / "logs")}
    client = slurm_client(2, options)
    est, cancelled, done = DSGClassifier(**kw), [], threading.Event()

    def iterations() -> int:
        return len(getattr(est, "history_", {}).get("iter", []))

    def cancel_mid_fit(job_id: str) -> None:
        deadline = time.time() + 120
        while iterations() < 5 and not done.is_set() and time.time() < deadline:
            time.sleep(0.01)
        if done.is_set() or time.time() >= deadline:
            return
        r = subprocess.run(["scancel", job_id], capture_output=True, text=True, timeout=30)
        cancelled.append((iterations(), r.returncode, r.stderr.strip()))

    try:
        info = client.scheduler_info()["workers"]
        assert len(info) == 2, info
        # each worker's own Slurm job (its environment), checked against dask-jobqueue's record
        job_of = client.run(lambda: os.environ.get("SLURM_JOB_ID"))
        by_name = {name: job.job_id for name, job in client.cluster.workers.items()}
        assert {job_of[a] for a in info} == {by_name[info[a]["name"]] for a in info}, \
            (job_of, by_name)
        running = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i"],
                                 capture_output=True, text=True, timeout=30).stdout.split()
        assert set(job_of.values()) <= set(running), (job_of, running)
        victim = sorted(info)[1]
        killer = threading.Thread(target=cancel_mid_fit, args=(job_of[victim],), daemon=True)
        t0 = time.time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            killer.start()
            try:
                with use_client(client):
                    est.fit(Xz, y)
            finally:
                done.set()
                killer.join(timeout=60)
        print(f"fit with a cancelled worker job: {time.time() - t0:.1f} s, "
              f"cancelled at iteration {cancelled[0][0] if cancelled else '-'}")
        assert cancelled and cancelled[0][1] == 0, cancelled  # scancel ran, mid-fit
        assert 5 <= cancelled[0][0] < kw["n_iter"], cancelled
        survivors = sorted(client.scheduler_info()["workers"])
    finally:
        client.close()
        client.cluster.close()
    msgs = [str(w.message) for w in caught if "lost dask worker" in str(w.message)]
    assert len(msgs) == 1 and "\n" not in msgs[0], [str(w.message) for w in caught]
    assert victim in msgs[0] and "continuing on 1 worker(s)" in msgs[0], msgs
    assert victim not in survivors and len(survivors) >= 1, survivors
    assert est.spread_["workers"] == 1 and est.n_iter_ == kw["n_iter"], est.spread_
    a, b = local.decision_function(X[:300]), est.decision_function(X[:300])
    assert np.max(np.abs(a - b)) <= 1e-9 * (1 + np.max(np.abs(a)))
    deadline = time.time() + 30
    while time.time() < deadline and "dask-worker" in subprocess.run(
            ["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout:
        time.sleep(0.5)
    assert "dask-worker" not in subprocess.run(["squeue", "-h", "-o", "%j"],
                                               capture_output=True, text=True).stdout
