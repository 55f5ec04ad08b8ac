"""The run matrix of a configuration: (dataset, algorithm, seed) runs, the datasets they need
(and whose local files are missing), each algorithm's spec and Slurm resources,
the benchmark rule's arguments, run folders and the claims of ``make reproduce``.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import yaml

# the config schema: the one place where the defaults of an algorithms entry are written
CONFIG_SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


@functools.cache
def _schema() -> dict:
    return yaml.safe_load(CONFIG_SCHEMA.read_text())


def _defaults(properties: dict) -> dict:
    return {k: v["default"] for k, v in properties.items() if "default" in v}


def entry_defaults() -> dict:
    """Defaults of an ``algorithms`` entry (params, device, segments, step_test_rows), as the
    config schema states them."""
    return _defaults(_schema()["properties"]["algorithms"]["additionalProperties"]["properties"])


def resource_defaults() -> dict:
    """Defaults of a ``resources`` entry (threads, mem_mb, runtime), as the schema states them."""
    return _defaults(_schema()["$defs"]["resources"]["properties"])


def runs(config: dict) -> list[tuple[str, str, int]]:
    """(dataset, algorithm, seed) triples of all experiments, in order, without duplicates."""
    return list(dict.fromkeys((str(d), str(a), int(s)) for exp in config.get("experiments") or []
                              for d in exp.get("datasets", []) for a in exp.get("algorithms", [])
                              for s in exp.get("seeds", [0])))


def run_datasets(config: dict) -> list[str]:
    return sorted({d for d, _, _ in runs(config)})


def missing_local_files(config: dict) -> dict[str, list[str]]:
    """Datasets marked ``optional: true`` among the config's runs whose local (``path:``) files
    are not there, e.g. the papers' licensed data (TIMIT, ImageNet features): name -> the
    missing paths. (A missing file of any other dataset is an error: ``missing_file_errors``.)"""
    from .data.spec import FILE_ROLES

    out = {}
    for name in run_datasets(config):
        spec = (config.get("datasets") or {}).get(name) or {}
        if not spec.get("optional"):
            continue
        missing = [str(spec[f"{role}path"]) for role in FILE_ROLES if f"{role}path" in spec
                   and not Path(spec[f"{role}path"]).expanduser().exists()]
        if missing:
            out[name] = missing
    return out


def algorithm_spec(config: dict, name: str) -> dict:
    """What ``kernelscale train`` needs of an algorithms entry (estimator, params, device, ...)."""
    spec = {**entry_defaults(), **config["algorithms"][name]}
    # the config's shared params (e.g. one reg for every method), under the entry's own
    params = {**(config.get("params") or {}), **(spec["params"] or {})}
    return {"estimator": spec.get("estimator", name), "params": params,
            "device": spec["device"], "segments": int(spec["segments"]),
            "step_test_rows": int(spec["step_test_rows"])}


def algorithm_spec_json(config: dict, name: str) -> str:
    return json.dumps(algorithm_spec(config, name), sort_keys=True, separators=(",", ":"))


def train_resources(config: dict, name: str) -> dict:
    """threads / mem_mb / runtime (minutes) / gpu for a train job of algorithm ``name``."""
    res = {**resource_defaults(), **((config.get("resources") or {}).get("train") or {})}
    spec = config["algorithms"][name]
    res.update(spec.get("resources") or {})
    res["gpu"] = 1 if spec.get("device", "auto") == "gpu" else 0
    return res


def bench_args(config: dict) -> str:
    """Command-line options of ``kernelscale bench`` from the config's ``bench`` section."""
    bench = config.get("bench") or {}
    args = []
    if bench.get("sections"):
        args += ["--sections", *map(str, bench["sections"])]
    for key, flag in (("n_train", "--n-train"), ("time_cap_s", "--time-cap"),
                      ("budget_mb", "--budget-mb")):
        if bench.get(key) is not None:
            args += [flag, str(bench[key])]
    args += [flag for key, flag in (("quick", "--quick"), ("huge", "--huge")) if bench.get(key)]
    return " ".join(args)


def bench_threads(config: dict) -> int:
    """Threads of the bench job: ``bench.threads``, else this machine's CPUs (not
    ``workflow.cores``, undefined under a cluster profile)."""
    return int((config.get("bench") or {}).get("threads") or os.cpu_count() or 1)


def run_dir(dataset: str, algorithm: str, seed) -> str:
    return f"results/runs/{dataset}/{algorithm}/seed{seed}"


def final_files(config: dict, dataset: str | None = None) -> list[str]:
    """``final.json`` of every run (of one dataset when given)."""
    return [f"{run_dir(d, a, s)}/final.json" for d, a, s in runs(config)
            if dataset is None or d == dataset]


def reproduce_claims(path="config/reproduce.yaml") -> list[str]:
    """The claim names of ``config/reproduce.yaml`` (``claims:`` keys), one figure each
    (``results/reproduce/<claim>.png``); empty when the file is absent."""
    if not Path(path).is_file():
        return []
    return [str(c) for c in ((yaml.safe_load(Path(path).read_text()) or {}).get("claims") or {})]
