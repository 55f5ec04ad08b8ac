"""Dataset entries of ``config.yaml``: schema check, semantic checks and defaults.

An entry has exactly one *source*: ``url`` + ``sha256`` (plus ``test_url``/``test_sha256``;
for idx also ``labels_url`` ...), ``path`` (local files: ``test_path`` ...), ``sklearn`` (a
loader bundled with scikit-learn) or ``generator`` (:mod:`.generators`; ``deformed`` takes its
test set from local IDX files). :func:`validate_dataset_spec` returns a normalized copy with
defaults filled in, or raises a one-line :class:`DataError` naming the key path.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

from .errors import DataError

SCHEMA_PATH = Path(__file__).resolve().parents[4] / "workflow" / "schemas" / "datasets.schema.yaml"

SOURCE_KINDS = ("url", "path", "sklearn", "generator")
TODO_SHA256 = "TODO-verify-on-first-download"
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")

# Files a source can have, by role; the prefix is the key prefix in the spec.
FILE_ROLES = ("", "labels_", "test_", "test_labels_")

# Offline scikit-learn loaders: name -> (task, n_features); not linnerud (three targets a row).
SKLEARN_LOADERS = {
    "digits": ("multiclass", 64),
    "iris": ("multiclass", 4),
    "wine": ("multiclass", 13),
    "breast_cancer": ("binary", 30),
    "diabetes": ("regression", 10),
}

DEFAULT_CHUNK_ROWS = 50_000
NORMALIZE = ("l2",)  # preprocess.normalize: per-row scaling after standardize / pca
DEFAULT_SPLIT = {"test_size": 0.2, "seed": 0}

GENERATOR_DEFAULTS = {
    "classification": {"seed": 0, "n_classes": 2, "class_sep": 1.0, "flip_y": 0.01},
    "regression": {"seed": 0, "noise": 0.1},
    "blobs": {"seed": 0, "centers": 3, "cluster_std": 1.0},
    "deformed": {"seed": 0, "alpha": 34.0, "sigma": 4.0, "max_shift": 1, "max_rotation": 0.0},
    "bayes": {"seed": 0, "noise": 0.3},
}
_GENERATOR_PARAMS = {
    "classification": {"n_features", "n_classes", "n_informative", "class_sep", "flip_y"},
    "regression": {"n_features", "noise"},
    "blobs": {"n_features", "centers", "cluster_std"},
    "deformed": {"path", "labels_path", "test_path", "test_labels_path", "alpha", "sigma",
                 "max_shift", "max_rotation"},
    "bayes": {"n_features", "noise"},
}


def source_kind(spec: dict) -> str:
    """Which of url / path / sklearn / generator the (validated) entry uses."""
    return next(kind for kind in SOURCE_KINDS if kind in spec)


def validate_dataset_spec(name: str, spec: Any) -> dict:
    """Check one ``datasets.<name>`` entry; return it normalized with defaults filled in.

    Raises :class:`DataError` with one line naming the key path, e.g.
    ``datasets.covtype.sha256: must be 64 hex characters``.
    """
    where = f"datasets.{name}"
    if not isinstance(spec, dict):
        raise DataError(f"{where}: must be a mapping, got {type(spec).__name__}")
    kinds = [kind for kind in SOURCE_KINDS if kind in spec]
    if len(kinds) != 1:
        raise DataError(f"{where}: exactly one of url, path, sklearn, generator is required "
                        f"(found: {', '.join(kinds) or 'none'})")
    _check_schema(name, spec)
    spec = copy.deepcopy(spec)
    kind = kinds[0]
    task = spec["task"]

    if kind in ("url", "path"):
        _check_file_source(where, spec, kind)
    else:
        for key in ("format", "archive", "n_features", "zero_based", "csv",
                    *(p + s for p in FILE_ROLES for s in ("url", "sha256", "filename", "path"))):
            if key in spec and key != kind:
                raise DataError(f"{where}.{key}: not used with a {kind} source")
    n_features = spec.get("n_features")
    if kind == "sklearn":
        loader = spec["sklearn"] = spec["sklearn"].removeprefix("load_")
        expected_task, n_features = SKLEARN_LOADERS[loader]
        if task != expected_task:
            raise DataError(f"{where}.task: sklearn '{loader}' is a {expected_task} dataset, "
                            f"not {task}")
    elif kind == "generator":
        spec["generator"] = _normalize_generator(where, spec["generator"], task)
        n_features = spec["generator"].get("n_features")  # deformed: the images' size

    has_test_file = "test_url" in spec or "test_path" in spec or is_deformed(spec)
    if has_test_file and "split" in spec:
        raise DataError(f"{where}.split: not used " + (
            "with generator deformed (its test set is generator.test_path, undeformed)"
            if is_deformed(spec) else "when a separate test file is given"))
    if not has_test_file:
        spec["split"] = {**DEFAULT_SPLIT, **spec.get("split", {})}

    preprocess = spec.setdefault("preprocess", {})
    preprocess.setdefault("standardize", False)
    pca = preprocess.setdefault("pca", None)
    if preprocess.get("sparse"):  # absent unless asked: dense specs (and their runs) unchanged
        if spec.get("format") != "libsvm":
            raise DataError(f"{where}.preprocess.sparse: only for format libsvm (this source is "
                            f"{spec.get('format') or kind})")
        if pca is not None:
            raise DataError(f"{where}.preprocess.sparse: pca would make every row dense; drop "
                            "preprocess.pca or preprocess.sparse")
    if "normalize" in preprocess:  # absent unless asked (null = absent): old specs unchanged
        if preprocess["normalize"] is None:
            del preprocess["normalize"]
        elif preprocess["normalize"] not in NORMALIZE:
            raise DataError(f"{where}.preprocess.normalize: {preprocess['normalize']!r} is not "
                            f"one of {', '.join(NORMALIZE)} or null")
    if pca is not None:
        pca.setdefault("center", True)
        if n_features is not None and pca["n_components"] > n_features:
            raise DataError(f"{where}.preprocess.pca.n_components: {pca['n_components']} is "
                            f"more than the {n_features} features")
    spec.setdefault("chunk_rows", DEFAULT_CHUNK_ROWS)
    return spec


def _check_schema(name: str, spec: dict) -> None:
    """Run the JSON schema on one entry; report the most relevant error as one line."""
    import jsonschema

    schema = load_schema()
    if schema is None:  # installed without the workflow folder: semantic checks only
        return
    entry_schema = {**schema["$defs"]["dataset"], "$defs": schema["$defs"]}
    validator = jsonschema.Draft202012Validator(entry_schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(spec))
    if error is None:
        return
    path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in error.absolute_path)
    message = error.message
    if error.validator == "additionalProperties":
        message = message.replace("Additional properties are not allowed", "unknown key")
    raise DataError(f"datasets.{name}{path}: {message}")


@functools.lru_cache(maxsize=1)
def load_schema() -> dict | None:
    """The datasets JSON schema (YAML file in ``workflow/schemas``), or None if not shipped."""
    import yaml

    return yaml.safe_load(SCHEMA_PATH.read_text()) if SCHEMA_PATH.exists() else None


def _check_file_source(where: str, spec: dict, kind: str) -> None:
    if "format" not in spec:
        raise DataError(f"{where}.format: required for a {kind} source "
                        "(one of libsvm, idx, csv, npz)")
    fmt = spec["format"]
    other = "path" if kind == "url" else "url"
    for role in FILE_ROLES:
        if f"{role}{other}" in spec:
            raise DataError(f"{where}.{role}{other}: cannot mix {kind} and {other} sources")
        for extra in ("sha256", "filename") if kind == "url" else ("filename", "sha256"):
            if f"{role}{extra}" in spec and f"{role}url" not in spec:
                raise DataError(f"{where}.{role}{extra}: " + (
                    f"given without {role}url" if kind == "url" else "only used with a url source"))
        if f"{role}url" in spec:
            if f"{role}sha256" not in spec:
                raise DataError(f"{where}.{role}sha256: required with {role}url "
                                f"(or write {TODO_SHA256} until it is known)")
            sha = spec[f"{role}sha256"]  # TODO_SHA256: the first download is pinned
            if sha != TODO_SHA256 and not _HEX64.match(sha):
                raise DataError(f"{where}.{role}sha256: must be 64 hex characters (a sha256 "
                                f"digest), got {sha!r}")
    has = {role: f"{role}{kind}" in spec for role in FILE_ROLES}
    if fmt == "idx":
        if not has["labels_"]:
            raise DataError(f"{where}.labels_{kind}: required for format idx (labels are a "
                            "separate file)")
        if has["test_"] != has["test_labels_"]:
            given = "test_" if has["test_"] else "test_labels_"
            missing = "test_labels_" if has["test_"] else "test_"
            raise DataError(f"{where}.{missing}{kind}: required for format idx when {given}{kind} "
                            "is given")
    for key, only in ((f"labels_{kind}", "idx"), (f"test_labels_{kind}", "idx"),
                      ("n_features", "libsvm"), ("zero_based", "libsvm"), ("csv", "csv")):
        if key in spec and fmt != only:
            raise DataError(f"{where}.{key}: only used with format {only}")
    if fmt == "csv":
        spec["csv"] = {"label_column": -1, "header": False, "delimiter": ",",
                       **spec.get("csv", {})}
        label = spec["csv"]["label_column"]
        if isinstance(label, str) and not spec["csv"]["header"]:
            raise DataError(f"{where}.csv.label_column: a column name needs header: true")
    if fmt == "libsvm":
        spec.setdefault("zero_based", False)


def is_deformed(spec: dict) -> bool:
    """Whether the entry is generated by deforming images (:mod:`.deformed`)."""
    return isinstance(spec.get("generator"), dict) and spec["generator"].get("name") == "deformed"


def _normalize_generator(where: str, gen: dict, task: str) -> dict:
    name = gen["name"]
    for key in gen:
        if key not in ("name", "n_samples", "seed") and key not in _GENERATOR_PARAMS[name]:
            hint = " (the width is the images')" if key == "n_features" else ""
            raise DataError(f"{where}.generator.{key}: not a parameter of generator {name}{hint}")
    gen = {**GENERATOR_DEFAULTS[name], **gen}
    if name == "deformed":
        if task == "regression":
            raise DataError(f"{where}.task: generator deformed makes a classification task (the "
                            "labels of its images), not regression")
        return gen
    if gen["n_samples"] < 2:
        raise DataError(f"{where}.generator.n_samples: {gen['n_samples']} is less than the "
                        f"minimum of 2")
    if name in ("bayes", "regression"):
        makes = "binary" if name == "bayes" else "regression"
        if task != makes:
            raise DataError(f"{where}.task: generator {name} makes a {makes} task, not {task}")
        if name == "regression":
            return gen
        from .bayes import check_params

        return check_params(gen, f"{where}.generator")
    count_key = "n_classes" if name == "classification" else "centers"
    expected = "binary" if gen[count_key] == 2 else "multiclass"
    if task != expected:
        raise DataError(f"{where}.task: generator {name} with {count_key}={gen[count_key]} makes "
                        f"a {expected} task, not {task}")
    if name == "classification":
        gen.setdefault("n_informative", min(gen["n_features"], max(2, gen["n_classes"])))
        if gen["n_informative"] > gen["n_features"]:
            raise DataError(f"{where}.generator.n_informative: {gen['n_informative']} is more "
                            f"than n_features={gen['n_features']}")
    return gen


def load_dataset_spec(config_path: str | Path, name: str) -> dict:
    """Read ``config_path`` (YAML), pick ``datasets[name]`` and validate it."""
    import yaml

    config_path = Path(config_path)
    if not config_path.exists():
        raise DataError(f"{config_path}: config file not found")
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
    except yaml.MarkedYAMLError as exc:  # file:line:column, like a compiler
        mark = exc.problem_mark or exc.context_mark
        where = f"{config_path}:{mark.line + 1}:{mark.column + 1}" if mark else str(config_path)
        raise DataError(f"{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise DataError(f"{config_path}: not valid YAML: {exc}") from None
    if not isinstance(config, dict):
        raise DataError(f"{config_path}: expected a mapping with a `datasets:` key at the top "
                        f"level, got {type(config).__name__}")
    datasets = config.get("datasets") or {}
    if not isinstance(datasets, dict):
        raise DataError(f"{config_path}: datasets: expected a mapping of name -> entry, got "
                        f"{type(datasets).__name__}")
    if name not in datasets:
        known = ", ".join(sorted(datasets)) or "none"
        raise DataError(f"{config_path}: datasets.{name} not found (known: {known})")
    return validate_dataset_spec(name, datasets[name])
