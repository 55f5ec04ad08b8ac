"""Throughput of generator ``deformed`` (MNIST-8M's construction on Fashion-MNIST), one core.

Times, with one BLAS thread:
* ``block``: ``deformed_block`` on blocks past the originals (8192 deformed rows each: draws,
  field smoothing by matrix products, bilinear gathers in 128-row pieces, rounding) -- what
  ``kernelscale prepare`` runs per block;
* ``reference``: ``deform_reference``, the same deformation written directly with
  ``scipy.ndimage`` (``gaussian_filter`` on the fields, ``map_coordinates`` on the image stack).

Rows per second of process CPU time (what one core delivers) and of wall time; the box may be
shared, so the load average is printed and cpu/wall shows the share of a core a run got.

    .venv/bin/python benchmarks/deformed.py [--fashion ../shared/devdata/fashion-mnist] [--blocks 5]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from kernelscale.pipeline.data.deformed import (
    BLOCK_ROWS,
    DEFAULTS,
    deform_reference,
    deformed_block,
)
from kernelscale.pipeline.data.readers.idx import load_idx_images

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fashion", type=Path, default=ROOT.parent / "shared/devdata/fashion-mnist")
    ap.add_argument("--blocks", type=int, default=5, help="blocks of 8192 rows to time")
    args = ap.parse_args(argv)

    images, labels = load_idx_images(args.fashion / "train-images-idx3-ubyte.gz",
                                     args.fashion / "train-labels-idx1-ubyte.gz")
    params = dict(DEFAULTS, n_samples=8_100_000)
    first = -(-len(images) // BLOCK_ROWS)  # the first block with no original row
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{len(images)} source images {images.shape[1]}x{images.shape[2]}")
    with threadpool_limits(limits=1, user_api="blas"):
        deformed_block(params, first, images, labels)  # warm-up: imports, smoothing matrices
        cpu = wall = 0.0
        for index in range(first + 1, first + 1 + args.blocks):
            c, w = _timed(lambda i=index: deformed_block(params, i, images, labels))
            cpu, wall = cpu + c, wall + w
        rows = args.blocks * BLOCK_ROWS
        print(f"block      {rows / cpu:8.0f} rows/s cpu  {rows / wall:8.0f} rows/s wall  "
              f"cpu/wall {cpu / wall:.2f}  ({args.blocks} x {BLOCK_ROWS} rows)")
        sample = images[:BLOCK_ROWS]
        c, w = _timed(lambda: deform_reference(sample, np.random.default_rng(0), params))
        print(f"reference  {BLOCK_ROWS / c:8.0f} rows/s cpu  {BLOCK_ROWS / w:8.0f} rows/s wall  "
              f"cpu/wall {c / w:.2f}  (1 x {BLOCK_ROWS} rows)")
    print(f"8,100,000 rows (MNIST-8M's size) at the block rate: {8_100_000 / (rows / cpu) / 60:.1f} "
          "min of one core per pass")


if __name__ == "__main__":
    main()
