"""Dataset entries of ``config.yaml``: schema check, semantic checks and defaults.

An entry has exactly one *source*:

* ``url`` + ``sha256`` (plus ``test_url``/``test_sha256``; for idx also ``labels_url`` ...),
* ``path`` (a local file, e.g. licensed data; plus ``test_path`` ...),
* ``sklearn`` (a loader bundled with scikit-learn, no network),
* ``generator`` (synthetic data generated chunk by chunk; ``name: deformed`` deforms the images
  of local IDX files, MNIST-8M style, and takes its test set from them; ``name: bayes`` is a
  binary problem whose Bayes error is known and recorded in meta.json).

:func:`validate_dataset_spec` returns a normalized copy with defaults filled in and raises a
one-line :class:`DataError` naming the key path for the first problem it finds.
"""

from __future__ import annotations

import copy
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

# Offline scikit-learn loaders: name -> (task, n_features). linnerud is left out on purpose:
# its target has three columns and the pipeline handles one target per row.
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
        found = ", ".join(kinds) if kinds else "none"
        raise DataError(f"{where}: exactly one of url, path, sklearn, generator is required "
                        f"(found: {found})")
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
        loader = spec["sklearn"].removeprefix("load_")
        spec["sklearn"] = loader
        expected_task, n_features = SKLEARN_LOADERS[loader]
        if task != expected_task:
            raise DataError(f"{where}.task: sklearn '{loader}' is a {expected_task} dataset, "
                            f"not {task}")
    elif kind == "generator":
        spec["generator"] = _normalize_generator(where, spec["generator"], task)
        n_features = spec["generator"].get("n_features")  # deformed: the images' size

    if is_deformed(spec) and "split" in spec:
        raise DataError(f"{where}.split: not used with generator deformed (its test set is "
                        "generator.test_path, undeformed)")
    has_test_file = "test_url" in spec or "test_path" in spec or is_deformed(spec)
    if has_test_file and "split" in spec:
        raise DataError(f"{where}.split: not used when a separate test file is given")
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


_SCHEMA_CACHE: dict[str, dict | None] = {}


def load_schema() -> dict | None:
    """The datasets JSON schema (YAML file in ``workflow/schemas``), or None if not shipped."""
    if "schema" not in _SCHEMA_CACHE:
        import yaml

        _SCHEMA_CACHE["schema"] = (yaml.safe_load(SCHEMA_PATH.read_text())
                                   if SCHEMA_PATH.exists() else None)
    return _SCHEMA_CACHE["schema"]


def _check_sha256(key_path: str, value: str) -> None:
    if value == TODO_SHA256:  # not known yet: the download trusts and pins the first copy
        return
    if not _HEX64.match(value):
        raise DataError(f"{key_path}: must be 64 hex characters (a sha256 digest), got "
                        f"{value!r}")


def _check_file_source(where: str, spec: dict, kind: str) -> None:
    if "format" not in spec:
        raise DataError(f"{where}.format: required for a {kind} source "
                        "(one of libsvm, idx, csv, npz)")
    fmt = spec["format"]
    other = "path" if kind == "url" else "url"
    for role in FILE_ROLES:
        if f"{role}{other}" in spec:
            raise DataError(f"{where}.{role}{other}: cannot mix {kind} and {other} sources")
        if kind == "url":
            has_url = f"{role}url" in spec
            for extra in ("sha256", "filename"):
                if f"{role}{extra}" in spec and not has_url:
                    raise DataError(f"{where}.{role}{extra}: given without {role}url")
            if has_url:
                if f"{role}sha256" not in spec:
                    raise DataError(f"{where}.{role}sha256: required with {role}url "
                                    f"(or write {TODO_SHA256} until it is known)")
                _check_sha256(f"{where}.{role}sha256", spec[f"{role}sha256"])
        elif f"{role}filename" in spec or f"{role}sha256" in spec:
            key = f"{role}filename" if f"{role}filename" in spec else f"{role}sha256"
            raise DataError(f"{where}.{key}: only used with a url source")
    has = {role: f"{role}{kind}" in spec for role in FILE_ROLES}
    if fmt == "idx":
        if not has["labels_"]:
            raise DataError(f"{where}.labels_{kind}: required for format idx (labels are a "
                            "separate file)")
        if has["test_"] != has["test_labels_"]:
            missing = "test_labels_" if has["test_"] else "test_"
            raise DataError(f"{where}.{missing}{kind}: required for format idx when "
                            f"{'test_' if missing == 'test_labels_' else 'test_labels_'}{kind} "
                            "is given")
    else:
        for role in ("labels_", "test_labels_"):
            if has[role]:
                raise DataError(f"{where}.{role}{kind}: only used with format idx")
    if fmt != "libsvm":
        for key in ("n_features", "zero_based"):
            if key in spec:
                raise DataError(f"{where}.{key}: only used with format libsvm")
    if fmt != "csv" and "csv" in spec:
        raise DataError(f"{where}.csv: only used with format csv")
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
    if name == "bayes":
        from .bayes import check_params

        if task != "binary":
            raise DataError(f"{where}.task: generator bayes makes a binary task, not {task}")
        return check_params(gen, f"{where}.generator")
    if name == "regression":
        if task != "regression":
            raise DataError(f"{where}.task: generator regression makes a regression task, "
                            f"not {task}")
        return gen
    n_classes = gen["n_classes"] if name == "classification" else gen["centers"]
    expected = "binary" if n_classes == 2 else "multiclass"
    if task != expected:
        count_key = "n_classes" if name == "classification" else "centers"
        raise DataError(f"{where}.task: generator {name} with {count_key}={n_classes} makes a "
                        f"{expected} task, not {task}")
    if name == "classification":
        gen.setdefault("n_informative", min(gen["n_features"], max(2, n_classes)))
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
