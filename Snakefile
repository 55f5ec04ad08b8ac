# kernelscale pipeline: download -> prepare -> train (one job per dataset x algorithm x seed)
# -> MLflow import -> tables, plots, report. Rules only name files and resources and call the
# `kernelscale` CLI; logic lives in src/kernelscale/pipeline: configuration.py (loading and
# checks), runs.py (the run matrix, resources), provenance.py (job environment, git, config hash),
# recovery.py (locks, damaged data, failed-job lines).
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.0")

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from kernelscale.pipeline import configuration, provenance, recovery, runs  # noqa: E402


# `--configfile FILE` is the whole configuration; config.yaml is only the default (Snakemake
# would otherwise deep-merge FILE into config.yaml, keeping entries FILE does not mention).
# Syntax errors are reported as config.yaml:LINE:COLUMN, an empty or non-mapping file in one line
# (Snakemake's own messages name no line, or name this Snakefile). A file given with --configfile
# is read by Snakemake before this runs: `make run CONFIG=FILE` checks it first (Makefile).
if not workflow.overwrite_configfiles:
    try:
        configuration.load_config_checked("config.yaml")
    except ValueError as e:
        sys.exit(str(e))

    configfile: "config.yaml"


report: "workflow/report/workflow.rst"


# errors name the file holding the key (several --configfile are merged into one config)
configuration.set_config_files(workflow.configfiles, workflow.overwrite_configfiles)
try:
    validate(config, "workflow/schemas/config.schema.yaml")
except Exception as e:  # one line naming the key instead of the validator's dump
    sys.exit(configuration.schema_error_line(e))
_errors = configuration.semantic_errors(config)
if _errors:  # one line per problem, each naming its key
    sys.exit("\n".join(_errors))

# A dataset whose local (licensed) files are absent is left out with one line: Snakemake would
# otherwise refuse the whole DAG, the runs on every other dataset included. (A checksum still
# TODO-verify-on-first-download blocks nothing: its download trusts and pins the first copy.)
try:
    _SKIPPED = configuration.skip_missing_datasets(config)
except configuration.ConfigError as e:
    sys.exit(str(e))
if workflow.is_main_process:
    for _line in _SKIPPED:
        print(_line, file=sys.stderr)
# A read-only results/ (or MLflow file, download cache) stops here in one line, before any job
# writes anything; Snakemake would stop with ~30 lines while building the DAG or when a job starts.
if workflow.is_main_process:
    _line = recovery.unwritable_output_line(config, Path.cwd())
    if _line:
        sys.exit(_line)

# Nothing here moves or deletes a file (`snakemake -n` must not act): a stale lock after
# `kill -9` and damaged prepared data are repaired by `kernelscale.pipeline.cli repair`, which
# `make run` runs before snakemake (`make repair` alone; recovery.py).

TRACKING = configuration.tracking(config)
provenance.job_environment(sys.executable, Path(workflow.basedir) / "src", config.get("dask"))
provenance.provenance_environment(config, workflow.basedir)  # git commit, config hash -> MLflow tags


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    algorithm=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    seed=r"\d+",


onsuccess:
    # what the user still has to do, where the console ends: skipped data, hashes to paste
    for _line in _SKIPPED + configuration.unverified_checksum_lines(config):
        print(_line, file=sys.stderr)


onerror:
    # one line per failed job (its log's error line) at the end of the console output
    for _line in (recovery.failed_job_lines(log) + _SKIPPED
                  + configuration.unverified_checksum_lines(config)):
        print(_line, file=sys.stderr)


include: "workflow/rules/download.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/track.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/reproduce.smk"


rule all:
    default_target: True
    input:
        # the import record: a failed import leaves none (Snakemake deletes a failed job's
        # outputs), and Snakemake re-makes a missing file only for a job that must run, so the
        # tables of the last good import would be kept with the new runs left out of them
        "results/tracking/imported.json",
        "results/tables/summary.csv",
        "results/tables/summary.md",
        "results/tables/wide.csv",
        expand(
            "results/plots/{dataset}/{kind}.png",
            dataset=runs.run_datasets(config),
            kind=["metric_vs_time", "objective_vs_time"],
        ),
        # the prepared data themselves: Snakemake re-creates a missing intermediate file only
        # when a job that needs it runs (a dataset moved aside above must be asked for)
        expand("results/data/{dataset}/meta.json", dataset=runs.run_datasets(config)),
