"""The pipeline's configuration: the config files in precedence order, loading and schema errors
as one line naming the file and key path, the checks beyond the schema (``semantic_errors``),
the datasets skipped because their files are missing and the checksums not yet verified, and the
tracking settings.
"""

from __future__ import annotations

from .runs import missing_local_files, run_datasets, runs

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
    errors += missing_file_errors(config) + tracking_errors(config)
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


def tracking(config: dict) -> dict:
    return {**DEFAULT_TRACKING, **(config.get("tracking") or {})}


def tracking_errors(config: dict) -> list[str]:
    """One line when ``tracking.uri`` is a database (MLflow's SQLAlchemy stores) whose driver
    module is not installed here (``postgresql://`` needs psycopg2): MLflow would find it only
    when the first run is imported, after prepare and training."""
    uri = str(tracking(config)["uri"])
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme.split("+")[0] not in ("postgresql", "mysql", "mssql"):
        return []
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import NoSuchModuleError

    try:
        make_url(uri).get_dialect().import_dbapi()
    except (ImportError, NoSuchModuleError) as e:
        what = f"the driver module {e.name!r}" if isinstance(e, ImportError) else "a driver"
        return [f"{config_file_of(('tracking', 'uri'))}: tracking.uri: scheme {scheme!r} needs "
                f"{what}, which is not installed here; install it or use a sqlite:/// URI"]
    return []


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
