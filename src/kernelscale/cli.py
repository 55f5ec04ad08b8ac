"""``kernelscale`` command line: the commands the Snakemake rules call.

    kernelscale download / prepare ...   data stage (kernelscale.data.cli)
    kernelscale train ...                one run folder (resumes from its checkpoint)
    kernelscale tracking-init ...        create the MLflow store once
    kernelscale track ...                import run folders into MLflow (idempotent)
    kernelscale tables ...               summary.csv / summary.md from MLflow
    kernelscale plots ...                per-dataset figures from run folders
    kernelscale check-config FILE        validate a config.yaml (schema + names)

Errors are printed as one line (``kernelscale: error: ...``) with exit status 1; set
``KERNELSCALE_TRACEBACK=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _cmd_train(a) -> None:
    from .train_run import train

    spec = json.loads(a.spec)
    if a.threads:
        from threadpoolctl import threadpool_limits

        from .parallel import set_threads

        threadpool_limits(a.threads)
        set_threads(a.threads)  # element-wise passes (cos, exp) follow BLAS
    train(a.data, a.out, a.algorithm, spec, a.seed, stop_after=a.stop_after,
          eval_chunk_rows=a.eval_chunk_rows, dask_scheduler=a.dask_scheduler,
          dask_workers=a.dask_workers)


def _write_record(path: str, payload: dict) -> None:
    """A rule's JSON output, written whole or not at all (temporary file + rename)."""
    from .data.store import write_json_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(path), payload)


def _cmd_tracking_init(a) -> None:
    from .tracking import init_store

    exp_id = init_store(a.uri, a.experiment)
    print(f"mlflow store {a.uri}: experiment {a.experiment!r} (id {exp_id})", flush=True)
    if a.out:
        _write_record(a.out, {"uri": a.uri, "experiment": a.experiment, "experiment_id": exp_id})


def _cmd_track(a) -> None:
    from .tracking import import_runs, pipeline_run_name

    records = import_runs(a.uri, a.experiment, a.run_dirs,
                          parent_name=pipeline_run_name() if a.parent else None)
    counts = {k: sum(r["action"] == k for r in records) for k in ("created", "replaced", "unchanged")}
    print(f"mlflow import into {a.uri} ({a.experiment}): {counts}", flush=True)
    if a.out:
        _write_record(a.out, {"uri": a.uri, "experiment": a.experiment, "runs": records})


def _cmd_tables(a) -> None:
    from .tables import BASELINE, run_ids_from_import, write_tables
    from .tracking import search_runs

    ids = run_ids_from_import(a.runs_from) if a.runs_from else None
    df = write_tables(search_runs(a.uri, a.experiment), a.csv, a.md, run_ids=ids,
                      wide_csv_path=a.wide_csv)
    print(f"wrote {a.csv} and {a.md} ({int((df['algorithm'] != BASELINE).sum())} runs)",
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

    from .pipeline import check, schema_error_line, set_config_files

    config = {}
    for f in a.configfile:
        update_config(config, yaml.safe_load(Path(f).read_text()) or {})
    set_config_files(a.configfile, a.configfile)
    schema_path = Path(a.schema)
    schema = yaml.safe_load(schema_path.read_text())
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


def add_dask_arguments(parser: argparse.ArgumentParser) -> None:
    """--dask-scheduler / --dask-workers (config ``dask:``), shared by train and prepare."""
    from .distributed import SCHEDULER_ENV, WORKERS_ENV

    workers = os.environ.get(WORKERS_ENV)
    parser.add_argument("--dask-scheduler", default=os.environ.get(SCHEDULER_ENV) or None,
                        metavar="ADDRESS|local",
                        help="run chunked work on a dask cluster: 'local' (a LocalCluster per "
                             "job) or a scheduler address such as tcp://host:8786 (default: "
                             f"${SCHEDULER_ENV}, which the pipeline sets from config `dask:`; "
                             "else none)")
    parser.add_argument("--dask-workers", type=int, default=int(workers) if workers else None,
                        metavar="N",
                        help="LocalCluster workers for --dask-scheduler local (default: CPU count)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelscale", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train one (dataset, algorithm, seed) into a run folder")
    t.add_argument("--data", required=True, help="prepared dataset folder (meta.json, data.zarr)")
    t.add_argument("--out", required=True, help="run folder")
    t.add_argument("--algorithm", required=True, help="algorithm name (config.yaml key)")
    t.add_argument("--spec", required=True,
                   help='JSON: {"estimator": ..., "params": {...}, "device": ..., "segments": N}')
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=0, help="BLAS/OpenMP threads (0: library default)")
    t.add_argument("--eval-chunk-rows", type=int, default=None)
    add_dask_arguments(t)
    t.add_argument("--stop-after", type=int, default=None,
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

    try:
        from .data import cli as data_cli
    except ImportError as e:
        data_cli = None
        _missing = str(e)

        def _no_data(a):
            raise RuntimeError(f"the data stage is not installed (kernelscale.data.cli: {_missing})")

        for name in ("download", "prepare"):
            s = sub.add_parser(name, help="(data stage missing)")
            s.add_argument("rest", nargs=argparse.REMAINDER)
            s.set_defaults(func=_no_data)
    if data_cli is not None:
        data_cli.register(sub)
    return p


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
        from .pipeline import ConfigError

        if isinstance(e, ConfigError):  # one line per problem
            print(str(e), file=sys.stderr)
            return 1
        line = (str(e).strip().splitlines() or [""])[0]
        print(f"kernelscale {args.command}: error: {type(e).__name__}: {line}", file=sys.stderr)
        return 1
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
