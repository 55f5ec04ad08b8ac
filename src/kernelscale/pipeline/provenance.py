"""Provenance of a pipeline run: the environment of its jobs (Python path, dask settings), the
config hash and git commit they record in MLflow, the conda environment of a train job.
"""

from __future__ import annotations

import json


def job_environment(python: str, src, dask: dict | None = None) -> None:
    """Make the rules' ``python -m kernelscale.pipeline.cli`` resolve to this interpreter (its bin/ first on
    PATH) and this checkout (``src`` first on PYTHONPATH); jobs, Slurm jobs included (sbatch exports
    the environment), inherit both. Under ``--sdm conda`` the activated environment's python comes
    first and still finds the package through PYTHONPATH. The config's ``dask`` section travels
    the same way (``spread.cluster.environment``)."""
    import os
    from pathlib import Path

    from ..spread.cluster import environment

    for key, value in environment(dask).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

    bindir = str(Path(python).parent)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[:1] != [bindir]:
        os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
    pp = os.environ.get("PYTHONPATH", "")
    if str(src) not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join([str(src), pp]) if pp else str(src)


def config_hash(config: dict) -> str:
    """Short hash of the merged config (all --configfile files and --config overrides)."""
    import hashlib

    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def git_commit(basedir) -> str | None:
    """HEAD of the workflow's git checkout, ``-dirty`` appended when tracked files changed;
    None outside git."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(basedir), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(basedir), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def provenance_environment(config: dict, basedir) -> None:
    """Hand the git commit and config hash to the MLflow import job through the environment
    (``tracking.provenance_tags``): as rule params they would re-run the import after every
    commit."""
    import os

    from .tracking import CONFIG_HASH_ENV, GIT_ENV

    os.environ[CONFIG_HASH_ENV] = config_hash(config)
    commit = git_commit(basedir)
    if commit:
        os.environ[GIT_ENV] = commit
    else:
        os.environ.pop(GIT_ENV, None)


def conda_env(config: dict, name: str, basedir) -> str:
    """envs/gpu.yaml for algorithms on the GPU, envs/cpu.yaml otherwise (for --sdm conda)."""
    kind = "gpu" if config["algorithms"][name].get("device", "auto") == "gpu" else "cpu"
    return f"{basedir}/envs/{kind}.yaml"
