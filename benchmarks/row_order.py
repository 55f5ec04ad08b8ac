"""Issue 25.1: does the storage order of the training rows change the model?

The same training rows, once in a seeded random order and once sorted by label (as CSV / KEEL
files often are), in memory and in a zarr array with small row chunks, fitted at the estimators'
defaults; the test error should not depend on the order beyond the seeds' own spread.

    python benchmarks/row_order.py --data digits --seeds 0 1 2
    python benchmarks/row_order.py --data penbased --chunk 200 --estimators dsg rff_sgd

``digits``: scikit-learn's 8x8 digits, 1,400 training / 397 test rows (``train_test_split``,
``random_state=0``); any other name: ``<devdata>/<name>.csv.gz`` (label in the last column;
``--devdata``, default ``../shared/devdata``), 80/20 split, ``random_state=0``. Both standardized on the training rows.
``--pieces K`` overrides ``stream.PIECES_PER_WINDOW`` (to measure the rule).
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEVDATA = REPO.parent / "shared" / "devdata"


def load(name: str, devdata: Path = DEVDATA):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        split = dict(test_size=397, random_state=0)
    else:
        with gzip.open(devdata / f"{name}.csv.gz", "rt") as f:
            A = np.loadtxt(f, delimiter=",")
        X, y = A[:, :-1], A[:, -1].astype(int)
        split = dict(test_size=0.2, random_state=0)
    Xtr, Xte, ytr, yte = train_test_split(X, y, **split)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), ytr, scaler.transform(Xte), yte


def estimator(name: str, seed: int):
    import kernelscale as ks

    return {"dsg": lambda: ks.DSGClassifier(random_state=seed),
            "rff_sgd": lambda: ks.RFFSGDClassifier(random_state=seed),
            "norma": lambda: ks.NORMAClassifier(random_state=seed),
            "eigenpro_rff": lambda: ks.EigenProClassifier(method="rff", random_state=seed)}[name]()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="digits")
    ap.add_argument("--estimators", nargs="+", default=["dsg", "rff_sgd"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--devdata", type=Path, default=DEVDATA)
    ap.add_argument("--chunk", type=int, default=200, help="zarr rows per chunk")
    ap.add_argument("--pieces", type=int, default=None)
    ap.add_argument("--only", nargs="+", default=None,
                    help="cases to run, e.g. sorted/zarr shuffled/memory (default: all four)")
    args = ap.parse_args(argv)
    import zarr

    from kernelscale import stream

    if args.pieces is not None:
        stream.PIECES_PER_WINDOW = args.pieces
    Xtr, ytr, Xte, yte = load(args.data, args.devdata)
    orders = {"shuffled": np.random.default_rng(0).permutation(len(ytr)),
              "sorted": np.argsort(ytr, kind="stable")}
    tmp = Path(tempfile.mkdtemp())
    cases = []
    for order_name, order in orders.items():
        X, y = Xtr[order], ytr[order]
        Z = zarr.open_array(tmp / f"{order_name}.zarr", mode="w", shape=X.shape,
                            chunks=(args.chunk, X.shape[1]), dtype=X.dtype)
        Z[:] = X
        cases += [(order_name, "memory", X, y), (order_name, f"zarr/{args.chunk}", Z, y)]
    if args.only:
        cases = [c for c in cases if f"{c[0]}/{c[1].split('/')[0]}" in args.only]
    print(f"{args.data}: {len(ytr)} train / {len(yte)} test rows, seeds {args.seeds}"
          + (f", PIECES_PER_WINDOW={args.pieces}" if args.pieces else ""))
    print("| estimator | order | storage | test error % (per seed) | mean | fit s |")
    print("|---|---|---|---|---|---|")
    for name in args.estimators:
        for order_name, medium, X, y in cases:
            errs, secs = [], []
            for seed in args.seeds:
                t0 = time.perf_counter()
                model = estimator(name, seed).fit(X, y)
                secs.append(time.perf_counter() - t0)
                errs.append(100 * float(np.mean(model.predict(Xte) != yte)))
            print(f"| {name} | {order_name} | {medium} | {' '.join(f'{e:.2f}' for e in errs)} | "
                  f"{np.mean(errs):.2f} | {np.mean(secs):.1f} |", flush=True)


if __name__ == "__main__":
    main()
