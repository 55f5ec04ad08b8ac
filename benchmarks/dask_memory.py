"""Peak memory of DSG training on dask (``da.from_zarr``) or zarr input against its memory budget.

    python benchmarks/dask_memory.py --rows 2000000 --features 64 --budget 64 \
        --batch-size 4096 --block-size 256 --n-iter 20 --input dask

writes a float32 dataset (uncompressed, chunk by chunk) unless it exists, then fits
``DSGClassifier(engine={"memory_budget": ...})`` in a fresh process and prints its peak RSS over the
interpreter's baseline (after a warm-up fit, so lazy imports do not count). Labels are loaded
into memory (outside the budget by design). Not a test: ``tests/test_scale_dask.py`` is.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

CHILD = """
import json, sys, time
import numpy as np
from kernelscale.budget import peak_rss_bytes
from kernelscale.estimators.dsg import DSGClassifier
DSGClassifier(n_iter=2, batch_size=50, block_size=16, dtype="float32").fit(
    np.random.default_rng(0).standard_normal((100, 3)), np.arange(100) % 2)
import dask.array as da
import zarr
from kernelscale.io import open_zarr
path, budget, n_iter, batch, block, kind = sys.argv[1:7]
base = peak_rss_bytes()
X = da.from_zarr(path, component="X") if kind == "dask" else open_zarr(path, "X")
y = zarr.open_array(path + "/y", mode="r")[:]
t = time.perf_counter()
est = DSGClassifier(n_iter=int(n_iter), batch_size=int(batch), block_size=int(block),
                    random_state=0,
                    engine={"dtype": "float32", "memory_budget": float(budget)}).fit(X, y)
print(json.dumps({"over_baseline_mib": (peak_rss_bytes() - base) / 2**20,
                  "fit_s": time.perf_counter() - t, "window_rows": est.window_rows_,
                  "y_mib": y.nbytes / 2**20}))
"""


def write(path: Path, n: int, d: int, chunk: int) -> None:
    import zarr

    g = zarr.open_group(str(path), mode="w")
    X = g.create_array("X", shape=(n, d), chunks=(chunk, d), dtype="f4", compressors=None)
    y = g.create_array("y", shape=(n,), chunks=(chunk,), dtype="i8", compressors=None)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(d).astype(np.float32)
    for lo in range(0, n, chunk):
        B = rng.standard_normal((min(chunk, n - lo), d), dtype=np.float32)
        X[lo : lo + len(B)] = B
        y[lo : lo + len(B)] = B @ w > 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default="results/bench/dask_memory.zarr")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--chunk-rows", type=int, default=50_000)
    p.add_argument("--budget", type=float, default=64)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--n-iter", type=int, default=20)
    p.add_argument("--input", choices=["dask", "zarr"], default="dask")
    a = p.parse_args()
    path = Path(a.path)
    if not (path / "X" / "zarr.json").is_file():
        write(path, a.rows, a.features, a.chunk_rows)
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(a.budget), str(a.n_iter),
                          str(a.batch_size), str(a.block_size), a.input],
                         capture_output=True, text=True, check=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    data_mib = a.rows * a.features * 4 / 2**20
    print(f"{a.input}: X {data_mib:.0f} MiB, budget {a.budget:g} MiB, window "
          f"{rec['window_rows']} rows: peak RSS {rec['over_baseline_mib']:.1f} MiB over baseline "
          f"(y {rec['y_mib']:.1f} MiB), fit {rec['fit_s']:.1f} s")


if __name__ == "__main__":
    main()
