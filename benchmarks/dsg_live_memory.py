"""Live bytes (tracemalloc) per warm-started segment of a DSG fit shaped like the deformed
Fashion-MNIST GPU run (d = 784, 10 classes, F = 4096, B = 16384), through fakecupy: does any
allocation stay alive from step to step (a leak), or is the GPU growth the allocator's?
(benchmarks/results/gpu-2026-11-26-h200.md, section 3.) Runs on a machine without a GPU:

    .venv/bin/python benchmarks/dsg_live_memory.py 131072      # rows; prints one line a segment
"""
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "gpu" / "fakecupy")]
from kernelscale.estimators.dsg import DSGClassifier  # noqa: E402

n, d = int(sys.argv[1]), 784
rng = np.random.default_rng(0)
X = rng.random((n, d), dtype=np.float32)
y = (X[:, :10].argmax(1)).astype(np.int64)
est = DSGClassifier(engine={"device": "gpu", "dtype": "float32"}, random_state=0, warm_start=True,
                    block_size=4096, batch_size=16384, n_iter=int(np.ceil(0.5 * n / 16384)))
tracemalloc.start()
for seg in range(6):
    tracemalloc.reset_peak()
    t = time.perf_counter()
    est.fit(X, y)
    cur, peak = tracemalloc.get_traced_memory()
    print(f"segment {seg}: {time.perf_counter()-t:.1f} s, blocks {est.n_blocks_}, live {cur/2**20:.0f} MiB, peak {peak/2**20:.0f} MiB", flush=True)
