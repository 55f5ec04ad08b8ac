"""Helpers for the data stage's Snakemake rules (download.smk, prepare.smk): which files a
dataset needs and what its preparation gets, from the ``config`` dict Snakemake loaded."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .download import cache_dir, remote_files
from .spec import FILE_ROLES, is_deformed, source_kind, validate_dataset_spec

__all__ = ["cache_dir", "spec_json", "url_dataset_pattern", "prepare_inputs",
           "prepare_resources"]

_NEVER = r"(?!x)x"  # a regex matching nothing: no url datasets, no download jobs


def _spec(config: dict, dataset: str) -> dict:
    return validate_dataset_spec(dataset, config["datasets"][dataset])


def spec_json(config: dict, dataset: str) -> str:
    """The dataset entry as compact JSON for ``--spec-json`` (keeps ``--config`` overrides)."""
    return json.dumps(config["datasets"][dataset], sort_keys=True, separators=(",", ":"))


def url_datasets(config: dict) -> list[str]:
    return sorted(name for name, spec in (config.get("datasets") or {}).items()
                  if isinstance(spec, dict) and "url" in spec)


def url_dataset_pattern(config: dict) -> str:
    """Wildcard regex for ``{dataset}`` in the download rule: exactly the url datasets."""
    names = url_datasets(config)
    return "|".join(re.escape(n) for n in names) if names else _NEVER


def download_outputs(config: dict, cache: str | Path | None = None) -> list[str]:
    """Every cached file of every url dataset (a target to fetch all data up front)."""
    return [str(f.path) for name in url_datasets(config)
            for f in remote_files(name, _spec(config, name), cache)]


def prepare_inputs(config: dict, dataset: str, cache: str | Path | None = None) -> list[str]:
    """Files ``prepare`` reads: cached downloads (url), local files (path, generator deformed);
    else none."""
    spec = _spec(config, dataset)
    if source_kind(spec) == "url":
        return [str(f.path) for f in remote_files(dataset, spec, cache)]
    entry = spec.get("generator", spec)  # deformed: the generator names its files
    return [str(Path(entry[f"{role}path"]).expanduser()) for role in FILE_ROLES
            if f"{role}path" in entry]


def prepare_resources(config: dict, dataset: str) -> dict:
    """threads, mem_mb and runtime (minutes) for preparing ``dataset``.

    ``resources.prepare`` in the config wins; otherwise memory is estimated from one read block,
    one chunk of each output array, the PCA scatter matrix and the libraries.
    """
    explicit = ((config.get("resources") or {}).get("prepare") or {})
    spec = _spec(config, dataset)
    # deformed: MNIST-sized images assumed (its files are not read here)
    width = ((spec["generator"].get("n_features") or 784) if "generator" in spec
             else spec.get("n_features", 1000))
    chunk_mb = spec["chunk_rows"] * width * 4 / 2**20
    pca_mb = 3 * width * width * 8 / 2**20 if spec["preprocess"]["pca"] else 0
    mem_mb = int(600 + 6 * 16 + 4 * chunk_mb + pca_mb + (300 if is_deformed(spec) else 0))
    rows = spec["generator"]["n_samples"] if "generator" in spec else None
    runtime = 30 if rows is not None and rows * width < 10**9 else 240
    return {"threads": explicit.get("threads", 1), "mem_mb": explicit.get("mem_mb", mem_mb),
            "runtime": explicit.get("runtime", runtime)}
