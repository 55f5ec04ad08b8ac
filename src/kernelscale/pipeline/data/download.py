"""Fetch dataset files into a local cache, verified by sha256.

Files live in ``<cache>/<dataset>/<filename>``; the cache is an explicit argument, else
``$KERNELSCALE_CACHE``, else ``results/downloads``. ``$KERNELSCALE_MIRROR`` replaces the scheme,
host and directory of every URL and keeps the file name. A download goes to ``<name>.part``,
hashed on the fly, and is renamed into place only when its sha256 matches; a mismatching or
empty file is deleted. Transient failures (connection errors, timeouts, HTTP 5xx/408/429,
truncated transfers) are retried with exponential backoff; a 404 is not.

A file whose sha256 is ``TODO-verify-on-first-download`` is trusted on first download: its
sha256 is logged with the key to paste it into and pinned in ``<name>.sha256`` (``sha256sum -c``
format); every later use must match the pin. ``$KERNELSCALE_REQUIRE_SHA256=1`` refuses such
files instead (one line with the sha256 of what the server sent, the file deleted).
"""

from __future__ import annotations

import hashlib
import http.client
import itertools
import logging
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError
from .progress import progress
from .spec import FILE_ROLES, TODO_SHA256

log = logging.getLogger("kernelscale.pipeline.data")

DEFAULT_CACHE = "results/downloads"
CACHE_ENV = "KERNELSCALE_CACHE"
MIRROR_ENV = "KERNELSCALE_MIRROR"
REQUIRE_ENV = "KERNELSCALE_REQUIRE_SHA256"
PIN_SUFFIX = ".sha256"
_BLOCK = 1 << 20
_USER_AGENT = "kernelscale-data/1 (+https://github.com/kernelscale)"


@dataclass(frozen=True)
class RemoteFile:
    """One file of a url-sourced dataset: where it comes from and where it is cached."""

    role: str  # "", "labels_", "test_", "test_labels_" (the spec key prefix)
    url: str
    sha256: str
    path: Path

    def key(self, name: str) -> str:
        """The config key of this file's checksum, e.g. ``datasets.a9a.test_sha256``."""
        return f"datasets.{name}.{self.role}sha256"


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The download cache: the argument, else ``$KERNELSCALE_CACHE``, else results/downloads."""
    return Path(override or os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def file_name(url: str, filename: str | None = None) -> str:
    """Name of the cached file: ``filename`` or the last part of the URL path."""
    name = filename or Path(urllib.parse.urlparse(url).path).name
    if not name:
        raise DataError(f"{url}: URL has no file name; set `filename:` in the dataset entry")
    return name


def apply_mirror(url: str, mirror: str | None = None) -> str:
    """``url`` with scheme, host and directory replaced by ``$KERNELSCALE_MIRROR`` if set."""
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    return mirror.rstrip("/") + "/" + file_name(url) if mirror else url


def remote_files(name: str, spec: dict, cache: str | os.PathLike | None = None) -> list[RemoteFile]:
    """The files a url-sourced dataset needs (train, labels, test ...), with cache paths."""
    root = cache_dir(cache) / name
    files = []
    for role in FILE_ROLES:
        url = spec.get(f"{role}url")
        if url:
            path = root / file_name(url, spec.get(f"{role}filename"))
            sha = spec[f"{role}sha256"]
            files.append(RemoteFile(role, url, sha if sha == TODO_SHA256 else sha.lower(), path))
    return files


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


class _Transient(Exception):
    """A failure worth retrying (network hiccup, server overload, truncated body)."""


def pin_path(dest: str | os.PathLike) -> Path:
    """Where the sha256 of a file downloaded without a known one is pinned."""
    dest = Path(dest)
    return dest.with_name(dest.name + PIN_SUFFIX)


def read_pin(dest: str | os.PathLike) -> str | None:
    """The sha256 pinned for ``dest`` at its first download, or None."""
    try:
        text = pin_path(dest).read_text().split()
    except OSError:
        return None
    return text[0].lower() if text and len(text[0]) == 64 else None


def fetch(url: str, sha256: str, dest: str | os.PathLike, *, retries: int = 3,
          backoff_s: float = 1.0, timeout_s: float = 60.0, mirror: str | None = None,
          label: str | None = None, key: str | None = None) -> Path:
    """Download ``url`` to ``dest`` unless a file with the right sha256 is already there; return
    ``dest``. A one-line :class:`DataError` if the download keeps failing, the file is empty or
    its sha256 differs (the file deleted). ``sha256`` may be ``TODO-verify-on-first-download``
    (module docstring); ``key`` is the config key to name in messages (default ``label``)."""
    dest = Path(dest)
    label = label or dest.name
    key = key or label
    unknown = sha256 == TODO_SHA256
    required = os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")
    strict = unknown and required
    pinned = read_pin(dest) if unknown and not strict else None
    expected = pinned if unknown else sha256.lower()
    if dest.exists() and not strict:
        digest = sha256_of(dest) if dest.stat().st_size > 0 else None
        if digest is not None and digest == (expected or digest):
            if not unknown:
                log.info("%s: cached at %s (sha256 ok)", label, dest)
                return dest
            if pinned is None:  # put there by hand: it becomes the pin
                _pin(dest, digest, url, key, dest.stat().st_size)
            log.warning("%s: cached at %s; %s is not filled in, the file matches the sha256 "
                        "pinned at its first download (%s): paste it there once checked",
                        label, dest, key, digest)
            return dest
        log.warning("%s: cached file %s %s or is empty; downloading again", label, dest,
                    "does not match its pinned sha256" if unknown else "has the wrong sha256")
        dest.unlink()
    source = apply_mirror(url, mirror)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    digest, size = _download_with_retries(source, part, label, retries, backoff_s, timeout_s)
    if size == 0:
        problem = f"{label}: {source} returned an empty file; not used"
    elif strict:
        problem = (f"{key}: not filled in ({TODO_SHA256}) and ${REQUIRE_ENV} is set: {source} "
                   f"sent {size} bytes with sha256 {digest}; check it against a trusted source "
                   "and paste it there (the file was deleted)")
    elif expected is not None and digest != expected:
        problem = (f"{label}: sha256 mismatch for {source}: " + (
            f"got {digest}, but the first download had {pinned} (pinned in {pin_path(dest)})"
            if unknown else f"expected {expected}, got {digest}") + "; the file was deleted")
    else:
        problem = None
    if problem is not None:
        part.unlink(missing_ok=True)
        raise DataError(problem)
    os.replace(part, dest)
    if not unknown:
        log.info("%s: downloaded %s (%d bytes, sha256 ok)", label, dest, size)
    elif pinned is None:
        _pin(dest, digest, source, key, size)
    return dest


def _pin(dest: Path, digest: str, source: str, key: str, size: int) -> None:
    tmp = pin_path(dest).with_name(pin_path(dest).name + ".tmp")
    tmp.write_text(f"{digest}  {dest.name}\n")
    os.replace(tmp, pin_path(dest))
    log.warning("%s is not filled in (%s): trusted %s on first download (%d bytes), sha256 %s "
                "-- check it against a trusted source and paste it as %s; pinned in %s, later "
                "uses must match it", key, TODO_SHA256, source, size, digest, key, pin_path(dest))


def _download_with_retries(source: str, part: Path, label: str, retries: int,
                           backoff_s: float, timeout_s: float) -> tuple[str, int]:
    """Download into ``part`` with exponential backoff on transient failures."""
    for attempt in itertools.count(1):
        try:
            return _download_once(source, part, label, timeout_s)
        except _Transient as exc:
            part.unlink(missing_ok=True)
            if attempt > retries:
                raise DataError(f"{label}: download of {source} failed after {attempt} "
                                f"attempts: {exc}") from None
            wait = backoff_s * 2 ** (attempt - 1)
            log.warning("%s: %s; retry %d/%d in %.1f s", label, exc, attempt, retries, wait)
            time.sleep(wait)
        except BaseException:
            part.unlink(missing_ok=True)
            raise


def remote_sha256(url: str, *, retries: int = 3, backoff_s: float = 1.0,
                  timeout_s: float = 60.0, mirror: str | None = None) -> tuple[str, int]:
    """(sha256, size) of the file at ``url`` (mirror applied), downloaded to a temporary file
    that is deleted afterwards: for filling in a new dataset entry's ``sha256``."""
    source = apply_mirror(url, mirror)
    with tempfile.TemporaryDirectory(prefix="kernelscale-sha256-") as tmp:
        return _download_with_retries(source, Path(tmp) / "file", file_name(url), retries,
                                      backoff_s, timeout_s)


def _download_once(url: str, part: Path, label: str, timeout_s: float) -> tuple[str, int]:
    """One GET of ``url`` into ``part``; returns (sha256, size). Raises _Transient to retry."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    digest = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response, open(part, "wb") as out:
            expected = response.headers.get("Content-Length")
            total = int(expected) if expected and expected.isdigit() else None
            with progress(total, f"download {label}", unit="B") as bar:
                while block := response.read(_BLOCK):
                    out.write(block)
                    digest.update(block)
                    size += len(block)
                    bar.update(len(block))
    except urllib.error.HTTPError as exc:
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        raise DataError(f"{label}: download of {url} failed: HTTP {exc.code} {exc.reason}") \
            from None
    except (urllib.error.URLError, TimeoutError, ConnectionError,
            http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, FileNotFoundError):  # file:// URL (e.g. a local mirror)
            raise DataError(f"{label}: {url}: file not found") from None
        raise _Transient(f"{type(exc).__name__}: {reason}") from None
    if total is not None and size != total:
        raise _Transient(f"truncated transfer ({size} of {total} bytes)")
    return digest.hexdigest(), size


def download_dataset(name: str, spec: dict, cache: str | os.PathLike | None = None,
                     only: str | None = None, **fetch_options) -> list[Path]:
    """Fetch every file (``only``: the one of that cached name) of a url-sourced dataset into the
    cache; return their paths."""
    files = [f for f in remote_files(name, spec, cache) if only in (None, f.path.name)]
    if only is not None and not files:
        raise DataError(f"datasets.{name}: no file named {only!r} among its urls")
    return [fetch(f.url, f.sha256, f.path, label=f"{name}/{f.path.name}", key=f.key(name),
                  **fetch_options) for f in files]
