"""``kernelscale`` command line: the commands the Snakemake rules call.

    kernelscale download / prepare ...   data stage (kernelscale.pipeline.data.cli)
    kernelscale train ...                one run folder (resumes from its checkpoint)
    kernelscale tracking-init ...        create the MLflow store once
    kernelscale track ...                import run folders into MLflow (idempotent)
    kernelscale tables ...               summary.csv / summary.md from MLflow
    kernelscale plots ...                per-dataset figures from run folders
    kernelscale check-config FILE        validate a config.yaml (schema + names)
    kernelscale repair [FILE ...]        before a run: stale lock, damaged prepared data
    kernelscale bench ...                the scale benchmark (kernelscale.pipeline.bench)
    kernelscale reproduce ...            the seed papers' claims (kernelscale.pipeline.reproduce)

Errors are printed as one line (``kernelscale: error: ...``) with exit status 1; set
``KERNELSCALE_TRACEBACK=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .cli_common import OneLineParser, UserError, add_dask_arguments, int_at_least, load_yaml


def _parse_spec(text: str) -> dict:
    """``--spec`` JSON, checked: one line naming the key and what is expected."""
    from .checks import spec_errors

    try:
        spec = json.loads(text)
    except ValueError as e:
        raise UserError(f"--spec: not valid JSON ({e}); expected e.g. "
                        '\'{"estimator": "dsg", "params": {"n_iter": 30}}\'') from None
    errors = spec_errors("--spec", spec)
    if errors:
        raise UserError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    return spec


def _check_writable(folder: Path, what: str = "the run folder") -> None:
    """Fail before training when the run folder cannot be written (one-line UserError)."""
    import tempfile

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

    spec = _parse_spec(a.spec)
    meta_path = Path(a.data) / "meta.json"
    if meta_path.is_file():  # sizes against the data: n_components x n_train bins, n x n kernels
        from .checks import spec_errors

        try:
            meta = json.loads(meta_path.read_text())
        except ValueError:
            meta = None  # the dataset check in train names the file
        if isinstance(meta, dict):
            errors = spec_errors("--spec", spec, meta.get("n_train"), meta.get("d"))
            if errors:
                raise UserError(errors[0])
    if a.threads:
        from threadpoolctl import threadpool_limits

        from ..parallel import set_threads

        threadpool_limits(a.threads)
        set_threads(a.threads)  # element-wise passes (cos, exp) follow BLAS
    # the run folder made by the writability check is removed again when the run fails before
    # it has anything to resume (e.g. its dask cluster does not start)
    with failed_start_leaves_nothing(a.out):
        _check_writable(Path(a.out))
        train(a.data, a.out, a.algorithm, spec, a.seed, stop_after=a.stop_after,
              eval_chunk_rows=a.eval_chunk_rows, dask_scheduler=a.dask_scheduler,
              dask_workers=a.dask_workers)


def _write_record(path: str, payload: dict) -> None:
    """A rule's JSON output, written whole or not at all (temporary file + rename)."""
    from .data.store import write_json_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(path), payload)


def _check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fail in seconds, with one line, when an http(s) tracking server does not answer.

    MLflow's client retries a refused connection with backoff for minutes (7 retries); a
    workflow then waits on it before failing."""
    from urllib.parse import urlparse

    u = urlparse(uri)
    if u.scheme not in ("http", "https"):
        return
    import socket

    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        socket.create_connection((u.hostname, port), timeout=timeout).close()
    except OSError as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise UserError(f"tracking server {uri} is unreachable ({reason}); the run folders are "
                        "kept: import them when it is up (run the workflow again, or "
                        "`kernelscale track`)") from None


def _experiment_exists(uri: str, experiment: str) -> bool:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri).get_experiment_by_name(experiment) is not None


class _StoreLock:
    """An exclusive lock file beside a ``sqlite:///`` store while it is written; servers are not
    locked (no shared file)."""

    def __init__(self, uri: str):
        self.uri, self.path = uri, None
        if uri.startswith("sqlite:///"):
            db = Path(uri[len("sqlite:///"):])
            self.path = db.with_name(db.name + ".lock")

    def __enter__(self):
        if self.path is not None:
            import fcntl

            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.f = open(self.path, "a")
            except OSError as e:
                raise UserError(f"tracking store {self.uri} cannot be written "
                                f"({e.strerror or e} at {e.filename}); the run folders are kept: "
                                "import them when it can (`kernelscale track`)") from None
            fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.path is not None:
            self.f.close()  # releases the lock


def _cmd_tracking_init(a) -> None:
    from .tracking import init_store

    if a.out:
        _check_writable(Path(a.out).parent, "the record's folder")

    try:
        _check_reachable(a.uri)
    except UserError as e:
        # Training must never wait on tracking: the store is created by the import at the end
        # (which then fails with this line if the server is still down).
        print(f"kernelscale tracking-init: warning: {e}", file=sys.stderr, flush=True)
        if a.out:
            _write_record(a.out, {"uri": a.uri, "experiment": a.experiment,
                                  "experiment_id": None, "reachable": False})
        return
    with _StoreLock(a.uri):
        exp_id = init_store(a.uri, a.experiment)
    print(f"mlflow store {a.uri}: experiment {a.experiment!r} (id {exp_id})", flush=True)
    if a.out:
        _write_record(a.out, {"uri": a.uri, "experiment": a.experiment, "experiment_id": exp_id})


def _cmd_track(a) -> None:
    from .tracking import import_runs, pipeline_run_name

    if a.out:  # before the import, not after it
        _check_writable(Path(a.out).parent, "the record's folder")
    from .tracking import run_records

    for d in a.run_dirs:  # every record readable before the store is touched
        d = Path(d).parent if Path(d).name == "final.json" else Path(d)
        if (d / "final.json").is_file():
            run_records(d)
    _check_reachable(a.uri)
    with _StoreLock(a.uri):
        try:
            records = import_runs(a.uri, a.experiment, a.run_dirs,
                                  parent_name=pipeline_run_name() if a.parent else None)
        except Exception as e:  # SQLAlchemy's error carries the database's reason in .orig
            if getattr(e, "orig", None) is None:
                raise
            raise UserError(f"tracking store {a.uri}: {e.orig}; the run folders are kept: "
                            "import them when it can be written (run the workflow again, or "
                            "`kernelscale track`)") from None
    counts = {k: sum(r["action"] == k for r in records) for k in ("created", "replaced", "unchanged")}
    print(f"mlflow import into {a.uri} ({a.experiment}): {counts}", flush=True)
    if a.out:
        _write_record(a.out, {"uri": a.uri, "experiment": a.experiment, "runs": records})


def _cmd_tables(a) -> None:
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
    runs = search_runs(a.uri, a.experiment) if _experiment_exists(a.uri, a.experiment) else None
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


def _cmd_check_config(a) -> None:
    import jsonschema
    import yaml

    # several files are merged as `snakemake --configfile A B` merges them; errors name the file
    from snakemake.utils import update_config

    from .configuration import check, load_config_checked, schema_error_line, set_config_files

    config = {}
    for f in a.configfile:
        # missing, syntax error (file:line:column), empty or not a mapping: one line naming the
        # file (snakemake refuses an empty --configfile too)
        try:
            part = load_config_checked(f)
        except ValueError as e:
            raise UserError(str(e)) from None
        update_config(config, part)
    set_config_files(a.configfile, a.configfile)
    schema_path = Path(a.schema)
    schema = load_yaml(schema_path)
    schema["$id"] = schema_path.resolve().as_uri()
    from referencing import Registry, Resource

    def retrieve(uri):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        return Resource.from_contents(yaml.safe_load(Path(url2pathname(urlparse(uri).path))
                                                     .read_text()))

    registry = Registry(retrieve=retrieve)
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
    """What ``make run`` does before snakemake (the Snakefile acts on nothing while parsed, so a
    dry run changes no file): stop in one line when another snakemake holds the lock here, else
    remove a stale lock and set damaged prepared datasets of the config's runs aside."""
    from snakemake.utils import update_config

    from . import recovery
    from .configuration import load_config_checked

    line = recovery.held_lock_line()
    if line:
        raise SystemExit(line)
    config = {}
    for f in a.configfile:  # merged in order, as `snakemake --configfile A B` merges them
        update_config(config, load_config_checked(f))
    recovery.clear_stale_locks()
    recovery.set_aside_damaged_data(config)


def _cmd_bench(a) -> None:
    from . import bench

    bench.run_benchmark(bench.settings(a))


def _cmd_reproduce(a) -> int:
    from . import reproduce

    return reproduce.run(a)


def build_parser() -> argparse.ArgumentParser:
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

    for name, func, hlp in (("tracking-init", _cmd_tracking_init, "create the MLflow store"),
                            ("track", _cmd_track, "import run folders into MLflow")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("--uri", required=True)
        s.add_argument("--experiment", required=True)
        s.add_argument("--out", default=None, help="JSON record of what was done")
        if name == "track":
            s.add_argument("--parent", action="store_true",
                           help="group the runs under a new parent run (one per pipeline call)")
            s.add_argument("run_dirs", nargs="+", help="run folders (or their final.json)")
        s.set_defaults(func=func)

    s = sub.add_parser("tables", help="summary tables from MLflow")
    s.add_argument("--uri", required=True)
    s.add_argument("--experiment", required=True)
    s.add_argument("--csv", required=True)
    s.add_argument("--md", required=True)
    s.add_argument("--runs-from", default=None, metavar="IMPORTED_JSON",
                   help="only the runs of this import record (`track --out`): the config's runs")
    s.add_argument("--wide-csv", default=None, help="also write the algorithms x datasets table")
    s.set_defaults(func=_cmd_tables)

    s = sub.add_parser("plots", help="per-dataset figures from run folders")
    s.add_argument("--dataset", required=True)
    s.add_argument("--metric-png", required=True)
    s.add_argument("--objective-png", required=True)
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
    s.set_defaults(func=_cmd_bench)

    s = sub.add_parser("reproduce", help="the seed papers' headline claims on the development "
                       "data: a figure and a verdict each")
    reproduce.add_arguments(s)
    s.set_defaults(func=_cmd_reproduce)

    try:
        from .data import cli as data_cli
    except ImportError as e:
        data_cli = None
        _missing = str(e)

        def _no_data(a):
            raise RuntimeError(f"the data stage is not installed (kernelscale.pipeline.data.cli: {_missing})")

        for name in ("download", "prepare"):
            s = sub.add_parser(name, help="(data stage missing)")
            s.add_argument("rest", nargs=argparse.REMAINDER)
            s.set_defaults(func=_no_data)
    if data_cli is not None:
        data_cli.register(sub)
    return p


def error_line(e: BaseException) -> str:
    """The problem in ``e`` as one line in the user's words, without Python's class names."""
    from .configuration import ConfigError

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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("kernelscale: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if os.environ.get("KERNELSCALE_TRACEBACK"):
            raise
        lines = error_line(e).splitlines() or [""]
        from .configuration import ConfigError

        if isinstance(e, ConfigError):  # one line per problem
            print("\n".join(lines), file=sys.stderr)
        else:
            print(f"kernelscale {args.command}: error: {lines[0]}", file=sys.stderr)
        return 1
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
