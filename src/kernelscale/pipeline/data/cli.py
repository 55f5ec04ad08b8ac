"""``kernelscale download`` and ``kernelscale prepare``: the commands the Snakemake rules call.

The main CLI (``kernelscale.pipeline.cli``) adds them with :func:`register`; ``python -m
kernelscale.pipeline.data.cli`` runs them on their own. The dataset entry comes from ``--config
config.yaml --dataset NAME`` or, as the rules pass it (so ``snakemake --config`` overrides
count), from ``--spec-json '{...}' --dataset NAME``. Errors print one line and exit with 1.
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
    """Add the ``download`` and ``prepare`` subcommands to an argparse subparsers object."""
    download = subparsers.add_parser(
        "download", help="fetch a dataset's files into the cache and verify their sha256")
    _add_spec_arguments(download)
    from ..cli_common import int_at_least

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
    from ..cli_common import add_dask_arguments

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


def _setup_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("kernelscale.pipeline.data").setLevel(logging.INFO)


def _one_line_errors(command):
    """Turn a DataError into one line on stderr and exit status 1 (no traceback)."""
    name = command.__name__.removeprefix("run_")

    def wrapper(args) -> int:
        _setup_logging()
        try:
            return command(args)
        except DataError as exc:
            print(f"kernelscale {name}: error: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
    wrapper.__doc__ = command.__doc__
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
    if args.file is not None:
        from .download import fetch, remote_files

        wanted = [f for f in remote_files(args.dataset, spec, args.cache_dir)
                  if f.path.name == args.file]
        if not wanted:
            raise DataError(f"datasets.{args.dataset}: no file named {args.file!r} among its "
                            "urls")
        paths = [fetch(f.url, f.sha256, f.path, label=f"{args.dataset}/{f.path.name}",
                       key=f.key(args.dataset), retries=args.retries) for f in wanted]
    else:
        paths = download_dataset(args.dataset, spec, args.cache_dir, retries=args.retries)
    for path in paths:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelscale-data", description=__doc__.split("\n")[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
