"""The pipeline's view of ``config.yaml``: checks beyond the schema, the run list, resources.

Used by the Snakefile (which stays free of logic) and by ``kernelscale train``. Every problem is
reported as one line naming the key path, e.g.
``experiments.0.algorithms: unknown algorithm 'foo' (known: dsg, udsg)``.
"""

from __future__ import annotations

import json

DEFAULT_TRAIN_RESOURCES = {"threads": 1, "mem_mb": 2000, "runtime": 60}
DEFAULT_TRACKING = {"uri": "sqlite:///results/mlflow.db", "experiment": "kernelscale"}


class ConfigError(ValueError):
    """A one-line configuration error."""


# Config files in increasing precedence (set by the Snakefile: several --configfile are merged,
# and an error must name the file that holds the key, not always config.yaml).
_CONFIG_FILES: list[str] = []
_LOADED: dict[str, dict] = {}


def set_config_files(files, command_line=()) -> None:
    """Record the config files: the Snakefile's ``configfile:`` ones, then ``--configfile`` ones
    (which Snakemake lets win over the Snakefile's, the last one winning)."""
    cli = [str(f) for f in command_line or ()]
    _CONFIG_FILES[:] = [str(f) for f in files if str(f) not in cli] + cli
    _LOADED.clear()


def _load(path: str) -> dict:
    if path not in _LOADED:
        import yaml

        try:
            with open(path) as f:
                _LOADED[path] = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError):
            _LOADED[path] = {}
    return _LOADED[path]


def config_file_of(key_path) -> str:
    """The config file whose value for ``key_path`` (e.g. ``("datasets", "a9a", "sha256")``)
    is the one in effect: the highest-precedence file holding the longest prefix of the path;
    ``config.yaml`` when no file was recorded."""
    best, best_depth = None, -1
    for path in _CONFIG_FILES:
        node, depth = _load(path), 0
        for key in key_path:
            if isinstance(node, dict) and key in node:
                node, depth = node[key], depth + 1
            elif isinstance(node, list) and str(key).isdigit() and int(key) < len(node):
                node, depth = node[int(key)], depth + 1
            else:
                break
        if depth > 0 and depth >= best_depth:
            best, best_depth = path, depth
    return best or "config.yaml"


def schema_error_line(exc: BaseException) -> str:
    """One line from a (snakemake-wrapped) jsonschema ValidationError: key path + message."""
    import jsonschema

    seen, todo, ve = set(), [exc], None
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, jsonschema.ValidationError):
            ve = e
            break
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        todo += [e.__cause__, e.__context__]
    if ve is None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"{config_file_of(())}: {first}"
    best = jsonschema.exceptions.best_match([ve]) or ve
    ctx = list(best.context or [])
    if ctx:  # oneOf/anyOf: the deepest sub-error says most
        best = max(ctx, key=lambda c: len(c.absolute_path))
    path = ".".join(str(p) for p in best.absolute_path) or "(top level)"
    msg = " ".join(best.message.split())
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return f"{config_file_of(tuple(best.absolute_path))}: {path}: {msg}"


def load_yaml_checked(path):
    """A YAML file's content; ``ValueError`` with ``FILE:LINE:COLUMN: ...`` on a syntax error."""
    from .cli_common import UserError, load_yaml

    try:
        return load_yaml(path)
    except UserError as e:
        raise ValueError(str(e)) from None


def load_config_checked(path) -> dict:
    """A config file's mapping; ``ValueError`` with one line naming the file when it is missing,
    not valid YAML, empty or not a mapping (Snakemake's own messages for these span several lines
    and name the Snakefile instead of the config file)."""
    content = load_yaml_checked(path)
    if content is None:
        raise ValueError(f"{path}: the file is empty; expected a mapping with datasets:, "
                         "algorithms: and experiments:")
    if not isinstance(content, dict):
        raise ValueError(f"{path}: expected a mapping (datasets:, algorithms:, experiments:, "
                         f"...) at the top level, got {type(content).__name__}")
    return content


def semantic_errors(config: dict) -> list[str]:
    """Problems a schema cannot see: names that do not resolve, tasks an algorithm cannot do."""
    from . import registry

    errors: list[str] = []
    datasets = config.get("datasets") or {}
    algorithms = config.get("algorithms") or {}
    try:
        from .data.spec import validate_dataset_spec
    except ImportError:  # the data stage is not installed: schema checks only
        validate_dataset_spec = None
    if validate_dataset_spec is not None:
        # A checksum still TODO-verify-on-first-download is no error: that dataset's download
        # trusts and pins its first copy (data.download), the other datasets never wait on it.
        for name, spec in datasets.items():
            try:
                validate_dataset_spec(name, spec)
            except Exception as e:  # DataError: already one line naming the key
                errors.append(f"{config_file_of(('datasets', name))}: "
                              f"{str(e).splitlines()[0]}")
    for name, spec in algorithms.items():
        est = spec.get("estimator", name)
        if est not in registry.ALGORITHMS:
            errors.append(f"{config_file_of(('algorithms', name, 'estimator'))}: "
                          f"algorithms.{name}.estimator: unknown estimator {est!r} "
                          f"(registered: {', '.join(sorted(registry.ALGORITHMS))})")
    for i, exp in enumerate(config.get("experiments") or []):
        for d in exp.get("datasets", []):
            if d not in datasets:
                errors.append(f"{config_file_of(('experiments', i, 'datasets'))}: "
                              f"experiments.{i}.datasets: unknown dataset {d!r} "
                              f"(known: {', '.join(sorted(datasets)) or 'none'})")
        for a in exp.get("algorithms", []):
            if a not in algorithms:
                errors.append(f"{config_file_of(('experiments', i, 'algorithms'))}: "
                              f"experiments.{i}.algorithms: unknown algorithm {a!r} "
                              f"(known: {', '.join(sorted(algorithms)) or 'none'})")
                continue
            est = algorithms[a].get("estimator", a)
            if est not in registry.ALGORITHMS:
                continue
            for d in exp.get("datasets", []):
                task = (datasets.get(d) or {}).get("task")
                kind = "regression" if task == "regression" else "classification"
                if task and kind not in registry.ALGORITHMS[est]:
                    errors.append(f"{config_file_of(('experiments', i))}: "
                                  f"experiments.{i}: algorithm {a!r} does not do "
                                  f"{task} (dataset {d!r})")
    errors += missing_file_errors(config)
    from .checks import config_errors  # parameter values and sizes (n_iter: 0, block_size: 1e8)

    errors += config_errors(config)
    if not runs(config) and not errors:
        errors.append(f"{config_file_of(('experiments',))}: experiments: no (dataset, "
                      "algorithm, seed) to run")
    return errors


def missing_file_errors(config: dict, workdir=".") -> list[str]:
    """One line per local file (``path:``, ``labels_path:``, ...) of a dataset an experiment runs
    that is not there: found before the DAG is built, instead of Snakemake's MissingInputException
    for rule prepare. Relative paths are relative to ``workdir`` (the workflow's working
    directory), as prepare reads them."""
    from pathlib import Path

    from .data.spec import FILE_ROLES

    datasets = config.get("datasets") or {}
    errors = []
    for name in run_datasets(config):
        spec = datasets.get(name)
        if not isinstance(spec, dict):
            continue  # an unknown or malformed entry is reported by its own check
        if spec.get("optional"):
            continue  # left out of the runs with one line (``skip_missing_datasets``)
        for role in FILE_ROLES:
            given = spec.get(f"{role}path")
            if not isinstance(given, str):
                continue
            path = Path(given).expanduser()
            full = path if path.is_absolute() else Path(workdir).resolve() / path
            if full.is_file():
                continue
            what = "is a folder, expected a file" if full.is_dir() else "no such file"
            where = "" if path.is_absolute() else f" (relative to {Path(workdir).resolve()})"
            errors.append(f"{config_file_of(('datasets', name, f'{role}path'))}: "
                          f"datasets.{name}.{role}path: {given}: {what}{where}")
    return errors


def check(config: dict) -> None:
    """Raise ConfigError with all semantic problems, one per line."""
    errors = semantic_errors(config)
    if errors:
        raise ConfigError("\n".join(errors))


def runs(config: dict) -> list[tuple[str, str, int]]:
    """(dataset, algorithm, seed) triples of all experiments, in order, without duplicates."""
    out, seen = [], set()
    for exp in config.get("experiments") or []:
        for d in exp.get("datasets", []):
            for a in exp.get("algorithms", []):
                for s in exp.get("seeds", [0]):
                    t = (str(d), str(a), int(s))
                    if t not in seen:
                        seen.add(t)
                        out.append(t)
    return out


def run_datasets(config: dict) -> list[str]:
    return sorted({d for d, _, _ in runs(config)})


def missing_local_files(config: dict) -> dict[str, list[str]]:
    """Datasets marked ``optional: true`` among the config's runs whose local (``path:``) files
    are not there, e.g. the papers' licensed data (TIMIT, ImageNet features): name -> the
    missing paths. (A missing file of any other dataset is an error: ``missing_file_errors``.)"""
    from pathlib import Path

    from .data.spec import FILE_ROLES

    out = {}
    for name in run_datasets(config):
        spec = (config.get("datasets") or {}).get(name) or {}
        if not spec.get("optional"):
            continue
        missing = [str(spec[f"{role}path"]) for role in FILE_ROLES if f"{role}path" in spec
                   and not Path(spec[f"{role}path"]).expanduser().exists()]
        if missing:
            out[name] = missing
    return out


def skip_missing_datasets(config: dict) -> list[str]:
    """Take the datasets of ``missing_local_files`` out of the experiments (in place), so that
    one absent licensed file does not stop the runs on the other datasets (Snakemake refuses the
    whole DAG when one input can be neither found nor made). Returns one line per dataset;
    ConfigError when no run is left."""
    missing = missing_local_files(config)
    if not missing:
        return []
    lines = []
    for name, paths in missing.items():
        n = sum(1 for d, _, _ in runs(config) if d == name)
        lines.append(f"kernelscale: {config_file_of(('datasets', name))}: datasets.{name}: "
                     f"{', '.join(paths)} not found; its {n} run(s) are skipped (put the file "
                     "there, or fix `path:`)")
    for exp in config.get("experiments") or []:
        exp["datasets"] = [d for d in exp.get("datasets", []) if d not in missing]
    if not runs(config):
        raise ConfigError("\n".join(lines + [f"{config_file_of(('experiments',))}: "
                                              "experiments: no run left to do"]))
    return lines


def unverified_checksum_lines(config: dict, cache=None) -> list[str]:
    """One line per downloaded file of the config's runs whose config sha256 is still
    ``TODO-verify-on-first-download``: the sha256 its first download had, to check and paste
    (the download job logged it; the console shows these at the end of a run)."""
    from .data.download import read_pin, remote_files
    from .data.spec import TODO_SHA256

    lines = []
    for name in run_datasets(config):
        spec = (config.get("datasets") or {}).get(name) or {}
        if "url" not in spec:
            continue
        for f in remote_files(name, spec, cache):
            if f.sha256 != TODO_SHA256 or not f.path.exists():
                continue
            where = f"kernelscale: {config_file_of(('datasets', name))}: {f.key(name)} is not filled in"
            pinned = read_pin(f.path)
            if pinned is not None:
                lines.append(f"{where}; the first download ({f.path}) had sha256 {pinned}: "
                             "check it against a trusted source and paste it there")
            else:  # put in the cache by hand: Snakemake saw the file and ran no download job
                lines.append(f"{where}; {f.path} (put there by hand) is used as it is: paste "
                             f"its sha256 (`sha256sum {f.path}`) once you trust it")
    return lines


def algorithm_spec(config: dict, name: str) -> dict:
    """What ``kernelscale train`` needs of an algorithms entry (estimator, params, device, ...)."""
    spec = dict(config["algorithms"][name])
    # the config's shared params (e.g. one reg for every method), under the entry's own
    params = {**(config.get("params") or {}), **(spec.get("params") or {})}
    return {"estimator": spec.get("estimator", name), "params": params,
            "device": spec.get("device", "auto"), "segments": int(spec.get("segments", 10)),
            "step_test_rows": int(spec.get("step_test_rows", 10000))}


def algorithm_spec_json(config: dict, name: str) -> str:
    return json.dumps(algorithm_spec(config, name), sort_keys=True, separators=(",", ":"))


def train_resources(config: dict, name: str) -> dict:
    """threads / mem_mb / runtime (minutes) / gpu for a train job of algorithm ``name``."""
    res = {**DEFAULT_TRAIN_RESOURCES, **((config.get("resources") or {}).get("train") or {})}
    spec = config["algorithms"][name]
    res.update(spec.get("resources") or {})
    res["gpu"] = 1 if spec.get("device", "auto") == "gpu" else 0
    return res


def bench_args(config: dict) -> str:
    """Command-line options of ``benchmarks/harness.py`` from the config's ``bench`` section."""
    bench = config.get("bench") or {}
    args = []
    if bench.get("sections"):
        args += ["--sections", *map(str, bench["sections"])]
    for key, flag in (("n_train", "--n-train"), ("time_cap_s", "--time-cap"),
                      ("budget_mb", "--budget-mb")):
        if bench.get(key) is not None:
            args += [flag, str(bench[key])]
    args += [flag for key, flag in (("quick", "--quick"), ("huge", "--huge")) if bench.get(key)]
    return " ".join(args)


def bench_threads(config: dict) -> int:
    """Threads of the bench job: ``bench.threads``, else this machine's CPUs (Snakemake caps a
    local job at ``--cores``; not ``workflow.cores``, which is undefined under a cluster profile)."""
    import os

    return int((config.get("bench") or {}).get("threads") or os.cpu_count() or 1)


def tracking(config: dict) -> dict:
    return {**DEFAULT_TRACKING, **(config.get("tracking") or {})}


def run_dir(dataset: str, algorithm: str, seed) -> str:
    return f"results/runs/{dataset}/{algorithm}/seed{seed}"


def final_files(config: dict, dataset: str | None = None) -> list[str]:
    """``final.json`` of every run (of one dataset when given)."""
    return [f"{run_dir(d, a, s)}/final.json" for d, a, s in runs(config)
            if dataset is None or d == dataset]


def job_environment(python: str, src, dask: dict | None = None) -> None:
    """Make the rules' ``python -m kernelscale.pipeline.cli`` resolve to this interpreter (its bin/ first on
    PATH) and this checkout (``src`` first on PYTHONPATH); jobs, Slurm jobs included (sbatch exports
    the environment), inherit both. Under ``--sdm conda`` the activated environment's python comes
    first and still finds the package through PYTHONPATH. The config's ``dask`` section travels
    the same way (``distributed.environment``)."""
    import os
    from pathlib import Path

    from ..distributed import environment

    for key, value in environment(dask).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

    bindir = str(Path(python).parent)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[:1] != [bindir]:
        os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
    pp = os.environ.get("PYTHONPATH", "")
    if str(src) not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join([str(src), pp]) if pp else str(src)


def config_hash(config: dict) -> str:
    """Short hash of the merged config (all --configfile files and --config overrides)."""
    import hashlib

    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def git_commit(basedir) -> str | None:
    """HEAD of the workflow's git checkout, ``-dirty`` appended when tracked files changed;
    None outside git."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(basedir), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(basedir), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def provenance_environment(config: dict, basedir) -> None:
    """Hand the git commit and config hash to the MLflow import job through the environment
    (``tracking.provenance_tags``): as rule params they would re-run the import after every
    commit."""
    import os

    from .tracking import CONFIG_HASH_ENV, GIT_ENV

    os.environ[CONFIG_HASH_ENV] = config_hash(config)
    commit = git_commit(basedir)
    if commit:
        os.environ[GIT_ENV] = commit
    else:
        os.environ.pop(GIT_ENV, None)


def conda_env(config: dict, name: str, basedir) -> str:
    """envs/gpu.yaml for algorithms on the GPU, envs/cpu.yaml otherwise (for --sdm conda)."""
    kind = "gpu" if config["algorithms"][name].get("device", "auto") == "gpu" else "cpu"
    return f"{basedir}/envs/{kind}.yaml"


# ----------------------------------------------------------------------------- read-only outputs
def _nearest_existing(path):
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def unwritable_output_line(config: dict, workdir=".") -> str | None:
    """One line when the workflow cannot write where its jobs write, else None.

    Checked from the Snakefile before the DAG is built: Snakemake itself finds a read-only
    ``results/`` only then (ProtectedOutputException, ~30 lines) or when a job starts
    (``Failed to create output directory``), after other jobs may have written their outputs.
    Places: ``results/`` and every folder in it (not inside Zarr stores, which prepare replaces
    whole), the MLflow SQLite file of ``tracking.uri`` and the download cache when a dataset is
    downloaded. A place that does not exist yet needs its nearest existing parent writable. A
    single read-only file in a writable folder is left to Snakemake: write-protecting an output
    is its way of keeping a result from being re-made."""
    import os
    from pathlib import Path

    work = Path(workdir).resolve()
    places = [work / "results"]
    uri = tracking(config)["uri"]
    if uri.startswith("sqlite:///"):  # sqlite:///rel/path or sqlite:////abs/path
        places.append(work / uri[len("sqlite:///"):])
    if any("url" in (config.get("datasets") or {}).get(d, {}) for d in run_datasets(config)):
        from .data.download import cache_dir

        places.append(work / cache_dir())
    bad = []
    for place in places:
        if not place.exists():
            parent = _nearest_existing(place.parent)
            if not os.access(parent, os.W_OK | os.X_OK):
                bad.append(parent)
            continue
        if place.is_file():
            bad += [p for p in (place, place.parent) if not os.access(p, os.W_OK)]
            continue
        for folder, subfolders, _ in os.walk(place):
            subfolders[:] = sorted(d for d in subfolders if not d.endswith(".zarr"))
            if not os.access(folder, os.W_OK | os.X_OK):
                bad.append(Path(folder))
    if not bad:
        return None
    bad = list(dict.fromkeys(bad))
    shown = [str(p.relative_to(work)) if p.is_relative_to(work) else str(p) for p in bad]
    kind = "file" if bad[0].is_file() else "folder"
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"kernelscale: {shown[0]}: read-only {kind}{more} where the workflow writes; "
            "nothing has run: make it writable (chmod -R u+w, or chattr -R -i as root) or run "
            "in another directory")


# ----------------------------------------------------------------------------- stale locks
def _snakemake_pids(workdir) -> list[int] | None:
    """PIDs of snakemake processes (any mode) working in ``workdir``, other than this process
    and its ancestors (a shell or ``make`` that started us may carry 'snakemake' in its command
    line). Linux /proc only; elsewhere the answer is unknown and None is returned."""
    import os
    from pathlib import Path

    proc = Path("/proc")
    if not (proc / "self" / "cmdline").exists():
        return None
    workdir = Path(workdir).resolve()
    skip, pid = set(), os.getpid()
    while pid > 1:  # ourselves and our ancestors
        skip.add(pid)
        try:
            stat = (proc / str(pid) / "stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    for p in proc.iterdir():
        if not p.name.isdigit() or int(p.name) in skip:
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            cwd = Path(os.readlink(p / "cwd")).resolve()
        except OSError:  # gone, or another user's process
            continue
        if cwd == workdir and any(Path(a.decode(errors="replace")).name == "snakemake"
                                  for a in argv):
            found.append(int(p.name))
    return found


def set_aside_damaged_data(config: dict, workdir=".") -> list[str]:
    """Move every damaged prepared dataset of the config's runs aside, so that Snakemake sees
    its ``meta.json`` (prepare's output) missing and re-runs prepare, then the jobs downstream.

    Called from the Snakefile before the DAG is built. A dataset is damaged when a file of an
    array is missing, changed or unexpected, or ``meta.json`` is unreadable or has no checksums
    (``data.store.prepared_fault``: sizes and sha256, ~1.4 GB/s of stored bytes). Its folder
    ``results/data/<name>`` becomes ``results/data/<name>.damaged`` (replacing an older one),
    and one line per dataset is printed. Nothing is done while another snakemake process works
    in ``workdir`` (a train job of that run may be reading the dataset) or when that cannot be
    checked (no /proc): ``train`` then refuses the dataset with its one-line error.
    Returns the lines printed."""
    import shutil
    import sys
    from pathlib import Path

    from .data.store import prepared_fault

    data = Path(workdir) / "results" / "data"
    faults = {}
    for name in run_datasets(config):
        fault = prepared_fault(data / name)
        if fault is not None:
            faults[name] = fault
    if not faults:
        return []
    others = _snakemake_pids(workdir)
    lines = []
    for name, fault in faults.items():
        folder = data / name
        if others is None or others:
            line = (f"kernelscale: {folder}: {fault}; not re-preparing it while another "
                    "snakemake runs here (re-run when it has finished)")
        else:
            aside = data / f"{name}.damaged"
            shutil.rmtree(aside, ignore_errors=True)
            folder.rename(aside)
            line = (f"kernelscale: {folder}: {fault}; moved to {aside}, prepare runs again")
        print(line, file=sys.stderr, flush=True)
        lines.append(line)
    return lines


def clear_stale_locks(workdir=".") -> str | None:
    """Remove Snakemake's directory lock when no snakemake runs in ``workdir``.

    ``kill -9`` of snakemake (or a lost node) leaves ``.snakemake/locks/`` behind, and the next
    run stops with a LockException until someone runs ``--unlock``. The lock only guards against
    two snakemake processes writing the same outputs, so a lock whose owner is gone is removed
    here (called from the Snakefile, before Snakemake takes its own lock). Not removed when another
    snakemake process works in this directory (this includes jobs still running from a killed
    run, which would race with a rerun) or when that cannot be checked (no /proc).
    Returns the line it printed, or None."""
    import shutil
    import sys
    from pathlib import Path

    locks = Path(workdir) / ".snakemake" / "locks"
    if not locks.is_dir() or not any(locks.glob("*.lock")):
        return None
    others = _snakemake_pids(workdir)
    if others is None or others:
        return None
    shutil.rmtree(locks, ignore_errors=True)
    line = (f"kernelscale: removed a stale Snakemake lock in {Path(workdir).resolve()} "
            "(no snakemake process is running there)")
    print(line, file=sys.stderr, flush=True)
    return line


# ----------------------------------------------------------------------------- failed jobs
def _job_config_key(rule: str, log: str):
    """The config entry behind a failed job, from its log path (see the rules' ``log:``)."""
    import re

    m = re.search(r"logs/train/([^/]+)/([^/]+)/seed\d+\.log$", log)
    if rule == "train" and m:
        return ("algorithms", m.group(2)), f"{m.group(1)}/{m.group(2)}"
    m = re.search(r"logs/(?:prepare|download)/([^/.]+(?:\.[^/]+)*?)(?:/[^/]+)?\.log$", log)
    if rule in ("prepare", "download") and m:
        return ("datasets", m.group(1)), m.group(1)
    return None, None


def failed_job_lines(snakemake_logs) -> list[str]:
    """One line per failed job of a Snakemake run: the error line its kernelscale command wrote
    in its log, the config entry behind the job and the file holding it, and the log's path, so
    the end of the console says what went wrong and where to fix it without scrolling through
    Snakemake's job dump (command line, JSON spec, ...). ``snakemake_logs``: the run's log
    file(s) (the ``log`` of ``onerror``)."""
    import re
    from pathlib import Path

    if isinstance(snakemake_logs, (str, Path)):
        snakemake_logs = [snakemake_logs]
    text = ""
    for path in snakemake_logs or ():
        try:
            text += Path(path).read_text(errors="replace")
        except OSError:
            continue
    lines = []
    for m in re.finditer(r"Error in rule (\S+?):.*?\n\s+log: (\S+)", text, re.S):
        rule, log = m.group(1), m.group(2)
        try:
            body = [ln for ln in Path(log).read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            body = []
        errors = [ln for ln in body if ": error:" in ln]
        last = (errors or body or ["(empty log)"])[-1].strip()
        key, what = _job_config_key(rule, log)
        where = (f" ({what}; config {'.'.join(key)} in {config_file_of(key)})" if key else "")
        line = f"failed: rule {rule}{where}: {last} [log: {log}]"
        if line not in lines:
            lines.append(line)
    return lines


# ----------------------------------------------------------------------------- reproduce
def reproduce_claims(path="config/reproduce.yaml") -> list[str]:
    """The claim names of ``config/reproduce.yaml`` (``claims:`` keys), one figure each
    (``results/reproduce/<claim>.png``); empty when the file is absent."""
    from pathlib import Path

    import yaml

    if not Path(path).is_file():
        return []
    return [str(c) for c in ((yaml.safe_load(Path(path).read_text()) or {}).get("claims") or {})]
