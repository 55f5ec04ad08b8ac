"""Every estimator's device="gpu" path against its CPU path, and GPU models on CPU-only hosts.

Random features and subsamples are drawn on the host from the seed, so CPU and GPU fits differ
only by the order of floating-point additions (cuBLAS vs OpenBLAS). Stated tolerance: float64
outputs agree to 1e-6 x (1 + max |output|); float32 to 2e-3 x (1 + max |output|).
"""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_data import classification, regression

from kernelscale.backend import DeviceError
from kernelscale.estimators import (
    DSGClassifier,
    DSGRegressor,
    EigenProRegressor,
    EigenProRFClassifier,
    EigenProRFRegressor,
    ExactKRRClassifier,
    ExactKRRRegressor,
    ExactSVMClassifier,
    NORMAClassifier,
    NORMARegressor,
    NystromRidgeClassifier,
    NystromRidgeRegressor,
    PegasosClassifier,
    RBClassifier,
    RBRegressor,
    RFFSGDClassifier,
    RFFSGDRegressor,
)

DSG = dict(n_iter=30, batch_size=100, block_size=64, bandwidth=2.0)
EP = dict(n_eigenvectors=20, subsample_size=300, n_components=300, batch_size=64, n_iter="2 epochs")
EP_KERNEL = {k: v for k, v in EP.items() if k != "n_components"}  # random features only

# (id, factory(**device/dtype/seed), task); every estimator with a GPU path is here
CG = {"solver": "cg", "tol": 1e-10, "n_iter": 300}
CASES = [
    ("dsg", lambda **k: DSGRegressor(solver="dsg", **DSG, **k), "reg"),
    ("udsg", lambda **k: DSGRegressor(solver="udsg", **DSG, **k), "reg"),
    ("cdsg", lambda **k: DSGRegressor(solver="cdsg", **DSG, **k), "reg"),
    ("dsg-eigenpro", lambda **k: DSGRegressor(precondition="eigenpro", **DSG, **k), "reg"),
    ("dsg-clf-newton", lambda **k: DSGClassifier(**DSG, **k), "clf3"),
    ("udsg-clf-hinge", lambda **k: DSGClassifier(solver="udsg", loss="hinge", **DSG, **k), "clf"),
    ("eigenpro-kernel", lambda **k: EigenProRegressor(**EP_KERNEL, **k), "reg"),
    ("eigenpro-rff", lambda **k: EigenProRFRegressor(**EP, **k), "reg"),
    ("eigenpro-rff-clf", lambda **k: EigenProRFClassifier(**EP, **k), "clf3"),
    ("rb-cg", lambda **k: RBRegressor(n_components=32, tol=1e-10, **_no_dtype(k)), "reg"),
    ("rb-cg-clf", lambda **k: RBClassifier(n_components=32, tol=1e-10, **_no_dtype(k)), "clf"),
    # batch_size pinned: "auto" is larger on a GPU by design (solvers.rff_sgd.auto_batch_size)
    ("rff-sgd", lambda **k: RFFSGDRegressor(n_components=100, n_iter="3 epochs", batch_size=64,
                                            **k), "reg"),
    ("rff-svrg-clf", lambda **k: RFFSGDClassifier(solver="svrg", n_components=100, n_iter="3 epochs",
                                                  batch_size=64, **k), "clf"),
    ("nystrom", lambda **k: NystromRidgeRegressor(n_components=100, **k), "reg"),
    ("nystrom-clf", lambda **k: NystromRidgeClassifier(n_components=100, **k), "clf3"),
    # CG run to convergence: an unconverged last iterate depends on the kernel's rounding, which
    # differs between the host's tiles and the GPU's blocks
    ("nystrom-cg", lambda **k: NystromRidgeRegressor(n_components=100, **CG, **k), "reg"),
    ("nystrom-cg-clf", lambda **k: NystromRidgeClassifier(n_components=100, **CG, **k), "clf3"),
    ("exact-krr", lambda **k: ExactKRRRegressor(**k), "reg"),
    ("exact-krr-clf", lambda **k: ExactKRRClassifier(**k), "clf"),
    ("pegasos", lambda **k: PegasosClassifier(n_iter="2 epochs", **k), "clf"),
    ("norma", lambda **k: NORMARegressor(max_terms=50, n_iter="2 epochs", **k), "reg"),
    ("norma-clf", lambda **k: NORMAClassifier(max_terms=50, n_iter="2 epochs", **k), "clf"),
]
IDS = [c[0] for c in CASES]


def _no_dtype(k):
    return {key: v for key, v in k.items() if key != "dtype"}  # RB-CG works in float64


def _data(task):
    if task == "reg":
        return regression()
    return classification(n_classes=3 if task == "clf3" else 2)


def _output(est, X):
    f = getattr(est, "decision_function", None) or est.predict
    return np.asarray(f(X), dtype=np.float64)


def _close(a, b, tol):
    return np.max(np.abs(a - b)) <= tol * (1 + np.max(np.abs(b)))


@pytest.mark.parametrize("make, task", [c[1:] for c in CASES], ids=IDS)
def test_same_seed_same_predictions_on_cpu_and_gpu(make, task):
    # float64 (the DSG family's "auto" is float32: test_float32_gpu_matches_float32_cpu)
    X, y = _data(task)
    cpu = make(engine={"device": "cpu", "dtype": "float64"}, random_state=0).fit(X, y)
    gpu = make(engine={"device": "gpu", "dtype": "float64"}, random_state=0).fit(X, y)
    assert gpu.device_ == "gpu"
    a, b = _output(gpu, X), _output(cpu, X)
    assert _close(a, b, 1e-6), np.max(np.abs(a - b))
    again = make(engine={"device": "gpu", "dtype": "float64"}, random_state=0).fit(X, y)
    assert _close(_output(again, X), a, 1e-10)


FLOAT32 = ["dsg", "cdsg", "dsg-clf-newton", "eigenpro-rff", "rff-sgd", "nystrom", "nystrom-cg",
           "exact-krr"]


@pytest.mark.parametrize("make, task", [c[1:] for c in CASES if c[0] in FLOAT32], ids=FLOAT32)
def test_float32_gpu_matches_float32_cpu(make, task):
    X, y = _data(task)
    cpu = make(engine={"device": "cpu", "dtype": "float32"}, random_state=0).fit(X, y)
    gpu = make(engine={"device": "gpu", "dtype": "float32"}, random_state=0).fit(X, y)
    assert _close(_output(gpu, X), _output(cpu, X), 2e-3)


_CPU_ONLY = textwrap.dedent("""
    import pickle, sys
    import numpy as np

    class NoCupy:  # this process plays a host without a GPU: cupy cannot even be imported
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("cupy", "cupyx"):
                raise ImportError("no cupy on this host")
    sys.meta_path.insert(0, NoCupy())
    est = pickle.load(open(sys.argv[1], "rb"))
    X = np.load(sys.argv[2])
    f = getattr(est, "decision_function", None) or est.predict
    np.save(sys.argv[3], np.asarray(f(X), dtype=np.float64))
    assert "cupy" not in sys.modules
""")


@pytest.mark.parametrize("make, task", [c[1:] for c in CASES], ids=IDS)
def test_gpu_model_predicts_on_a_cpu_only_host(make, task, tmp_path):
    X, y = _data(task)
    gpu = make(engine={"device": "gpu"}, random_state=0).fit(X, y)
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(gpu))
    np.save(tmp_path / "X.npy", X)
    subprocess.run([sys.executable, "-c", _CPU_ONLY, str(tmp_path / "m.pkl"),
                    str(tmp_path / "X.npy"), str(tmp_path / "out.npy")], check=True)
    # the same model on two devices: equal to the rounding of its precision (the DSG family's
    # "auto" is float32; the others' float64)
    tol = 1e-8 if gpu.engine_.dtype == "float64" else 1e-4
    assert _close(np.load(tmp_path / "out.npy"), _output(gpu, X), tol)


def test_cupy_input_is_accepted(cp):
    X, y = classification(n_classes=3)
    for make in (lambda: DSGClassifier(**DSG, engine={"device": "gpu"}, random_state=0),
                 lambda: RBClassifier(n_components=32, engine={"device": "gpu"}, random_state=0),
                 lambda: EigenProRFClassifier(**EP, engine={"device": "gpu"}, random_state=0)):
        a = make().fit(cp.asarray(X), y)
        b = make().fit(X, y)
        assert (a.predict(cp.asarray(X)) == b.predict(X)).mean() > 0.99


def test_cpu_only_solvers_refuse_gpu_in_one_line():
    X, y = classification()
    for est, match in ((RBRegressor(solver="cd", engine={"device": "gpu"}), "CPU only"),
                       (ExactSVMClassifier(engine={"device": "gpu"}), "CPU only")):
        with pytest.raises(DeviceError, match=match) as e:
            est.fit(X, y)
        assert "\n" not in str(e.value)
