"""GPU suite (``make test-gpu``): imports the library only, so it runs where just numpy, scipy,
scikit-learn, zarr, dask and cupy are installed (no MLflow or Snakemake needed)."""

from pathlib import Path

import pytest

from kernelscale.backend import gpu_available

# Every test here needs a device (skipped without one); `make test-gpu-sim` runs them against
# tests/gpu/fakecupy.
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    # this hook sees the whole session's items: mark and skip only the ones in this folder
    skip = pytest.mark.skip(reason="no usable CUDA GPU (cupy missing or no device)")
    for item in items:
        if HERE not in Path(item.path).resolve().parents:
            continue
        item.add_marker(pytest.mark.gpu)
        if not gpu_available():
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cp():
    import cupy

    return cupy
