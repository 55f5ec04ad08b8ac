"""Data layer: dataset specs, download, streaming readers, preparation into chunked Zarr.

Public entry points::

    validate_dataset_spec(name, spec)       # config entry -> normalized spec, one-line errors
    download_dataset(name, spec, cache)     # fetch url sources, sha256-verified
    prepare_dataset(name, spec, out_dir)    # -> out_dir/data.zarr + out_dir/meta.json
    open_prepared(out_dir)                  # -> (meta, {"X_train": zarr array, ...})
"""

from .download import download_dataset, fetch
from .errors import DataError
from .prepare import prepare_dataset
from .spec import load_dataset_spec, validate_dataset_spec
from .store import open_prepared

__all__ = ["DataError", "download_dataset", "fetch", "load_dataset_spec", "open_prepared",
           "prepare_dataset", "validate_dataset_spec"]
