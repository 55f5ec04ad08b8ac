"""Cost of DSG, UDSG and CDSG iterations (issue: core library benchmark).

Prints, per variant, the wall time of an iteration against the iteration count (DSG's cost grows
linearly with the number of blocks; UDSG/CDSG add fewer blocks) and the throughput of the feature
work in (points x features x dims)/s, next to the float32 matrix-multiply rate measured in the same
run. One multiply-add of X @ W per (point, feature, dim) is 2 flops, so throughput x 2 / matmul
rate is the fraction of the machine's GEMM speed the iterations reach.

    .venv/bin/python benchmarks/dsg_cost.py --n-iter 200 --dim 100 --batch 2048 --block 512
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kernelscale.backend import namespace, resolve_device, synchronize
from kernelscale.estimators.dsg import DSGClassifier


def matmul_rate(xp, n: int = 2048, repeats: int = 5) -> float:
    """Measured float32 GEMM rate in flop/s (best of ``repeats``)."""
    a = xp.asarray(np.random.default_rng(0).standard_normal((n, n)), dtype=np.float32)
    b = xp.asarray(np.random.default_rng(1).standard_normal((n, n)), dtype=np.float32)
    a @ b
    synchronize(xp)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        synchronize(xp)
        best = min(best, time.perf_counter() - t)
    return 2.0 * n**3 / best


def run(variant, X, y, args, device):
    clf = DSGClassifier(variant=variant, n_iter=args.n_iter, batch_size=args.batch,
                        block_size=args.block, engine={"dtype": "float32", "device": device}, random_state=0,
                        bandwidth="median")
    clf.fit(X, y)
    h = clf.history_
    t = np.diff(np.concatenate([[0.0], h["time"]]))
    blocks = np.asarray(h["n_blocks"])
    # prediction touches all blocks (before the step), the update one block
    work = args.batch * (np.maximum(blocks - 1, 0) + 1) * args.block * X.shape[1]
    return t, blocks, work, clf


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--n-iter", type=int, default=200)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--block", type=int, default=512)
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv)

    device = resolve_device(args.device)
    xp = namespace(device)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    y = (np.sin(X[:, :5].sum(axis=1)) > 0).astype(int) if args.classes == 2 else \
        rng.integers(args.classes, size=args.n)
    rate = matmul_rate(xp)
    print(f"device={device}  float32 matmul rate: {rate / 1e9:.1f} GFLOP/s")
    print(f"n={args.n} d={args.dim} B={args.batch} F={args.block} iterations={args.n_iter}\n")
    marks = sorted({1, args.n_iter // 4, args.n_iter // 2, 3 * args.n_iter // 4, args.n_iter})
    header = "variant  " + "  ".join(f"t@{m:<5d}" for m in marks) + \
        "  blocks  total_s  pts*feat*dim/s  frac_matmul"
    print(header)
    for variant in ("dsg", "udsg", "cdsg"):
        t, blocks, work, _ = run(variant, X, y, args, device)
        # per-iteration time at each mark: median over a window of 5 iterations around it
        per = [np.median(t[max(0, m - 3): m + 2]) for m in marks]
        thr = work.sum() / t.sum()
        print(f"{variant:7s}  " + "  ".join(f"{s * 1e3:6.1f}ms" for s in per) +
              f"  {blocks[-1]:6d}  {t.sum():7.2f}  {thr:14.3e}  {2 * thr / rate:10.2f}")


if __name__ == "__main__":
    main()
