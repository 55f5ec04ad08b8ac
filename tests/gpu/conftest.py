"""GPU suite (``make test-gpu``): imports the library only, so it runs where just numpy, scipy,
scikit-learn, zarr, dask and cupy are installed (no MLflow or Snakemake needed)."""

import pytest

from kernelscale.backend import gpu_available

# Every test here needs a device; `make test-gpu-sim` runs them against tests/gpu/fakecupy.
pytestmark = pytest.mark.gpu


def pytest_collection_modifyitems(items):
    skip = pytest.mark.skip(reason="no usable CUDA GPU (cupy missing or no device)")
    for item in items:
        item.add_marker(pytest.mark.gpu)
        if not gpu_available():
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cp():
    import cupy

    return cupy
