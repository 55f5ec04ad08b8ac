"""Pieces the pipeline's command lines (``cli``, ``data.cli``) and config checks share: the one-line
user error, YAML loading with file:line:column, and argparse helpers."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml


class UserError(Exception):
    """A one-line error about what the user asked for (printed without a class name)."""


def load_yaml(path):
    """A YAML file's content; one line with the file, line and column on a syntax error."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, expected a YAML file") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(str(e.problem or e.context or "syntax error").split())
        context = f" ({' '.join(str(e.context).split())})" if e.context and e.problem else ""
        raise UserError(f"{where}: not valid YAML: {what}{context}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None


def int_at_least(low: int):
    """argparse type: an integer >= ``low`` (else argparse's one-line error)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``kernelscale train: error: argument --threads:
    -3 must be >= 0``) instead of the usage text plus the error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} -h)\n")


def add_dask_arguments(parser: argparse.ArgumentParser) -> None:
    """--dask-scheduler / --dask-workers (config ``dask:``), shared by train and prepare."""
    from ..spread.cluster import SCHEDULER_ENV, WORKERS_ENV

    workers = os.environ.get(WORKERS_ENV)
    parser.add_argument("--dask-scheduler", default=os.environ.get(SCHEDULER_ENV) or None,
                        metavar="ADDRESS|local|slurm",
                        help="run chunked work on a dask cluster: 'local' (a LocalCluster per "
                             "job), 'slurm' (dask-jobqueue worker jobs per job, options from "
                             "config `dask.slurm`) or a scheduler address such as "
                             "tcp://host:8786 (default: "
                             f"${SCHEDULER_ENV}, which the pipeline sets from config `dask:`; "
                             "else none)")
    parser.add_argument("--dask-workers", type=int_at_least(1),
                        default=int(workers) if workers else None,
                        metavar="N",
                        help="workers for --dask-scheduler local (default: CPU count) or slurm "
                             "(default 2)")
