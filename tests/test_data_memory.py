"""Peak memory of prepare depends on the chunk size, not on the number of rows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

ROWS, COLS, CHUNK = 2_000_000, 20, 50_000
DATA_MB = ROWS * COLS * 4 / 2**20  # 153 MiB of float32 features

SCRIPT = textwrap.dedent("""
    import json, resource, sys, time
    import numpy, zarr, sklearn.datasets  # the libraries prepare uses, loaded up front
    from kernelscale.pipeline.data import prepare_dataset
    from kernelscale.pipeline.data.sources import open_source  # noqa: F401 (import cost in baseline)

    rows, cols, chunk, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.monotonic()
    meta = prepare_dataset("big", {
        "task": "regression",
        "generator": {"name": "regression", "n_samples": rows, "n_features": cols},
        "split": {"test_size": 0.1, "seed": 0},
        "preprocess": {"standardize": True, "pca": {"n_components": 10}},
        "chunk_rows": chunk}, out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"baseline_mb": baseline, "peak_mb": peak, "seconds": time.monotonic() - start,
                      "n_train": meta["n_train"], "n_test": meta["n_test"]}))
""")


@pytest.mark.timeout(120)
def test_peak_memory_is_bounded_by_chunks_not_rows(tmp_path):
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(ROWS), str(COLS), str(CHUNK),
                             str(tmp_path / "big")], capture_output=True, text=True, check=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    growth = report["peak_mb"] - report["baseline_mb"]
    print(f"\nprepare {ROWS}x{COLS} ({DATA_MB:.0f} MiB): peak RSS +{growth:.0f} MiB over "
          f"{report['baseline_mb']:.0f} MiB baseline in {report['seconds']:.1f} s")
    assert report["n_train"] + report["n_test"] == ROWS
    assert growth < 120, report
    assert growth < DATA_MB / 2, report
