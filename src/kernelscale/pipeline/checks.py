"""Checks of an algorithm entry (``config.yaml`` ``algorithms.NAME`` / ``kernelscale train --spec``)
before anything runs: one line per problem, naming the key, the value and what is expected.
Parameter values by the estimators' own rules (``kernelscale.params``), parameters that the
algorithm's name fixes (``registry.PRESETS``), sizes against memory (:func:`size_errors`) and
the memory budget (:func:`budget_errors`).
"""

from __future__ import annotations

import math
import os

from . import registry
from .runs import entry_defaults

DEVICES = ("auto", "cpu", "gpu")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def physical_memory_bytes() -> int | None:
    """This machine's memory, or the cgroup (container / Slurm job) limit when smaller."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MB"


def size_errors(where: str, estimator: str, params: dict, n_train: int | None = None,
                d: int | None = None, limit_bytes: int | None = None,
                segments: int = 1) -> list[str]:
    """Problems when a lower bound of what ``estimator`` must hold exceeds ``limit_bytes``
    (default: this machine's memory). Each bound is one array the method cannot avoid:

    * DSG family: the batch's feature matrix (batch_size x block_size, 8 bytes) and the model's
      coefficients, one block_size vector per iteration (n_iter x segments iterations);
    * random features (RFF, EigenPro-RF, Nystrom): n_components x d frequencies and a
      batch_size x n_components feature matrix; Nystrom and EigenPro-RF an n_components^2 matrix;
    * Random Binning: n_train x n_components (grids) bin indices (8 bytes);
    * exact kernel methods: an n x n kernel matrix (n = min(n_train, max_n) for kernel ridge).
    ``n_train``/``d`` unknown: the terms that need them are skipped.
    """
    limit = limit_bytes if limit_bytes is not None else physical_memory_bytes()
    if not limit:
        return []
    p = {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    n = n_train if n_train else None
    width = d if d else 1
    terms: list[tuple[float, str]] = []  # (bytes: 8 per element, the array)

    def array(what: str, rows, cols) -> None:
        terms.append((8.0 * rows * cols, what))

    if estimator in ("dsg", "udsg", "cdsg"):
        b, f = p.get("batch_size", 256), p.get("block_size", 256)
        iters = p.get("n_iter", 300) * max(1, segments)
        array(f"batch_size x block_size = {b:g} x {f:g}", b, f)
        array(f"n_iter x segments x block_size = {iters:g} x {f:g} coefficients", iters, f)
    if estimator in ("rff_sgd", "rff_svrg", "eigenpro_rf", "nystrom"):  # numeric ones only
        m = p.get("n_components", 1000)
        array(f"n_components x d = {m:g} x {width:g}", m, width)
        if "batch_size" in p:
            b = p["batch_size"]
            array(f"batch_size x n_components = {b:g} x {m:g}", b, m)
        if estimator in ("nystrom", "eigenpro_rf"):
            array(f"n_components^2 = {m:g}^2", m, m)
    if estimator in ("rb_cg", "rb_cd"):
        r = p.get("n_components", 256)
        if n:
            array(f"n_train x n_components = {n:g} x {r:g} bin indices", n, r)
        if "n_components" in p:
            array(f"n_components x d = {r:g} x {width:g} grid parameters", r, width)
    if estimator == "exact_krr" and n:
        m = min(n, p.get("max_n", n))
        array(f"an n x n kernel matrix, n = {m:g}", m, m)
    if estimator in ("eigenpro", "kernel_sgd") and "subsample_size" in p:
        s = p["subsample_size"]
        array(f"subsample_size^2 = {s:g}^2", s, s)
    if estimator == "norma" and "max_terms" in p:
        array(f"max_terms x d = {p['max_terms']:g} x {width:g}", p["max_terms"], width)
    return [f"{where}: needs at least {_mb(need)} for {what}, more than the {_mb(limit)} of "
            "memory here; use smaller sizes" for need, what in terms if need > limit][:1]


# algorithms that read on-disk X in windows sized by ``engine.memory_budget``, and the parameter
# that is the width of their batch's feature matrix (``budget.plan_window``'s block_size)
WINDOWED = {"dsg": "block_size", "udsg": "block_size", "cdsg": "block_size",
            "rff_sgd": "n_components", "rff_svrg": "n_components", "eigenpro_rf": "n_components"}


def budget_errors(where: str, estimator: str, params: dict, d: int | None = None) -> list[str]:
    """The problem when ``engine.memory_budget`` cannot hold one batch: ``budget.plan_window``,
    the check ``fit`` makes on the prepared (float32, on-disk) X, here before any job. Sizes
    not known before prepare (``d`` when the config does not state it, an "auto" batch or block
    size) count as 1, so the need is a lower bound and the check refuses only a sure failure."""
    from ..budget import plan_window

    engine = params.get("engine")
    budget = engine.get("memory_budget") if isinstance(engine, dict) else None
    if estimator not in WINDOWED or budget is None:
        return []
    cls = registry.estimator_class(estimator, next(iter(registry.ALGORITHMS[estimator])))
    p = {**cls().get_params(), **params}
    if estimator in ("rff_sgd", "rff_svrg") and p["batch_size"] == "auto":
        from ..solvers.rff_sgd import HOST_BATCH  # "auto"'s smallest value (a GPU's is larger)

        p["batch_size"] = HOST_BATCH
    batch, width = (p[k] if _is_int(p[k]) else 1 for k in ("batch_size", WINDOWED[estimator]))
    dtype = engine.get("dtype") if engine.get("dtype") not in (None, "auto") else cls._auto_dtype
    try:
        plan_window(budget, d or 1, "float32", batch, width, model_dtype=dtype)
    except ValueError as e:
        return [f"{where}.params.engine.memory_budget: {e}"
                + ("" if d else " (d counted as 1: the data's width is known only after prepare)")]
    return []


def spec_errors(where: str, spec, n_train: int | None = None, d: int | None = None,
                limit_bytes: int | None = None, kinds=None) -> list[str]:
    """Problems of one algorithm entry (``where`` is its key path, e.g. ``algorithms.dsg`` or
    ``--spec``): mapping shapes, a registered estimator, known parameter names, numbers in range,
    sizes that fit in memory. Task compatibility is checked where the task is known; ``kinds``
    ("classification" / "regression"), when known, are the tasks the entry runs on: a parameter
    is then refused if any of their estimators refuses it, not only if all do."""
    if not isinstance(spec, dict):
        return [f"{where}: expected a mapping such as {{estimator: dsg, params: {{n_iter: 30}}}}, "
                f"got {type(spec).__name__} {spec!r:.60}"]
    est, registered = spec.get("estimator"), ", ".join(sorted(registry.ALGORITHMS))
    if est is None:
        return [f"{where}: missing key 'estimator' (a registered name: {registered})"]
    if not isinstance(est, str) or est not in registry.ALGORITHMS:
        return [f"{where}.estimator: unknown estimator {est!r} (registered: {registered})"]
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        return [f"{where}.params: expected a mapping of estimator parameters (name: value), got "
                f"{type(params).__name__} {params!r:.60}"]
    errors, defaults = [], entry_defaults()
    device = spec.get("device", defaults["device"])
    if device not in DEVICES:
        errors.append(f"{where}.device: {device!r} is not one of {', '.join(DEVICES)}")
    elif device == "gpu" and est in registry.CPU_ONLY:
        errors.append(f"{where}.device: 'gpu' but {est} runs on the CPU only "
                      f"({registry.CPU_ONLY[est]}); use device: cpu")
    segments = spec.get("segments", defaults["segments"])
    if not _is_int(segments) or segments < 1:
        errors.append(f"{where}.segments: {segments!r} must be an integer >= 1")
        segments = 1
    step_rows = spec.get("step_test_rows", defaults["step_test_rows"])
    if not _is_int(step_rows) or step_rows < 0:
        errors.append(f"{where}.step_test_rows: {step_rows!r} must be an integer >= 0 "
                      "(0: the whole test set)")
    errors += param_errors_of(where, est, params, kinds)
    params = {k: _as_int(v) for k, v in params.items()}
    if not errors:
        errors += size_errors(where, est, params, n_train, d, limit_bytes, segments)
        errors += budget_errors(where, est, params, d)
    return errors


def _as_int(value):
    """YAML reads 1e8 as a float: a whole float counts as the integer it names."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _fixed_by_name(est: str, name: str, value):
    """The problem when ``value`` contradicts the value of ``name`` that algorithm ``est``'s
    name fixes (``registry.PRESETS``, save ``registry.ADJUSTABLE``), else None."""
    from ..params import same_value

    preset = registry.PRESETS.get(est, {})
    if (name not in preset or name in registry.ADJUSTABLE.get(est, ())
            or same_value(value, preset[name])):
        return None
    others = [a for a in sorted(registry.ALGORITHMS) if a != est
              and registry.ALGORITHMS[a] == registry.ALGORITHMS[est]
              and same_value(registry.PRESETS.get(a, {}).get(name, value), value)
              and all(same_value(registry.PRESETS.get(a, {}).get(k), v)
                      for k, v in preset.items() if k != name)]
    use = f"; use estimator: {others[0]}" if others else ""
    return (f"{value!r} contradicts the algorithm {est} ({name}={preset[name]!r} is what its "
            f"name means){use}")


def param_errors_of(where: str, est: str, params: dict, kinds=None) -> list[str]:
    """One line per parameter of algorithm ``est`` outside its estimator's rules (the rules
    ``fit`` applies; ``kernelscale.params``), set although the other settings (the algorithm's
    preset included) leave it unused, or contradicting what the algorithm's name fixes.
    ``kinds``: the tasks the entry runs on, when known (see ``spec_errors``)."""
    from ..engine import as_options
    from ..params import param_errors, unused_errors

    run = [k for k in registry.ALGORITHMS[est] if kinds is None or k in kinds]
    try:
        classes = [registry.estimator_class(est, kind) for kind in run or registry.ALGORITHMS[est]]
    except ImportError:  # optional dependency missing: the estimator reports it at fit
        return []
    # with the tasks known, every class listed runs: one refusing is enough
    enough = 1 if kinds is not None and run else len(classes)
    errors = []
    preset = registry.PRESETS.get(est, {})
    with_preset = {**preset, **{k: _as_int(v) for k, v in params.items()}}
    for name, value in params.items():
        key = f"{where}.params.{name}"
        if name == "engine":
            try:
                opts = as_options(value, key)
            except ValueError as e:
                errors.append(str(e))
                continue
            if "device" in opts:
                errors.append(f"{key}.device: set the entry's own key instead ({where}.device: "
                              f"{opts['device']}), which also asks the scheduler for a GPU")
            continue
        value = _as_int(value)
        fixed = _fixed_by_name(est, name, value)
        if fixed:
            errors.append(f"{key}: {fixed}")
            continue
        problems = [p for cls in classes for p in param_errors(cls, {name: value})]
        if not problems:  # valid alone: is it used with the others (and the preset)?
            problems = [p for cls in classes
                        for p in unused_errors(cls, with_preset, given=(name,))]
        if problems and len(problems) >= enough:  # wrong for every task (or one that runs)
            problem = problems[0][1]
            if problem.startswith("unknown parameter"):
                problem = problem.replace("unknown parameter", f"unknown parameter for {est}", 1)
            errors.append(f"{key}: {problem}")
    return errors


def config_errors(config: dict) -> list[str]:
    """``spec_errors`` of every algorithm entry of a config (``config.yaml: `` prefixed), with the
    training set's size when a generated dataset it runs on states it."""
    datasets = config.get("datasets") or {}
    largest: dict[str, tuple[int | None, int | None]] = {}
    kinds: dict[str, set] = {}  # the tasks each algorithm runs on
    run = set()
    for exp in config.get("experiments") or []:
        for a in exp.get("algorithms", []) if isinstance(exp, dict) else []:
            run.add(a)
            for name in exp.get("datasets", []):
                ds = datasets.get(name) if isinstance(datasets.get(name), dict) else {}
                gen = ds.get("generator")
                if isinstance(gen, dict):  # d: the columns left after a PCA in prepare
                    pca = (ds.get("preprocess") or {}).get("pca") or {}
                    n, dd = gen.get("n_samples"), pca.get("n_components", gen.get("n_features"))
                    old = largest.get(a, (None, None))
                    largest[a] = (max(n or 0, old[0] or 0) or None, max(dd or 0, old[1] or 0) or None)
                if ds.get("task"):
                    kinds.setdefault(a, set()).add(
                        "regression" if ds["task"] == "regression" else "classification")
    shared = config.get("params") or {}
    errors = []
    for name, spec in (config.get("algorithms") or {}).items():
        inherited = []
        if isinstance(spec, dict):
            if "estimator" not in spec:
                spec = {**spec, "estimator": name}  # the config's default: the entry's name
            if spec["estimator"] not in registry.ALGORITHMS:
                continue  # configuration.semantic_errors names it
            own = spec.get("params") or {}
            if name in run and isinstance(own, dict):
                inherited = [k for k in shared if k not in own]
                spec = {**spec, "params": {**shared, **own}}
        n, dd = largest.get(name, (None, None))
        for e in spec_errors(f"algorithms.{name}", spec, n, dd, kinds=kinds.get(name)):
            for k in inherited:  # a shared parameter: name the key the user wrote
                e = e.replace(f"algorithms.{name}.params.{k}:",
                              f"params.{k} (shared, given to algorithms.{name}):")
            errors.append(f"config.yaml: {e}")
    return errors
