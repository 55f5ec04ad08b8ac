"""Opening on-disk row arrays for estimators, with one-line errors naming the path."""

from __future__ import annotations

import os
from pathlib import Path


def single_io_thread() -> bool:
    """Have zarr read chunks on one thread, unless the user configured its pool.

    Process-wide and effective only before zarr's first read (its pool is created then);
    returns whether the setting is now 1.
    """
    import zarr

    if zarr.config.get("threading.max_workers", None) is None:
        zarr.config.set({"threading.max_workers": 1})
    return zarr.config.get("threading.max_workers") == 1


def open_zarr(path: str | os.PathLike, name: str | None = None):
    """Open the zarr array at ``path`` read-only (``name``: an array inside a group at ``path``).

    Raises ``FileNotFoundError`` with one line naming the path when there is nothing there, and
    when the path holds no array (or the group has no array ``name``). Calls ``single_io_thread``.
    """
    import zarr

    single_io_thread()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"zarr array not found: {path} does not exist")
    try:
        if name is None:
            return zarr.open_array(str(path), mode="r")
        return zarr.open_group(str(path), mode="r")[name]
    except KeyError:
        raise FileNotFoundError(f"zarr group {path} has no array {name!r}") from None
    except (FileNotFoundError, ValueError) as e:
        # ArrayNotFoundError / ContainsGroupError / a corrupt zarr.json: keep the first line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        what = "a zarr array" if name is None else "a zarr group"
        raise FileNotFoundError(f"{path} is not {what} ({first})") from None
