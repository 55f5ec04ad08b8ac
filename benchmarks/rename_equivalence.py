"""Issue 13's renaming kept behaviour: every registry algorithm, at its defaults and with explicit
values in the old and the new names, gives the same test outputs before and after.

    git worktree add /tmp/old b511113            # the last commit with the old names
    PYTHONPATH=/tmp/old/src python benchmarks/rename_equivalence.py old /tmp/old.npz
    python benchmarks/rename_equivalence.py new /tmp/new.npz
    python benchmarks/rename_equivalence.py compare /tmp/old.npz /tmp/new.npz

Data: 1,500 training and 500 test rows of three real sets of ../shared/devdata (binary,
10-class, regression), standardised on the training rows."""
import sys
import time
import warnings
from pathlib import Path

import numpy as np

warnings.filterwarnings("ignore")
which, out = sys.argv[1], sys.argv[2]
if which == "compare":
    a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
    assert set(a) == set(b), set(a) ^ set(b)
    for k in a:
        d = float(np.max(np.abs(a[k] - b[k])))
        print(f"{k:28s} max|old - new| = {d:.3g}{'  (bit-identical)' if d == 0 else ''}")
    sys.exit(0)
if which == "old":
    from kernelscale import registry
else:
    from kernelscale.pipeline import registry
D = str(Path(__file__).resolve().parents[1].parent / "shared" / "devdata") + "/"


def load(name, n_tr=1500, n_te=500):
    a = np.loadtxt(D + name, delimiter=",")
    idx = np.random.default_rng(0).permutation(len(a))[: n_tr + n_te]
    X, y = a[idx, :-1], a[idx, -1]
    mu, sd = X[:n_tr].mean(0), X[:n_tr].std(0) + 1e-12
    X = (X - mu) / sd
    return X[:n_tr], y[:n_tr], X[n_tr:], y[n_tr:]
sets = {"spambase": ("classification", load("spambase.csv.gz")),
        "penbased": ("classification", load("penbased.csv.gz")),
        "elevators": ("regression", load("elevators.train.csv.gz"))}
sets["elevators"] = ("regression", tuple(v / (sets["elevators"][1][1].std() if i in (1, 3) else 1) for i, v in enumerate(sets["elevators"][1])))
# (algorithm, old params, new params)
CASES = [
 ("dsg", {"n_iter": 30}, {"n_iter": 30}),
 ("udsg", {"n_iter": 30}, {"n_iter": 30}),
 ("cdsg", {"n_iter": 30}, {"n_iter": 30}),
 ("dsg", {}, {}),
 ("eigenpro", {"n_iter": 20, "subsample_size": 500, "n_eigenvectors": 50}, {"n_iter": 20, "subsample_size": 500, "n_eigenvectors": 50}),
 ("eigenpro_rf", {"n_epochs": 2, "n_components": 300, "subsample_size": 500}, {"n_iter": "2 epochs", "n_components": 300, "subsample_size": 500}),
 ("eigenpro", {"subsample_size": 500}, {"subsample_size": 500}),
 ("kernel_sgd", {"n_iter": 20, "subsample_size": 500}, {"n_iter": 20, "subsample_size": 500}),
 ("rb_cg", {"n_grids": 64}, {"n_components": 64}),
 ("rb_cg", {"n_grids": 64, "reg": 1.0, "max_iter": 50}, {"n_components": 64, "reg": "1.0/n", "n_iter": 50}),
 ("rb_cd", {"n_grids": 64}, {"n_components": 64}),
 ("rff_sgd", {"n_iter": 60, "n_components": 300, "batch_size": 256}, {"n_iter": 60, "n_components": 300, "batch_size": 256}),
 ("rff_sgd", {"n_components": 300}, {"n_components": 300}),
 ("rff_svrg", {"n_epochs": 2, "n_components": 300, "alpha": 1e-4}, {"n_iter": "2 epochs", "n_components": 300, "reg": 1e-4}),
 ("nystrom", {"n_components": 300}, {"n_components": 300}),
 ("nystrom", {"n_components": 300, "alpha": 0.5}, {"n_components": 300, "reg": "0.5/n"}),
 ("exact_krr", {}, {}),
 ("exact_krr", {"alpha": 0.1}, {"reg": "0.1/n"}),
 ("libsvm", {}, {}),
 ("libsvm", {"C": 10.0}, {"reg": "0.1/n"}),
 ("pegasos", {"n_iter": 100}, {"n_iter": 100}),
 ("pegasos", {"lam": 1e-3}, {"reg": 1e-3}),
 ("norma", {"n_iter": 100, "budget": 500, "batch_size": 32}, {"n_iter": 100, "budget": 500, "batch_size": 32}),
 ("norma", {"lam": 1e-4, "n_epochs": 1}, {"reg": 1e-4, "n_iter": "1 epochs"}),
]
res = {}
for name, (task, (X, y, Xt, _)) in sets.items():
    for i, (algo, old, new) in enumerate(CASES):
        kinds = registry.ALGORITHMS[algo]
        kind = "classification" if task == "classification" else "regression"
        if kind not in kinds:
            continue
        params = old if which == "old" else new
        eng = {"device": "cpu"} if which == "old" else {"engine": {"device": "cpu"}}
        est = registry.make_estimator(algo, kind, random_state=0, **params, **eng)
        t = time.perf_counter()
        est.fit(X, y)
        p = est.decision_function(Xt) if hasattr(est, "decision_function") else est.predict(Xt)
        res[f"{name}/{i}/{algo}"] = np.asarray(p, dtype=float)
        print(f"{name} {i} {algo} {time.perf_counter() - t:.1f}s", flush=True)
np.savez(out, **res)
