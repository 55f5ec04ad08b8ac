"""Dataset entries: schema + semantic checks, one-line errors naming the key path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelscale.pipeline.data import DataError, validate_dataset_spec
from kernelscale.pipeline.data.spec import TODO_SHA256

HEX = "ab" * 32
URL = "https://example.org/data/covtype.libsvm.bz2"


def _error(spec, name="x") -> str:
    with pytest.raises(DataError) as err:
        validate_dataset_spec(name, spec)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_defaults_are_filled_in():
    spec = validate_dataset_spec("c", {"task": "binary", "url": URL, "sha256": HEX,
                                       "format": "libsvm"})
    assert spec["split"] == {"test_size": 0.2, "seed": 0}
    assert spec["preprocess"] == {"standardize": False, "pca": None}
    assert spec["chunk_rows"] == 50_000 and spec["zero_based"] is False
    gen = validate_dataset_spec("g", {"task": "multiclass", "preprocess": {"pca": {
        "n_components": 2}}, "generator": {"name": "blobs", "n_samples": 10, "n_features": 3}})
    assert gen["generator"]["centers"] == 3 and gen["preprocess"]["pca"]["center"] is True
    assert validate_dataset_spec("d", {"task": "multiclass", "sklearn": "load_digits"})[
        "sklearn"] == "digits"
    csv = validate_dataset_spec("t", {"task": "regression", "path": "a.csv", "format": "csv"})
    assert csv["csv"] == {"label_column": -1, "header": False, "delimiter": ","}


def test_normalize_is_recorded_only_when_set():
    base = {"task": "binary", "url": URL, "sha256": HEX, "format": "libsvm"}
    plain = validate_dataset_spec("c", base)
    assert validate_dataset_spec("c", {**base, "preprocess": {"normalize": None}}) == plain
    unit = validate_dataset_spec("c", {**base, "preprocess": {"normalize": "l2"}})
    assert unit["preprocess"] == {"standardize": False, "pca": None, "normalize": "l2"}
    assert validate_dataset_spec("c", unit) == unit


def test_normalized_spec_validates_again():
    spec = validate_dataset_spec("g", {"task": "binary", "generator": {
        "name": "classification", "n_samples": 100, "n_features": 5}})
    assert validate_dataset_spec("g", spec) == spec


@pytest.mark.parametrize("spec, message", [
    ({"task": "binary"}, "datasets.x: exactly one of url, path, sklearn, generator is required "
                         "(found: none)"),
    ({"task": "binary", "url": URL, "sha256": HEX, "path": "a", "format": "libsvm"},
     "datasets.x: exactly one of url, path, sklearn, generator is required (found: url, path)"),
    ({"task": "binary", "url": URL, "sha256": "abc", "format": "libsvm"},
     "datasets.x.sha256: must be 64 hex characters"),
    ({"task": "binary", "url": URL, "format": "libsvm"}, "datasets.x.sha256: required with url"),
    ({"task": "binary", "url": URL, "sha256": HEX}, "datasets.x.format: required for a url"),
    ({"task": "binary", "url": URL, "sha256": HEX, "format": "libsvm", "test_url": URL},
     "datasets.x.test_sha256: required with test_url"),
    ({"task": "binary", "url": URL, "sha256": HEX, "format": "libsvm", "test_url": URL,
      "test_sha256": HEX, "split": {"test_size": 0.1}},
     "datasets.x.split: not used when a separate test file is given"),
    ({"task": "binary", "url": "ftp://host/a", "sha256": HEX, "format": "libsvm"},
     "datasets.x.url: 'ftp://host/a' does not match"),
    ({"task": "classify", "sklearn": "iris"}, "datasets.x.task: 'classify' is not one of"),
    ({"task": "binary", "sklearn": "iris"},
     "datasets.x.task: sklearn 'iris' is a multiclass dataset, not binary"),
    ({"task": "regression", "sklearn": "california_housing"}, "datasets.x.sklearn: "),
    ({"task": "binary", "sklearn": "wine", "format": "csv"},
     "datasets.x.format: not used with a sklearn source"),
    ({"task": "binary", "path": "a.idx", "format": "idx"},
     "datasets.x.labels_path: required for format idx"),
    ({"task": "binary", "path": "a", "format": "csv", "labels_path": "b"},
     "datasets.x.labels_path: only used with format idx"),
    ({"task": "binary", "path": "a", "format": "csv", "n_features": 3},
     "datasets.x.n_features: only used with format libsvm"),
    ({"task": "binary", "path": "a", "format": "csv", "csv": {"label_column": "y"}},
     "datasets.x.csv.label_column: a column name needs header: true"),
    ({"task": "binary", "path": "a", "format": "libsvm", "sha256": HEX},
     "datasets.x.sha256: only used with a url source"),
    ({"task": "binary", "url": URL, "sha256": HEX, "format": "libsvm", "test_path": "t"},
     "datasets.x.test_path: cannot mix url and path sources"),
    ({"task": "multiclass", "generator": {"name": "classification", "n_samples": 9,
                                          "n_features": 2}},
     "datasets.x.task: generator classification with n_classes=2 makes a binary task"),
    ({"task": "regression", "generator": {"name": "regression", "n_samples": 9,
                                          "n_features": 2, "centers": 3}},
     "datasets.x.generator.centers: not a parameter of generator regression"),
    ({"task": "binary", "generator": {"name": "classification", "n_samples": 9,
                                      "n_features": 2, "n_informative": 5}},
     "datasets.x.generator.n_informative: 5 is more than n_features=2"),
    ({"task": "regression", "generator": {"name": "regression", "n_samples": 9,
                                          "n_features": 2}, "preprocess": {"pca": {
                                              "n_components": 3}}},
     "datasets.x.preprocess.pca.n_components: 3 is more than the 2 features"),
    ({"task": "binary", "sklearn": "breast_cancer", "split": {"test_size": 1.5}},
     "datasets.x.split.test_size: 1.5 is greater than or equal to the maximum of 1"),
    ({"task": "binary", "sklearn": "breast_cancer", "preprocess": {"normalize": "l1"}},
     "datasets.x.preprocess.normalize: 'l1' is not one of ['l2', None]"),
    ({"task": "binary", "sklearn": "breast_cancer", "chunk_rows": 0},
     "datasets.x.chunk_rows: 0 is less than the minimum of 1"),
    ({"task": "binary", "sklearn": "breast_cancer", "colour": "red"},
     "datasets.x: unknown key ('colour' was unexpected)"),
])
def test_errors_name_the_key(spec, message):
    assert _error(spec).startswith(message)


def test_todo_checksum_is_accepted_but_not_a_guess():
    """TODO-verify-on-first-download stands for "not known yet" (the download trusts and pins
    the first copy); any other non-digest is still an error."""
    spec = validate_dataset_spec("covtype", {"task": "binary", "url": URL, "sha256": TODO_SHA256,
                                             "format": "libsvm"})
    assert spec["sha256"] == TODO_SHA256
    message = _error({"task": "binary", "url": URL, "sha256": "TODO", "format": "libsvm"},
                     name="covtype")
    assert message.startswith("datasets.covtype.sha256: must be 64 hex characters")


PAPERS = Path(__file__).resolve().parents[1] / "config" / "papers.yaml"


def test_papers_yaml_entries_are_valid():
    """Every entry of config/papers.yaml passes; a digest is either known or the TODO marker,
    never an invented hash."""
    datasets = yaml.safe_load(PAPERS.read_text())["datasets"]
    assert {"covtype", "ijcnn1", "cod_rna", "susy", "cadata", "yearpredictionmsd", "mnist",
            "mnist8m", "letter", "a9a", "epsilon", "timit", "cifar10"} <= set(datasets)
    for name, spec in datasets.items():
        validate_dataset_spec(name, spec)
