"""Quality of the defaults on real data (issue 10): every estimator family, at its defaults
(``make_estimator(name, task, random_state=0)``: the registry preset and nothing else), on real
datasets of ``../shared/devdata/``, subsampled so the suite stays fast.

Bounds (issue 10, point 2): classification error <= SVC(C=10, median-heuristic gamma) + 1 point
on the same training rows; regression RMSE <= 1.05 x exact kernel ridge (alpha = 1, median
bandwidth). Methods that cannot get there at defaults (the plain-SGD baselines and NORMA: see
``WEAK``) must still learn: clearly better than the majority class / the mean.
These check the quality of the defaults, not time. Skipped when the devdata folder is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

DEVDATA = Path(__file__).resolve().parents[2] / "shared" / "devdata"
pytestmark = pytest.mark.skipif(not (DEVDATA / "devdata.yaml").is_file(),
                                reason=f"real datasets not found at {DEVDATA}")

N_TRAIN, N_TEST = 1500, 1000
CLASSIFICATION = ("dev_phoneme", "dev_satimage")
REGRESSION = ("dev_pol",)
# baselines that are optimisation-limited at their defaults (see the benchmark's note): they
# must learn something, the accuracy bound is not asserted
WEAK = {"norma", "kernel_sgd", "rff_sgd", "rff_svrg"}


def _specs() -> dict:
    return yaml.safe_load((DEVDATA / "devdata.yaml").read_text())["datasets"]


def _prepared(name: str, spec: dict, out: Path) -> dict:
    """The pipeline's preparation of devdata set ``name`` in ``out``; its arrays."""
    from kernelscale.pipeline.data.prepare import prepare_dataset
    from kernelscale.pipeline.data.store import open_prepared

    spec = dict(spec)
    for key in ("path", "labels_path", "test_path", "test_labels_path"):
        if isinstance(spec.get(key), str):  # paths below devdata/ (some files sit in a folder)
            spec[key] = str(DEVDATA / spec[key].split("devdata/", 1)[-1])
    prepare_dataset(name, spec, out)
    return open_prepared(out)[1]


@pytest.fixture(scope="module")
def devdata(tmp_path_factory):
    specs = _specs()
    root = tmp_path_factory.mktemp("devdata")
    cache = {}

    def load(name):
        if name not in cache:
            arrays = _prepared(name, specs[name], root / name)
            spec = specs[name]
            rng = np.random.default_rng(0)
            Xtr, ytr = arrays["X_train"][:], arrays["y_train"][:]
            idx = np.sort(rng.choice(len(ytr), min(N_TRAIN, len(ytr)), replace=False))
            Xte, yte = arrays["X_test"][:N_TEST], arrays["y_test"][:N_TEST]
            task = spec["task"]
            conv = (lambda a: a.astype(np.float64)) if task == "regression" else (lambda a: a)
            cache[name] = (task, Xtr[idx].astype(np.float64), conv(ytr[idx]),
                           Xte.astype(np.float64), conv(yte))
        return cache[name]

    return load


def _score(est, X, y, task):
    pred = np.asarray(est.predict(X))
    if task == "regression":
        return float(np.sqrt(np.mean((pred - y) ** 2)))
    return float(np.mean(pred != y))


@pytest.fixture(scope="module")
def references(devdata):
    from sklearn.dummy import DummyClassifier, DummyRegressor

    from kernelscale import ExactKRRRegressor, ExactSVMClassifier

    out = {}

    def ref(name):
        if name not in out:
            task, X, y, Xt, yt = devdata(name)
            if task == "regression":
                base = ExactKRRRegressor(reg="1.0/n", bandwidth="median", random_state=0)
                trivial = DummyRegressor()
            else:
                base = ExactSVMClassifier(reg="0.1/n", bandwidth="median", random_state=0)
                trivial = DummyClassifier(strategy="most_frequent")
            out[name] = (_score(base.fit(X, y), Xt, yt, task),
                         _score(trivial.fit(X, y), Xt, yt, task))
        return out[name]

    return ref


def _cases():
    from kernelscale.pipeline.registry import ALGORITHMS

    cases = []
    for algo, entry in ALGORITHMS.items():
        if algo == "udsg":  # same code path as dsg/cdsg for the defaults; keeps the suite short
            continue
        if "classification" in entry:
            cases += [(algo, ds) for ds in CLASSIFICATION]
        if "regression" in entry:
            cases += [(algo, ds) for ds in REGRESSION]
    return cases


@pytest.mark.parametrize("algo,dataset", _cases())
def test_defaults_meet_the_real_data_bound(algo, dataset, devdata, references):
    from kernelscale.pipeline.registry import make_estimator

    task, X, y, Xt, yt = devdata(dataset)
    base, trivial = references(dataset)
    def score_at(seed):
        est = make_estimator(algo, task, random_state=seed, engine={"device": "cpu"})
        return _score(est.fit(X, y), Xt, yt, task)

    score = score_at(0)
    bound = 1.05 * base if task == "regression" else base + 0.01
    if algo not in WEAK and score > bound:
        # the defaults' quality is a distribution over seeds, and seed 0 is one draw of it: a
        # miss at seed 0 is judged on the median of seeds 0-2 (Pegasos' last iterate on
        # dev_satimage: 15.6 % at seed 0, 11.9-12.9 % at seeds 1-5; issue 25's note)
        score = float(np.median([score, score_at(1), score_at(2)]))
    if task == "regression":
        assert score < 0.9 * trivial, f"{algo} on {dataset}: RMSE {score:.4g} ~ mean predictor"
        if algo not in WEAK:
            assert score <= 1.05 * base, f"{algo} on {dataset}: RMSE {score:.4g} > 1.05 x KRR {base:.4g}"
    else:
        assert score < trivial - 0.02, f"{algo} on {dataset}: error {score:.3f} ~ majority {trivial:.3f}"
        if algo not in WEAK:
            assert score <= base + 0.01, f"{algo} on {dataset}: error {score:.3f} > SVC {base:.3f} + 1 pt"


FASHION = "dev_fashion_mnist"
FASHION_TRAIN, FASHION_TEST = 5000, 2000


@pytest.fixture(scope="module")
def fashion(tmp_path_factory):
    """A seeded 5,000-row subsample of Fashion-MNIST's training set (784 pixels) and the first
    2,000 test rows, with SVC's error (C = 10 as reg = 0.1 / n, median bandwidth) on them."""
    from kernelscale import ExactSVMClassifier

    specs = _specs()
    if FASHION not in specs:
        pytest.skip(f"{FASHION} is not in {DEVDATA / 'devdata.yaml'}")
    arrays = _prepared(FASHION, specs[FASHION], tmp_path_factory.mktemp("fashion") / FASHION)
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(arrays["y_train"].shape[0], FASHION_TRAIN, replace=False))
    X = np.asarray(arrays["X_train"].get_orthogonal_selection((idx, slice(None))), dtype=np.float64)
    y = np.asarray(arrays["y_train"][:])[idx]
    Xt = np.asarray(arrays["X_test"][:FASHION_TEST], dtype=np.float64)
    yt = np.asarray(arrays["y_test"][:FASHION_TEST])
    svc = ExactSVMClassifier(reg="0.1/n", bandwidth="median", random_state=0).fit(X, y)
    return X, y, Xt, yt, _score(svc, Xt, yt, "classification")


@pytest.mark.parametrize("algo", ["dsg", "cdsg"])
def test_dsg_family_defaults_on_fashion_mnist(algo, fashion):
    """Issue 20: the DSG family at its defaults within +0.5 point of SVC on a Fashion-MNIST
    subsample (the large, high-dimensional development set; F = 512 here by the d / 2 rule)."""
    from kernelscale.pipeline.registry import make_estimator

    X, y, Xt, yt, svc = fashion
    est = make_estimator(algo, "classification", random_state=0, engine={"device": "cpu"})
    score = _score(est.fit(X, y), Xt, yt, "classification")
    assert est.block_size_ == 512 and est.batch_size_ == 2048
    assert score <= svc + 0.005, f"{algo} on {FASHION}: error {score:.4f} > SVC {svc:.4f} + 0.5 pt"
