"""Downloads against a real HTTP server on 127.0.0.1 (no network beyond the loopback)."""

from __future__ import annotations

import hashlib
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kernelscale.pipeline.data import DataError, download_dataset, fetch
from kernelscale.pipeline.data.download import apply_mirror, cache_dir


class _Handler(SimpleHTTPRequestHandler):
    """Serves a folder; ``failures[path]`` makes the next N requests for path answer 503."""

    failures: dict[str, int] = {}
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server API)
        self.requests.append(self.path)
        if self.failures.get(self.path, 0) > 0:
            self.failures[self.path] -= 1
            self.send_error(503, "try again")
            return
        super().do_GET()

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    _Handler.failures, _Handler.requests = {}, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}", _Handler
    httpd.shutdown()
    httpd.server_close()


def _put(root, name: str, content: bytes) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return hashlib.sha256(content).hexdigest()


def test_good_file_is_downloaded_verified_and_cached(server, tmp_path):
    root, base, handler = server
    digest = _put(root, "data/a.txt", b"1 1:0.5\n")
    dest = tmp_path / "cache" / "a.txt"
    assert fetch(f"{base}/data/a.txt", digest, dest) == dest
    assert dest.read_bytes() == b"1 1:0.5\n"
    assert not dest.with_name("a.txt.part").exists()
    fetch(f"{base}/data/a.txt", digest, dest)  # second call: cache hit, no request
    assert handler.requests == ["/data/a.txt"]


def test_wrong_checksum_is_rejected_and_deleted(server, tmp_path):
    root, base, _ = server
    _put(root, "a.txt", b"payload")
    dest = tmp_path / "cache" / "a.txt"
    with pytest.raises(DataError, match="sha256 mismatch") as err:
        fetch(f"{base}/a.txt", "0" * 64, dest, retries=0)
    assert "\n" not in str(err.value)
    assert not dest.exists() and not list(dest.parent.iterdir())


def test_bad_cached_file_is_replaced(server, tmp_path):
    root, base, handler = server
    digest = _put(root, "a.txt", b"right")
    dest = tmp_path / "a.txt"
    dest.write_bytes(b"wrong")
    fetch(f"{base}/a.txt", digest, dest)
    assert dest.read_bytes() == b"right" and handler.requests == ["/a.txt"]


def test_empty_file_is_rejected(server, tmp_path):
    root, base, _ = server
    digest = _put(root, "empty.txt", b"")
    dest = tmp_path / "empty.txt"
    with pytest.raises(DataError, match="empty file"):
        fetch(f"{base}/empty.txt", digest, dest)  # even with the matching hash
    assert not dest.exists()


def test_not_found_fails_without_retry(server, tmp_path):
    _, base, handler = server
    with pytest.raises(DataError, match="HTTP 404"):
        fetch(f"{base}/missing.txt", "0" * 64, tmp_path / "m.txt", retries=3, backoff_s=0)
    assert len(handler.requests) == 1


def test_retry_after_server_error(server, tmp_path):
    root, base, handler = server
    digest = _put(root, "flaky.txt", b"eventually")
    handler.failures["/flaky.txt"] = 2
    dest = fetch(f"{base}/flaky.txt", digest, tmp_path / "flaky.txt", retries=3, backoff_s=0.01)
    assert dest.read_bytes() == b"eventually"
    assert handler.requests == ["/flaky.txt"] * 3


def test_gives_up_after_retries(server, tmp_path):
    root, base, handler = server
    digest = _put(root, "down.txt", b"x")
    handler.failures["/down.txt"] = 10
    with pytest.raises(DataError, match="failed after 3 attempts: HTTP 503"):
        fetch(f"{base}/down.txt", digest, tmp_path / "down.txt", retries=2, backoff_s=0.01)
    assert not (tmp_path / "down.txt").exists()


def test_mirror_replaces_host_and_directory(server, tmp_path, monkeypatch):
    root, base, handler = server
    digest = _put(root, "mirror/libsvm/covtype.bz2", b"compressed bytes")
    monkeypatch.setenv("KERNELSCALE_MIRROR", f"{base}/mirror/libsvm/")
    original = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/covtype.bz2"
    assert apply_mirror(original) == f"{base}/mirror/libsvm/covtype.bz2"
    fetch(original, digest, tmp_path / "covtype.bz2")
    assert handler.requests == ["/mirror/libsvm/covtype.bz2"]


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELSCALE_CACHE", raising=False)
    assert str(cache_dir()) == "results/downloads"
    monkeypatch.setenv("KERNELSCALE_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    assert cache_dir(tmp_path / "x") == tmp_path / "x"


def test_download_dataset_fetches_train_and_test(server, tmp_path):
    root, base, _ = server
    spec = {"task": "binary", "format": "libsvm",
            "url": f"{base}/d/train.txt", "sha256": _put(root, "d/train.txt", b"1 1:1\n"),
            "test_url": f"{base}/d/test.txt", "test_sha256": _put(root, "d/test.txt", b"-1 1:2\n"),
            "test_filename": "renamed.t"}
    paths = download_dataset("toy", spec, tmp_path / "cache")
    assert [p.relative_to(tmp_path / "cache").as_posix() for p in paths] == \
        ["toy/train.txt", "toy/renamed.t"]


def test_truncated_gz_download_names_the_file(server, tmp_path):
    """A .gz cut short at the source (its sha256 not yet known): reading it names the file."""
    import gzip

    from kernelscale.pipeline.data.readers import read_file

    root, base, _ = server
    whole = gzip.compress(b"1 1:1 2:3\n" * 50000)
    spec = {"task": "binary", "format": "libsvm", "url": f"{base}/d/train.svm.gz",
            "sha256": _put(root, "d/train.svm.gz", whole[: len(whole) // 2])}
    (path,) = download_dataset("toy", spec, tmp_path / "cache")
    with pytest.raises(DataError, match=rf"^{path}: compressed data truncated or damaged"):
        list(read_file("libsvm", path, block_rows=1000))


def test_progress_bar_on_terminal_and_log_lines_otherwise(server, tmp_path, monkeypatch, caplog):
    import kernelscale.pipeline.data.progress as progress_module

    root, base, _ = server
    digest = _put(root, "p.bin", b"x" * 3_000_000)
    caplog.set_level("INFO", logger="kernelscale.pipeline.data")
    fetch(f"{base}/p.bin", digest, tmp_path / "plain.bin")
    assert any("download plain.bin" in r.getMessage() and "(100%)" in r.getMessage()
               for r in caplog.records)
    monkeypatch.setattr(progress_module, "on_terminal", lambda: True)
    with progress_module.progress(10, "bar") as bar:
        assert type(bar).__name__ == "tqdm"
    fetch(f"{base}/p.bin", digest, tmp_path / "tty.bin")
    assert (tmp_path / "tty.bin").stat().st_size == 3_000_000


def test_remote_sha256_and_checksum_command(server, capsys):
    from kernelscale.pipeline.data.cli import main
    from kernelscale.pipeline.data.download import remote_sha256

    root, base, _ = server
    digest = _put(root, "new.bin", b"a new dataset")
    assert remote_sha256(f"{base}/new.bin") == (digest, 13)
    assert main(["checksum", f"{base}/new.bin"]) == 0
    assert capsys.readouterr().out == f"{digest}  13  {base}/new.bin\n"


TODO = "TODO-verify-on-first-download"


def test_unknown_checksum_is_trusted_on_first_download_then_pinned(server, tmp_path, caplog,
                                                                   monkeypatch):
    """A TODO checksum: the first download is kept, its sha256 logged with the key to paste it
    into and pinned beside the file; later uses (cached or downloaded again) must match it."""
    from kernelscale.pipeline.data.download import REQUIRE_ENV, pin_path, read_pin

    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    root, base, handler = server
    digest = _put(root, "u.txt", b"1 1:0.5\n")
    dest = tmp_path / "cache" / "toy" / "u.txt"
    caplog.set_level("INFO", logger="kernelscale.pipeline.data")
    assert fetch(f"{base}/u.txt", TODO, dest, key="datasets.toy.sha256") == dest
    assert dest.read_bytes() == b"1 1:0.5\n" and read_pin(dest) == digest
    assert pin_path(dest).read_text() == f"{digest}  u.txt\n"  # `sha256sum -c` reads it
    [line] = [r.getMessage() for r in caplog.records if digest in r.getMessage()]
    assert "datasets.toy.sha256 is not filled in" in line and "paste it" in line
    fetch(f"{base}/u.txt", TODO, dest)  # cached and matching the pin: no request
    assert handler.requests == ["/u.txt"]
    # the server now sends something else: a fresh download is refused against the pin
    _put(root, "u.txt", b"tampered\n")
    dest.unlink()
    with pytest.raises(DataError, match="sha256 mismatch .* first download had") as err:
        fetch(f"{base}/u.txt", TODO, dest, retries=0)
    assert "\n" not in str(err.value) and not dest.exists() and read_pin(dest) == digest
    # a cached copy that no longer matches is replaced by a download, which must match too
    dest.write_bytes(b"changed on disk")
    with pytest.raises(DataError, match="first download had"):
        fetch(f"{base}/u.txt", TODO, dest, retries=0)
    _put(root, "u.txt", b"1 1:0.5\n")
    dest.write_bytes(b"changed on disk")
    assert fetch(f"{base}/u.txt", TODO, dest).read_bytes() == b"1 1:0.5\n"


def test_unknown_checksum_refused_in_one_line_when_required(server, tmp_path, monkeypatch):
    from kernelscale.pipeline.data.download import REQUIRE_ENV, pin_path

    root, base, _ = server
    digest = _put(root, "u.txt", b"payload")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    dest = tmp_path / "u.txt"
    with pytest.raises(DataError) as err:
        fetch(f"{base}/u.txt", TODO, dest, key="datasets.toy.test_sha256")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("datasets.toy.test_sha256: not filled in")
    assert digest in msg and "7 bytes" in msg
    assert not dest.exists() and not pin_path(dest).exists()
    assert not list(tmp_path.glob("*.part"))


def test_unverified_files_are_listed_for_the_closing_lines(server, tmp_path, monkeypatch):
    """The pipeline's end-of-run lines name each pinned file's key and sha256, only for the
    datasets its runs use and only while the config still says TODO."""
    from kernelscale.pipeline import configuration
    from kernelscale.pipeline.data.download import REQUIRE_ENV

    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    root, base, _ = server
    known = _put(root, "k.txt", b"-1 1:2\n")
    digest = _put(root, "t.txt", b"1 1:1\n")
    spec = {"task": "binary", "format": "libsvm", "url": f"{base}/t.txt", "sha256": TODO,
            "test_url": f"{base}/k.txt", "test_sha256": known}
    cache = tmp_path / "cache"
    download_dataset("toy", spec, cache)
    config = {"datasets": {"toy": spec, "other": {**spec, "url": f"{base}/k.txt"}},
              "experiments": [{"datasets": ["toy"], "algorithms": ["dsg"]}]}
    [line] = configuration.unverified_checksum_lines(config, cache)
    assert "datasets.toy.sha256 is not filled in" in line and digest in line
    # a copy put in the cache by hand (no download job ran, no pin): said, not hashed
    (cache / "toy" / "t.txt.sha256").unlink()
    [line] = configuration.unverified_checksum_lines(config, cache)
    assert "put there by hand" in line and "sha256sum" in line
    spec["sha256"] = digest  # pasted: nothing left to say
    assert configuration.unverified_checksum_lines(config, cache) == []
