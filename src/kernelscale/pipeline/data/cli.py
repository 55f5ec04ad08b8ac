"""``kernelscale download`` and ``kernelscale prepare``: the commands the Snakemake rules call.

:func:`register` adds them to a CLI; ``python -m kernelscale.pipeline.data.cli`` runs them alone.
The dataset entry comes from ``--config config.yaml --dataset NAME`` or ``--spec-json '{...}'
--dataset NAME`` (as the rules pass it). Errors print one line and exit with 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from .errors import DataError

log = logging.getLogger("kernelscale.pipeline.data")


def _add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="name under `datasets:`")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", "--configfile", dest="config",
                        help="config YAML with a `datasets:` mapping")
    source.add_argument("--spec-json", help="the dataset entry itself, as JSON")
    parser.add_argument("--cache-dir", default=None,
                        help="download cache (default $KERNELSCALE_CACHE or results/downloads)")


def register(subparsers) -> None:
    """Add the ``download``, ``checksum`` and ``prepare`` subcommands to argparse subparsers."""
    from ..cli_common import add_dask_arguments, int_at_least

    download = subparsers.add_parser(
        "download", help="fetch a dataset's files into the cache and verify their sha256")
    _add_spec_arguments(download)
    download.add_argument("--retries", type=int_at_least(1), default=3)
    download.add_argument("--file", default=None,
                          help="fetch only this cached file name (one download job per file)")
    download.set_defaults(func=run_download)

    checksum = subparsers.add_parser(
        "checksum", help="download a URL to a temporary file and print its sha256 (to fill in "
        "a dataset entry)")
    checksum.add_argument("urls", nargs="+", metavar="URL")
    checksum.add_argument("--retries", type=int_at_least(1), default=3)
    checksum.set_defaults(func=run_checksum)

    prepare = subparsers.add_parser(
        "prepare", help="check, split, standardize/PCA a dataset into data.zarr + meta.json")
    _add_spec_arguments(prepare)
    prepare.add_argument("--out", required=True, help="output folder, e.g. results/data/NAME")
    prepare.add_argument("--threads", type=int_at_least(1), default=1,
                         help="BLAS threads (default 1)")
    add_dask_arguments(prepare)
    prepare.set_defaults(func=run_prepare)


def _spec(args) -> dict:
    from .spec import load_dataset_spec, validate_dataset_spec

    if args.config:
        return load_dataset_spec(args.config, args.dataset)
    try:
        entry = json.loads(args.spec_json)
    except json.JSONDecodeError as exc:
        raise DataError(f"--spec-json: not valid JSON: {exc}") from None
    return validate_dataset_spec(args.dataset, entry)


def _one_line_errors(command):
    """Log INFO lines to stderr; turn a DataError into one line on stderr and exit status 1."""
    name = command.__name__.removeprefix("run_")

    def wrapper(args) -> int:
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                                format="%(asctime)s %(levelname)s %(message)s")
        log.setLevel(logging.INFO)
        try:
            return command(args)
        except DataError as exc:
            print(f"kernelscale {name}: error: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
    return wrapper


@_one_line_errors
def run_download(args) -> int:
    """Fetch every url file of the dataset (nothing to do for other sources)."""
    from .download import download_dataset
    from .spec import source_kind

    spec = _spec(args)
    if source_kind(spec) != "url":
        log.info("%s: %s source, nothing to download", args.dataset, source_kind(spec))
        return 0
    for path in download_dataset(args.dataset, spec, args.cache_dir, only=args.file,
                                 retries=args.retries):
        print(path)
    return 0


@_one_line_errors
def run_checksum(args) -> int:
    """Print ``sha256  size  url`` per URL (like sha256sum), nothing kept on disk."""
    from .download import remote_sha256

    for url in args.urls:
        digest, size = remote_sha256(url, retries=args.retries)
        print(f"{digest}  {size}  {url}")
    return 0


@_one_line_errors
def run_prepare(args) -> int:
    """Prepare the dataset into ``--out``."""
    from .prepare import prepare_dataset

    try:
        meta = prepare_dataset(args.dataset, _spec(args), args.out, cache_dir=args.cache_dir,
                               threads=args.threads, dask_scheduler=args.dask_scheduler,
                               dask_workers=args.dask_workers)
    except ConnectionError as exc:  # unreachable --dask-scheduler: one line, like a DataError
        raise DataError(str(exc)) from None
    bayes = f", Bayes error {meta['bayes_error']:.4%}" if "bayes_error" in meta else ""
    print(f"{args.out}: {meta['n_train']} train + {meta['n_test']} test rows, d={meta['d']}"
          f"{bayes}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelscale-data", description=__doc__.split("\n")[0])
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
