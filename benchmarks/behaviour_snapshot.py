"""Issue 24's check that a restructuring kept behaviour: every registry algorithm, at its
defaults and with explicit settings, fitted on development data; the test outputs (decision
function where there is one, else predictions) and the pickled model's predictions are saved,
and two snapshots are compared bit for bit.

    git worktree add /tmp/before <commit>        # the code before the change
    PYTHONPATH=/tmp/before/src python benchmarks/behaviour_snapshot.py take /tmp/before.npz
    python benchmarks/behaviour_snapshot.py take /tmp/after.npz
    python benchmarks/behaviour_snapshot.py compare /tmp/before.npz /tmp/after.npz

Data: 1,500 training and 500 test rows of three sets of ../shared/devdata (binary spambase,
10-class penbased, regression elevators with y scaled to unit variance), standardised on the
training rows. Run with one BLAS thread (the sums' order must not depend on the machine's
load)."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pickle  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

D = Path(__file__).resolve().parents[1].parent / "shared" / "devdata"

# (algorithm, explicit parameters); each algorithm also runs at its defaults ({})
CASES = [
    ("dsg", {"n_iter": 30}), ("udsg", {"n_iter": 30}), ("cdsg", {"n_iter": 30}),
    ("dsg", {"n_iter": "2 epochs", "batch_size": 256, "block_size": 64, "reg": 1e-4}),
    ("eigenpro", {"n_iter": 20, "subsample_size": 500, "n_eigenvectors": 50}),
    ("eigenpro_rf", {"n_iter": "2 epochs", "n_components": 300, "subsample_size": 500}),
    ("kernel_sgd", {"n_iter": 20, "subsample_size": 500}),
    ("rb_cg", {"n_components": 64, "reg": "1.0/n", "n_iter": 50}),
    ("rb_cd", {"n_components": 64}),
    ("rff_sgd", {"n_iter": 60, "n_components": 300, "batch_size": 256}),
    ("rff_svrg", {"n_iter": "2 epochs", "n_components": 300, "reg": 1e-4}),
    ("nystrom", {"n_components": 300, "reg": "0.5/n"}),
    ("exact_krr", {"reg": "0.1/n"}),
    ("libsvm", {"reg": "0.1/n"}),
    ("pegasos", {"n_iter": 100, "reg": 1e-3}),
    ("norma", {"n_iter": 100, "max_terms": 500, "batch_size": 32}),
    ("norma", {"reg": 1e-4, "n_iter": "1 epochs"}),
]


def load(name, n_tr=1500, n_te=500):
    a = np.loadtxt(D / name, delimiter=",")
    idx = np.random.default_rng(0).permutation(len(a))[: n_tr + n_te]
    X, y = a[idx, :-1], a[idx, -1]
    mu, sd = X[:n_tr].mean(0), X[:n_tr].std(0) + 1e-12
    X = (X - mu) / sd
    return X[:n_tr], y[:n_tr], X[n_tr:]


def take(out):
    from kernelscale.pipeline import registry

    warnings.filterwarnings("ignore")
    sets = {"spambase": ("classification", load("spambase.csv.gz")),
            "penbased": ("classification", load("penbased.csv.gz"))}
    X, y, Xt = load("elevators.train.csv.gz")
    sets["elevators"] = ("regression", (X, y / y.std(), Xt))
    cases = [(a, {}) for a in dict.fromkeys(a for a, _ in CASES)] + CASES
    res = {}
    for name, (task, (X, y, Xt)) in sets.items():
        for i, (algo, params) in enumerate(cases):
            if task not in registry.ALGORITHMS[algo]:
                continue
            est = registry.make_estimator(algo, task, random_state=0, engine={"device": "cpu"},
                                          **params)
            t = time.perf_counter()
            est.fit(X, y)
            f = getattr(est, "decision_function", est.predict)
            res[f"{name}/{i}/{algo}"] = np.asarray(f(Xt), dtype=float)
            res[f"{name}/{i}/{algo}/pickled"] = np.asarray(
                pickle.loads(pickle.dumps(est)).predict(Xt), dtype=float)
            print(f"{name} {i} {algo} {params} {time.perf_counter() - t:.1f}s", flush=True)
    np.savez(out, **res)


def compare(a_path, b_path) -> int:
    a, b = np.load(a_path), np.load(b_path)
    if set(a) != set(b):
        print("different cases:", sorted(set(a) ^ set(b)))
        return 1
    bad = 0
    for k in a:
        same = a[k].shape == b[k].shape and np.array_equal(a[k], b[k])
        bad += not same
        d = "" if same else f"  max |before - after| = {np.max(np.abs(a[k] - b[k])):.3g}"
        print(f"{k:36s} {'bit-identical' if same else 'DIFFERENT'}{d}")
    print(f"{len(a) - bad} of {len(a)} outputs bit-identical")
    return int(bad > 0)


if __name__ == "__main__":
    if sys.argv[1] == "take":
        take(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
