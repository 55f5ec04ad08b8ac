"""The pipeline's configuration: the config files in precedence order, loading and schema errors
as one line naming the file and key path, the checks beyond the schema (``semantic_errors``),
the datasets skipped because their files are missing and the checksums not yet verified, and the
tracking settings.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from . import registry
from .runs import missing_local_files, run_datasets, runs

DEFAULT_TRACKING = {"uri": "sqlite:///results/mlflow.db", "experiment": "kernelscale"}


class ConfigError(ValueError):
    """A one-line configuration error."""


_CONFIG_FILES: list[str] = []  # in increasing precedence (set_config_files)
_LOADED: dict[str, dict] = {}


def set_config_files(files, command_line=()) -> None:
    """Record the config files: the Snakefile's ``configfile:`` ones, then ``--configfile`` ones
    (which Snakemake lets win over the Snakefile's, the last one winning)."""
    cli = [str(f) for f in command_line or ()]
    _CONFIG_FILES[:] = [str(f) for f in files if str(f) not in cli] + cli
    _LOADED.clear()


def _load(path: str) -> dict:
    if path not in _LOADED:
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
    if best.context:  # oneOf/anyOf: the deepest sub-error says most
        best = max(best.context, key=lambda c: len(c.absolute_path))
    path = ".".join(str(p) for p in best.absolute_path) or "(top level)"
    msg = " ".join(best.message.split())
    msg = msg if len(msg) <= 300 else msg[:297] + "..."
    return f"{config_file_of(tuple(best.absolute_path))}: {path}: {msg}"


def load_config_checked(path) -> dict:
    """A config file's mapping; ``ValueError`` with one line naming the file when it is missing,
    not valid YAML (``FILE:LINE:COLUMN: ...``), empty or not a mapping."""
    from .cli_common import UserError, load_yaml

    try:
        content = load_yaml(path)
    except UserError as e:
        raise ValueError(str(e)) from None
    if content is None:
        raise ValueError(f"{path}: the file is empty; expected a mapping with datasets:, "
                         "algorithms: and experiments:")
    if not isinstance(content, dict):
        raise ValueError(f"{path}: expected a mapping (datasets:, algorithms:, experiments:, "
                         f"...) at the top level, got {type(content).__name__}")
    return content


def semantic_errors(config: dict) -> list[str]:
    """Problems a schema cannot see: names that do not resolve, tasks an algorithm cannot do."""
    from .checks import config_errors  # parameter values and sizes (n_iter: 0, block_size: 1e8)
    from .data.spec import validate_dataset_spec

    errors: list[str] = []

    def error(key_path: tuple, text: str) -> None:
        errors.append(f"{config_file_of(key_path)}: {text}")

    datasets = config.get("datasets") or {}
    algorithms = config.get("algorithms") or {}
    # a checksum still TODO-verify-on-first-download is no error (data.download pins the first copy)
    for name, spec in datasets.items():
        try:
            validate_dataset_spec(name, spec)
        except Exception as e:  # DataError: already one line naming the key
            error(("datasets", name), str(e).splitlines()[0])
    for name, spec in algorithms.items():
        est = spec.get("estimator", name)
        if est not in registry.ALGORITHMS:
            error(("algorithms", name, "estimator"), f"algorithms.{name}.estimator: unknown "
                  f"estimator {est!r} (registered: {', '.join(sorted(registry.ALGORITHMS))})")
    for i, exp in enumerate(config.get("experiments") or []):
        for d in exp.get("datasets", []):
            if d not in datasets:
                error(("experiments", i, "datasets"), f"experiments.{i}.datasets: unknown dataset "
                      f"{d!r} (known: {', '.join(sorted(datasets)) or 'none'})")
        for a in exp.get("algorithms", []):
            if a not in algorithms:
                error(("experiments", i, "algorithms"), f"experiments.{i}.algorithms: unknown "
                      f"algorithm {a!r} (known: {', '.join(sorted(algorithms)) or 'none'})")
                continue
            est = algorithms[a].get("estimator", a)
            for d in exp.get("datasets", []) if est in registry.ALGORITHMS else []:
                task = (datasets.get(d) or {}).get("task")
                kind = "regression" if task == "regression" else "classification"
                if task and kind not in registry.ALGORITHMS[est]:
                    error(("experiments", i), f"experiments.{i}: algorithm {a!r} does not do "
                          f"{task} (dataset {d!r})")
    errors += missing_file_errors(config) + tracking_errors(config)
    errors += config_errors(config)
    if not runs(config) and not errors:
        error(("experiments",), "experiments: no (dataset, algorithm, seed) to run")
    return errors


def missing_file_errors(config: dict, workdir=".") -> list[str]:
    """One line per local file (``path:``, ``labels_path:``, ...) of a dataset an experiment runs
    that is not there. Relative paths are relative to ``workdir``, as prepare reads them."""
    from .data.spec import FILE_ROLES

    datasets = config.get("datasets") or {}
    work = Path(workdir).resolve()
    errors = []
    for name in run_datasets(config):
        spec = datasets.get(name)
        # a malformed entry has its own check; an optional one is skipped (skip_missing_datasets)
        if not isinstance(spec, dict) or spec.get("optional"):
            continue
        for role in FILE_ROLES:
            given = spec.get(f"{role}path")
            if not isinstance(given, str):
                continue
            path = Path(given).expanduser()
            full = path if path.is_absolute() else work / path
            if full.is_file():
                continue
            what = "is a folder, expected a file" if full.is_dir() else "no such file"
            where = "" if path.is_absolute() else f" (relative to {work})"
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
    module is not installed here (``postgresql://`` needs psycopg2)."""
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
    """Take the datasets of ``missing_local_files`` out of the experiments (in place); returns one
    line per dataset; ConfigError when no run is left."""
    missing = missing_local_files(config)
    if not missing:
        return []
    lines = [f"kernelscale: {config_file_of(('datasets', name))}: datasets.{name}: "
             f"{', '.join(paths)} not found; its {sum(d == name for d, _, _ in runs(config))} "
             "run(s) are skipped (put the file there, or fix `path:`)"
             for name, paths in missing.items()]
    for exp in config.get("experiments") or []:
        exp["datasets"] = [d for d in exp.get("datasets", []) if d not in missing]
    if not runs(config):
        raise ConfigError("\n".join(lines + [f"{config_file_of(('experiments',))}: "
                                              "experiments: no run left to do"]))
    return lines


def unverified_checksum_lines(config: dict, cache=None) -> list[str]:
    """One line per downloaded file of the config's runs whose config sha256 is still
    ``TODO-verify-on-first-download``: the sha256 its first download had, to check and paste."""
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
