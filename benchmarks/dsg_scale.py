"""Issue 20, point 3: the DSG family's fit time and test error as n grows, at the defaults.

Generated binary data with a known Bayes error (``pipeline.data.bayes``: d = 20, noise 0.3),
written to a zarr array in 8,192-row chunks and streamed from it under
``engine={"memory_budget": ...}``; the test set is the 20,000 rows that follow the training
rows. Each variant is fitted at its defaults (``n_iter="auto"``: four epochs), cut into four
warm-started segments of a quarter of the "auto" iterations each (the same model as one fit;
rounded up, so up to 3 steps more) so that the error is recorded along the way. Also recorded: the blocks against the iterations (UDSG / CDSG reuse old ones).

    python benchmarks/dsg_scale.py --n 10000 100000 --out benchmarks/results/dsg-scale.csv
    python benchmarks/dsg_scale.py --n 1000000 --segments 1 --out benchmarks/results/dsg-scale-1e6.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time
from pathlib import Path

import numpy as np

N_TEST = 20_000
D = 20


def write_zarr(params: dict, n: int, path: Path):
    """X (n x d float32) and y (int8) of the first n rows, chunk by chunk (never n in memory)."""
    import zarr

    from kernelscale.pipeline.data.bayes import bayes_chunks

    root = zarr.open_group(str(path), mode="w")
    X = root.create_array("X", shape=(n, D), chunks=(8192, D), dtype="float32")
    y = root.create_array("y", shape=(n,), chunks=(8192,), dtype="int8")
    for lo, Xc, yc in bayes_chunks(params, 8192, 0, n):
        X[lo:lo + len(Xc)] = Xc
        y[lo:lo + len(Xc)] = yc
    return root["X"], root["y"]


def _write(out: Path, rows: list[dict]) -> None:
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--variants", nargs="+", default=["dsg", "udsg", "cdsg"])
    p.add_argument("--budget", type=float, default=256.0, help="engine memory_budget (MB)")
    p.add_argument("--epochs", type=int, default=4, help="segments of the 'auto' iterations")
    p.add_argument("--segments", type=int, default=None,
                   help="run only the first K segments (the start of the default run, for n "
                        "whose whole run is hours on a CPU)")
    p.add_argument("--device", default="auto", help="engine device (cpu, gpu, auto)")
    p.add_argument("--out", default="benchmarks/results/dsg-scale.csv")
    args = p.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from kernelscale.estimators.dsg import (
        DSGClassifier,
        auto_iterations,
        auto_sizes,
        new_block_share,
    )
    from kernelscale.pipeline.data.bayes import bayes_error, bayes_params, bayes_rows

    threadpool_limits(1)
    rows = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for n in args.n:
        params = bayes_params(n + N_TEST, n_features=D, noise=0.3)
        bayes, _ = bayes_error(params)
        Xt, yt = bayes_rows(params, n, n + N_TEST)
        with tempfile.TemporaryDirectory() as tmp:
            X, y = write_zarr(params, n, Path(tmp) / "data.zarr")
            for variant in args.variants:
                per_segment = -(-auto_iterations(n, auto_sizes(n, D)[1],
                                                 new_block_share(variant)) // args.epochs)
                est = DSGClassifier(variant=variant, random_state=0, warm_start=True,
                                    n_iter=per_segment, engine={"memory_budget": args.budget,
                                                                "device": args.device})
                fit_s = 0.0
                for epoch in range(1, (args.segments or args.epochs) + 1):
                    t = time.perf_counter()
                    est.fit(X, y)
                    fit_s += time.perf_counter() - t
                    t = time.perf_counter()
                    err = float(np.mean(est.predict(Xt) != yt))
                    pred_s = time.perf_counter() - t
                    h = est.history_
                    row = dict(n=n, variant=variant, epoch=epoch, iterations=est.n_iter_,
                               blocks=est.n_blocks_, batch_size=est.batch_size_,
                               block_size=est.block_size_, fit_s=round(fit_s, 2),
                               predict_s=round(pred_s, 2), test_error=round(err, 5),
                               bayes_error=round(bayes, 5),
                               blocks_at_half=h["n_blocks"][len(h["n_blocks"]) // 2 - 1])
                    row["segment"] = row.pop("epoch")
                    rows.append(row)
                    print(row, flush=True)
                    _write(out, rows)  # each segment as it ends: a long run keeps what it did
    print(f"wrote {out} ({os.uname().nodename})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
