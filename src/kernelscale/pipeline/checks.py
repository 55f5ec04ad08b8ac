"""Checks of an algorithm entry (``config.yaml`` ``algorithms.NAME`` / ``kernelscale train --spec``)
before anything runs: one line per problem, naming the key, the value and what is expected.

The estimators validate their own parameters in ``fit``, but in a pipeline that is after the data
are opened, and some nonsense is legal there (``n_iter=0`` fits nothing and still reports a
metric). Sizes are checked here too: ``block_size: 1e8`` or ``n_grids: 1e8`` would only run out of
memory a minute into the job; :func:`size_errors` compares a lower bound of the largest arrays the
method must hold with this machine's memory (or the job's limit) up front.
"""

from __future__ import annotations

import math
import os

# integer parameters that count things: must be >= 1 (None: the estimator's own default)
POSITIVE_INTS = ("n_iter", "batch_size", "block_size", "n_components", "n_grids", "subsample_size",
                 "n_epochs", "max_iter", "budget", "chunk_rows", "window_rows", "max_n", "n_new")
NON_NEGATIVE_INTS = ("n_eigenvectors", "n_reuse")
# numbers that must be > 0 / >= 0 when numbers (strings such as "median" or "auto" are the
# estimators' business)
POSITIVE_NUMBERS = ("bandwidth", "memory_budget", "C", "lam", "tol", "t0", "cache_size")
NON_NEGATIVE_NUMBERS = ("reg", "alpha", "epsilon")
SPEC_KEYS = ("estimator", "params", "device", "segments", "step_test_rows", "resources")
DEVICES = ("auto", "cpu", "gpu")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
    * Random Binning: n_train x n_grids bin indices (8 bytes);
    * exact kernel methods: an n x n kernel matrix (n = min(n_train, max_n) for kernel ridge).
    ``n_train``/``d`` unknown: the terms that need them are skipped.
    """
    limit = limit_bytes if limit_bytes is not None else physical_memory_bytes()
    if not limit:
        return []
    p = {k: v for k, v in params.items() if _is_number(v)}
    n = n_train if n_train else None
    width = d if d else 1
    terms: list[tuple[float, str]] = []
    if estimator in ("dsg", "udsg", "cdsg"):
        b, f = p.get("batch_size", 256), p.get("block_size", 256)
        terms.append((8.0 * b * f, f"batch_size x block_size = {b:g} x {f:g}"))
        iters = p.get("n_iter", 300) * max(1, segments)
        terms.append((8.0 * iters * f, f"n_iter x segments x block_size = {iters:g} x {f:g} "
                      "coefficients"))
    if estimator in ("rff_sgd", "rff_svrg", "eigenpro_rf", "nystrom"):
        m = p.get("n_components", 1000)
        terms.append((8.0 * m * width, f"n_components x d = {m:g} x {width:g}"))
        if "batch_size" in p:
            terms.append((8.0 * p["batch_size"] * m,
                          f"batch_size x n_components = {p['batch_size']:g} x {m:g}"))
        if estimator in ("nystrom", "eigenpro_rf"):
            terms.append((8.0 * m * m, f"n_components^2 = {m:g}^2"))
    if estimator in ("rb_cg", "rb_cd") and n:
        r = p.get("n_grids", 256)
        terms.append((8.0 * n * r, f"n_train x n_grids = {n:g} x {r:g} bin indices"))
    if estimator in ("rb_cg", "rb_cd") and "n_grids" in p:
        r = p["n_grids"]
        terms.append((8.0 * r * width, f"n_grids x d = {r:g} x {width:g} grid parameters"))
    if estimator in ("exact_krr", "libsvm", "eigenpro", "kernel_sgd") and n:
        m = min(n, p.get("max_n", n)) if estimator == "exact_krr" else n
        if estimator in ("exact_krr",):
            terms.append((8.0 * m * m, f"an n x n kernel matrix, n = {m:g}"))
    if estimator in ("eigenpro", "kernel_sgd") and "subsample_size" in p:
        s = p["subsample_size"]
        terms.append((8.0 * s * s, f"subsample_size^2 = {s:g}^2"))
    if estimator == "norma" and "budget" in p:
        terms.append((8.0 * p["budget"] * width, f"budget x d = {p['budget']:g} x {width:g}"))
    out = []
    for need, what in terms:
        if need > limit:
            out.append(f"{where}: needs at least {_mb(need)} for {what}, more than the "
                       f"{_mb(limit)} of memory here; use smaller sizes")
            break
    return out


def spec_errors(where: str, spec, n_train: int | None = None, d: int | None = None,
                limit_bytes: int | None = None) -> list[str]:
    """Problems of one algorithm entry (``where`` is its key path, e.g. ``algorithms.dsg`` or
    ``--spec``): mapping shapes, a registered estimator, known parameter names, numbers in range,
    sizes that fit in memory. Task compatibility is checked where the task is known."""
    from . import registry

    if not isinstance(spec, dict):
        return [f"{where}: expected a mapping such as {{estimator: dsg, params: {{n_iter: 30}}}}, "
                f"got {type(spec).__name__} {spec!r:.60}"]
    errors = []
    est = spec.get("estimator")
    if est is None:
        return [f"{where}: missing key 'estimator' (a registered name: "
                f"{', '.join(sorted(registry.ALGORITHMS))})"]
    if not isinstance(est, str) or est not in registry.ALGORITHMS:
        return [f"{where}.estimator: unknown estimator {est!r} (registered: "
                f"{', '.join(sorted(registry.ALGORITHMS))})"]
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        return [f"{where}.params: expected a mapping of estimator parameters (name: value), got "
                f"{type(params).__name__} {params!r:.60}"]
    device = spec.get("device", "auto")
    if device not in DEVICES:
        errors.append(f"{where}.device: {device!r} is not one of {', '.join(DEVICES)}")
    elif device == "gpu" and est in registry.CPU_ONLY:
        errors.append(f"{where}.device: 'gpu' but {est} runs on the CPU only "
                      f"({registry.CPU_ONLY[est]}); use device: cpu")
    segments = spec.get("segments", 10)
    if not _is_int(segments) or segments < 1:
        errors.append(f"{where}.segments: {segments!r} must be an integer >= 1")
        segments = 1
    step_rows = spec.get("step_test_rows", 10000)
    if not _is_int(step_rows) or step_rows < 0:
        errors.append(f"{where}.step_test_rows: {step_rows!r} must be an integer >= 0 "
                      "(0: the whole test set)")
    known = set()
    for kind in registry.ALGORITHMS[est]:
        try:
            known |= set(registry.estimator_class(est, kind)._get_param_names())
        except ImportError:  # optional dependency missing: the estimator reports it at fit
            known = set()
            break
    for name, value in params.items():
        key = f"{where}.params.{name}"
        if known and name not in known:
            errors.append(f"{key}: unknown parameter for {est} (known: {', '.join(sorted(known))})")
            continue
        if value is None:
            continue
        if name in POSITIVE_INTS or name in NON_NEGATIVE_INTS:
            low = 1 if name in POSITIVE_INTS else 0
            if isinstance(value, float) and value.is_integer() and math.isfinite(value):
                value = int(value)  # YAML reads 1e8 as a float
                params = {**params, name: value}
            if isinstance(value, str) and name == "batch_size" and value == "auto":
                continue
            if not _is_int(value) or value < low:
                errors.append(f"{key}: {value!r} must be an integer >= {low}")
        elif name in POSITIVE_NUMBERS or name in NON_NEGATIVE_NUMBERS:
            if isinstance(value, str) or not _is_number(value):
                if not isinstance(value, str):
                    errors.append(f"{key}: {value!r} must be a number")
                continue
            bad = not math.isfinite(value) or (value <= 0 if name in POSITIVE_NUMBERS else value < 0)
            if bad:
                errors.append(f"{key}: {value!r} must be a finite number "
                              f"{'> 0' if name in POSITIVE_NUMBERS else '>= 0'}")
    if not errors:
        errors += size_errors(where, est, params, n_train, d, limit_bytes, segments)
    return errors


def config_errors(config: dict) -> list[str]:
    """``spec_errors`` of every algorithm entry of a config (``config.yaml: `` prefixed), with the
    training set's size when a generated dataset it runs on states it."""
    algorithms = config.get("algorithms") or {}
    datasets = config.get("datasets") or {}
    largest: dict[str, tuple[int | None, int | None]] = {}
    for exp in config.get("experiments") or []:
        for a in exp.get("algorithms", []) if isinstance(exp, dict) else []:
            for name in exp.get("datasets", []):
                gen = (datasets.get(name) or {}).get("generator") if isinstance(
                    datasets.get(name), dict) else None
                if isinstance(gen, dict):
                    n, dd = gen.get("n_samples"), gen.get("n_features")
                    old = largest.get(a, (None, None))
                    largest[a] = (max(n or 0, old[0] or 0) or None, max(dd or 0, old[1] or 0) or None)
    errors = []
    from . import registry

    for name, spec in algorithms.items():
        if isinstance(spec, dict) and "estimator" not in spec:
            spec = {**spec, "estimator": name}  # the config's default: the entry's name
        if isinstance(spec, dict) and spec.get("estimator") not in registry.ALGORITHMS:
            continue  # pipeline.semantic_errors names it
        n, dd = largest.get(name, (None, None))
        errors += [f"config.yaml: {e}" for e in spec_errors(f"algorithms.{name}", spec, n, dd)]
    return errors
