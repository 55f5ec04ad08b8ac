import os

import pytest

# Oversubscribed BLAS threads make the 2-core CI box crawl when numba/dask also spawn threads.
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session")
def gpu():
    """Skip unless a usable CUDA GPU is present (cupy imports without one)."""
    from kernelscale.backend import gpu_available

    if not gpu_available():
        pytest.skip("no usable CUDA GPU (cupy missing or no device)")
    import cupy

    return cupy
