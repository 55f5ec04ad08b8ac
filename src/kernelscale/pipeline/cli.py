"""``kernelscale`` command line: the commands the Snakemake rules call.

download and prepare (``data.cli``), train, tracking-init, track, tables, plots, check-config,
repair, bench (``bench``) and reproduce (``reproduce``); ``kernelscale -h`` says what each does.
Errors are printed as one line (``kernelscale: error: ...``) with exit status 1; set
``KERNELSCALE_TRACEBACK=1`` to see the traceback.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from .cli_common import OneLineParser, UserError, add_dask_arguments, int_at_least, load_yaml
from .configuration import ConfigError

STORE_KEPT = "the run folders are kept: import them when it"


def _parse_spec(text: str, data_dir) -> dict:
    """``--spec`` JSON, checked (sizes against the dataset's meta.json when it is there): one
    line naming the key and what is expected."""
    from .checks import spec_errors

    try:
        spec = json.loads(text)
    except ValueError as e:
        raise UserError(f"--spec: not valid JSON ({e}); expected e.g. "
                        '\'{"estimator": "dsg", "params": {"n_iter": 30}}\'') from None
    errors = spec_errors("--spec", spec)
    if errors:
        raise UserError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    meta_path = Path(data_dir) / "meta.json"
    try:
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else None
    except ValueError:
        meta = None  # the dataset check in train names the file
    if isinstance(meta, dict):  # sizes against the data: n_train x n_components bins, n x n kernels
        errors = spec_errors("--spec", spec, meta.get("n_train"), meta.get("d"))
        if errors:
            raise UserError(errors[0])
    return spec


def _check_writable(folder: Path, what: str = "the run folder") -> None:
    """Fail before training when the run folder cannot be written (one-line UserError)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as e:
        reason = e.strerror or str(e)
        raise UserError(f"cannot write {what} {folder} ({reason}; is the results folder "
                        "read-only or full?)") from None


def _cmd_train(a) -> None:
    from .train_run import failed_start_leaves_nothing, train

    spec = _parse_spec(a.spec, a.data)
    if a.threads:
        from threadpoolctl import threadpool_limits

        from ..parallel import set_threads

        threadpool_limits(a.threads)
        set_threads(a.threads)  # element-wise passes (cos, exp) follow BLAS
    # a failed start removes the folder that the writability check made
    with failed_start_leaves_nothing(a.out):
        _check_writable(Path(a.out))
        train(a.data, a.out, a.algorithm, spec, a.seed, stop_after=a.stop_after,
              eval_chunk_rows=a.eval_chunk_rows, dask_scheduler=a.dask_scheduler,
              dask_workers=a.dask_workers)


def _write_record(a, **fields) -> None:
    """``--out``'s JSON record (uri, experiment, ``fields``), written whole or not at all
    (temporary file + rename); nothing without ``--out``."""
    from .data.store import write_json_atomic

    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(Path(a.out), {"uri": a.uri, "experiment": a.experiment, **fields})


def _check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fail in seconds, with one line, when an http(s) tracking server does not answer."""
    u = urlparse(uri)
    if u.scheme not in ("http", "https"):
        return
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        socket.create_connection((u.hostname, port), timeout=timeout).close()
    except OSError as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise UserError(f"tracking server {uri} is unreachable ({reason}); {STORE_KEPT} is up "
                        "(run the workflow again, or `kernelscale track`)") from None


@contextmanager
def _store_lock(uri: str):
    """An exclusive lock file beside a ``sqlite:///`` store while the block writes it; servers
    are not locked (no shared file)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    import fcntl  # POSIX only, as the lock

    db = Path(uri[len("sqlite:///"):])
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        f = open(db.with_name(db.name + ".lock"), "a")
    except OSError as e:
        raise UserError(f"tracking store {uri} cannot be written ({e.strerror or e} at "
                        f"{e.filename}); {STORE_KEPT} can (`kernelscale track`)") from None
    with f:  # closing it releases the lock
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _cmd_tracking_init(a) -> None:
    from .tracking import init_store

    if a.out:
        _check_writable(Path(a.out).parent, "the record's folder")
    try:
        _check_reachable(a.uri)
    except UserError as e:
        # not fatal: the import at the end creates the store (or fails with this line)
        print(f"kernelscale tracking-init: warning: {e}", file=sys.stderr, flush=True)
        _write_record(a, experiment_id=None, reachable=False)
        return
    with _store_lock(a.uri):
        exp_id = init_store(a.uri, a.experiment)
    print(f"mlflow store {a.uri}: experiment {a.experiment!r} (id {exp_id})", flush=True)
    _write_record(a, experiment_id=exp_id)


def _cmd_track(a) -> None:
    from .tracking import import_runs, pipeline_run_name, run_folders, run_records

    if a.out:  # before the import, not after it
        _check_writable(Path(a.out).parent, "the record's folder")
    for d in run_folders(a.run_dirs):  # every record readable before the store is touched
        if (d / "final.json").is_file():
            run_records(d)
    _check_reachable(a.uri)
    with _store_lock(a.uri):
        try:
            records = import_runs(a.uri, a.experiment, a.run_dirs,
                                  parent_name=pipeline_run_name() if a.parent else None)
        except Exception as e:  # SQLAlchemy's error carries the database's reason in .orig
            if getattr(e, "orig", None) is None:
                raise
            raise UserError(f"tracking store {a.uri}: {e.orig}; {STORE_KEPT} can be written "
                            "(run the workflow again, or `kernelscale track`)") from None
    counts = {k: sum(r["action"] == k for r in records) for k in ("created", "replaced", "unchanged")}
    print(f"mlflow import into {a.uri} ({a.experiment}): {counts}", flush=True)
    _write_record(a, runs=records)


def _cmd_tables(a) -> None:
    from mlflow.tracking import MlflowClient

    from .tables import is_reference, run_ids_from_import, write_tables
    from .tracking import search_runs

    for path in (a.csv, a.md) + ((a.wide_csv,) if a.wide_csv else ()):
        _check_writable(Path(path).parent, "the tables folder")
    try:
        ids = run_ids_from_import(a.runs_from) if a.runs_from else None
    except (ValueError, KeyError, TypeError) as e:  # FileNotFoundError: named by error_line
        raise UserError(f"{a.runs_from}: not an import record of `kernelscale track --out` "
                        f"({' '.join(str(e).split()) or type(e).__name__})") from None
    _check_reachable(a.uri)
    exists = MlflowClient(tracking_uri=a.uri).get_experiment_by_name(a.experiment) is not None
    runs = search_runs(a.uri, a.experiment) if exists else None
    if runs is None or len(runs) == 0:
        # an empty table is not a result: say why and leave no output behind
        what = "does not exist" if runs is None else "has no runs"
        raise UserError(f"experiment {a.experiment!r} {what} in the tracking store {a.uri}; "
                        "run `kernelscale track` (or the workflow) first")
    stored = set(runs["run_id"])
    missing = [key for rid, key in (ids or {}).items() if rid not in stored]
    if missing:  # a table without them is not the config's result; the next run imports them
        Path(a.runs_from).unlink()
        raise UserError(f"{len(missing)} of {len(ids)} runs of {a.runs_from} are not in "
                        f"experiment {a.experiment!r} of the tracking store {a.uri} "
                        f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); "
                        "removed the record: run the workflow (or `kernelscale track`) again")
    df = write_tables(runs, a.csv, a.md, run_ids=ids, wide_csv_path=a.wide_csv)
    print(f"wrote {a.csv} and {a.md} ({int((~df['algorithm'].map(is_reference)).sum())} runs)",
          flush=True)


def _cmd_plots(a) -> None:
    from .plots import plot_dataset

    for p in (a.metric_png, a.objective_png):
        Path(p).parent.mkdir(parents=True, exist_ok=True)
    plot_dataset(a.run_dirs, a.dataset, a.metric_png, a.objective_png)
    print(f"wrote {a.metric_png} and {a.objective_png}", flush=True)


def _merged_config(files) -> dict:
    """Config files merged in order, as `snakemake --configfile A B` merges them; a missing,
    invalid, empty or non-mapping file is one line naming it (``load_config_checked``)."""
    from snakemake.utils import update_config

    from .configuration import load_config_checked

    config = {}
    for f in files:
        update_config(config, load_config_checked(f))
    return config


def _cmd_check_config(a) -> None:
    import jsonschema
    import yaml
    from referencing import Registry, Resource

    from .configuration import check, schema_error_line, set_config_files

    config = _merged_config(a.configfile)
    set_config_files(a.configfile, a.configfile)
    schema_path = Path(a.schema)
    schema = load_yaml(schema_path)
    schema["$id"] = schema_path.resolve().as_uri()

    registry = Registry(retrieve=lambda uri: Resource.from_contents(
        yaml.safe_load(Path(url2pathname(urlparse(uri).path)).read_text())))
    try:
        try:
            jsonschema.Draft202012Validator(schema, registry=registry).validate(config)
        except jsonschema.ValidationError as e:
            raise SystemExit(schema_error_line(e)) from None
        check(config)
    finally:
        set_config_files([])  # the module-level record must not outlive this command
    print(f"{' + '.join(a.configfile)}: ok", flush=True)


def _cmd_repair(a) -> None:
    """What ``make run`` does before snakemake: stop in one line when another snakemake holds the
    lock here, else remove a stale lock and set damaged prepared datasets of the config's runs
    aside."""
    from . import recovery

    line = recovery.held_lock_line()
    if line:
        raise SystemExit(line)
    config = _merged_config(a.configfile)
    recovery.clear_stale_locks()
    recovery.set_aside_damaged_data(config)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="kernelscale", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    t = sub.add_parser("train", help="train one (dataset, algorithm, seed) into a run folder")
    t.add_argument("--data", required=True, help="prepared dataset folder (meta.json, data.zarr)")
    t.add_argument("--out", required=True, help="run folder")
    t.add_argument("--algorithm", required=True, help="algorithm name (config.yaml key)")
    t.add_argument("--spec", required=True,
                   help='JSON: {"estimator": ..., "params": {...}, "device": ..., "segments": N}')
    t.add_argument("--seed", type=int_at_least(0), default=0)
    t.add_argument("--threads", type=int_at_least(0), default=0,
                   help="BLAS/OpenMP threads (0: library default)")
    t.add_argument("--eval-chunk-rows", type=int_at_least(1), default=None,
                   help="test rows predicted at once (default: the dataset's chunk rows)")
    add_dask_arguments(t)
    t.add_argument("--stop-after", type=int_at_least(1), default=None,
                   help="stop after this many segments (leaves a checkpoint; for tests)")
    t.set_defaults(func=_cmd_train)

    store = {}  # the commands that read or write the tracking store
    for name, func, hlp in (("tracking-init", _cmd_tracking_init, "create the MLflow store"),
                            ("track", _cmd_track, "import run folders into MLflow"),
                            ("tables", _cmd_tables, "summary tables from MLflow")):
        store[name] = s = sub.add_parser(name, help=hlp)
        for flag in ("--uri", "--experiment"):
            s.add_argument(flag, required=True)
        s.set_defaults(func=func)
    for name in ("tracking-init", "track"):
        store[name].add_argument("--out", default=None, help="JSON record of what was done")
    s = store["track"]
    s.add_argument("--parent", action="store_true",
                   help="group the runs under a new parent run (one per pipeline call)")
    s.add_argument("run_dirs", nargs="+", help="run folders (or their final.json)")

    s = store["tables"]
    for flag in ("--csv", "--md"):
        s.add_argument(flag, required=True)
    s.add_argument("--runs-from", default=None, metavar="IMPORTED_JSON",
                   help="only the runs of this import record (`track --out`): the config's runs")
    s.add_argument("--wide-csv", default=None, help="also write the algorithms x datasets table")

    s = sub.add_parser("plots", help="per-dataset figures from run folders")
    for flag in ("--dataset", "--metric-png", "--objective-png"):
        s.add_argument(flag, required=True)
    s.add_argument("run_dirs", nargs="+")
    s.set_defaults(func=_cmd_plots)

    s = sub.add_parser("check-config", help="validate config files (merged in order)")
    s.add_argument("configfile", nargs="+")
    s.add_argument("--schema", default="workflow/schemas/config.schema.yaml")
    s.set_defaults(func=_cmd_check_config)

    s = sub.add_parser("repair", help="remove a stale Snakemake lock, set damaged data aside")
    s.add_argument("configfile", nargs="*", default=["config.yaml"])
    s.set_defaults(func=_cmd_repair)

    from . import bench, reproduce

    s = sub.add_parser("bench", help="the scale benchmark: time to SVC's error, block "
                       "throughput, epoch cost, memory against the budget")
    bench.add_arguments(s)
    s.set_defaults(func=lambda a: bench.run_benchmark(bench.settings(a)))

    s = sub.add_parser("reproduce", help="the seed papers' headline claims on the development "
                       "data: a figure and a verdict each")
    reproduce.add_arguments(s)
    s.set_defaults(func=reproduce.run)

    from .data import cli as data_cli

    data_cli.register(sub)
    return p


def error_line(e: BaseException) -> str:
    """The problem in ``e`` as one line in the user's words, without Python's class names."""
    if isinstance(e, ConfigError):
        return str(e)  # already one line per problem, each naming its key
    if isinstance(e, KeyError):
        return f"missing key {e.args[0]!r}" if e.args else "missing key"
    if isinstance(e, PermissionError):
        return f"cannot write {e.filename}: permission denied (is the folder read-only?)"
    if isinstance(e, FileNotFoundError) and e.filename:
        return f"{e.filename}: no such file or directory"
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, MemoryError):
        return "out of memory; use smaller batch, block or component sizes, or a memory_budget"
    text = " ".join(str(e).split())
    if isinstance(e, (ValueError, RuntimeError, UserError, ConnectionError, OSError)) and text:
        return text
    # anything else is a bug or a library failure: keep its message, point to the traceback
    return f"{text or type(e).__name__} (unexpected; KERNELSCALE_TRACEBACK=1 shows where)"


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("kernelscale: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if os.environ.get("KERNELSCALE_TRACEBACK"):
            raise
        lines = error_line(e).splitlines() or [""]
        if isinstance(e, ConfigError):  # one line per problem
            print("\n".join(lines), file=sys.stderr)
        else:
            print(f"kernelscale {args.command}: error: {lines[0]}", file=sys.stderr)
        return 1
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
