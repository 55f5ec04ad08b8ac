"""Engine options: *where and how* an estimator computes, kept apart from *what* it computes.

The maths of an estimator (kernel, bandwidth, ``reg``, loss, sizes, steps, seed) are its own
parameters; the engine options below are not, and none of them changes the problem solved.
They come from three places, the first that sets an option winning:

1. the estimator's ``engine`` parameter (a dict or an :class:`Engine`),
2. the innermost ``with engine_context(...)`` block,
3. :func:`set_engine` (process-wide), then the defaults below.

An estimator resolves its engine once, in ``fit``, into the fitted attribute ``engine_`` (every
option filled in; ``device`` as asked, the device used is ``device_``).

Options (each estimator uses the ones that concern it and ignores the rest):

device : {"auto", "cpu", "gpu"}, default "auto"
    "auto": the GPU when cupy finds one, else the CPU. "gpu" without one is a one-line
    ``backend.DeviceError``. A model fitted on the GPU predicts on a CPU-only host. Sparse X is
    computed on the CPU (``kernelscale.validation``).
dtype : {"auto", "float64", "float32"}, default "auto"
    Precision of features, kernel blocks and coefficients. "auto": float32 for the DSG family
    and kernel EigenPro, float64 for every other estimator.
memory_budget : float (MB) or None, default None
    Bound on what reading on-disk X may hold (``kernelscale.budget``); picks ``window_rows``.
window_rows : int or None, default None
    Rows a streaming estimator holds per shuffle window (``stream.BatchStream``); None: all rows
    of in-memory X, ``max(batch_size, chunk rows)`` of on-disk X (or the budget's choice).
pass_rows : int or None, default None
    Rows per step of a sequential pass over X (Nyström's normal equations, RB's binning); None:
    the estimator's own default (8192 / 65536). Not X's on-disk chunking.
n_jobs : int >= 1 or -1, default 1
    Threads of RB-CD's asynchronous coordinate descent (-1: all cores); 1 is bit-reproducible.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import numbers


@dataclasses.dataclass(frozen=True)
class Engine:
    """Engine options; a field left None is inherited (context, then global, then default)."""

    device: str | None = None
    dtype: str | None = None
    memory_budget: float | None = None
    window_rows: int | None = None
    pass_rows: int | None = None
    n_jobs: int | None = None

    def set_fields(self) -> dict:
        """The fields set (not None) as a dict: the options this Engine overrides."""
        return {k: v for k, v in vars(self).items() if v is not None}


NAMES = tuple(f.name for f in dataclasses.fields(Engine))
DEFAULTS = {"device": "auto", "dtype": "auto", "memory_budget": None, "window_rows": None,
            "pass_rows": None, "n_jobs": 1}

_GLOBAL: dict = {}
# options of the enclosing engine_context blocks, as an immutable tuple of (name, value) pairs
_CONTEXT: contextvars.ContextVar[tuple] = contextvars.ContextVar("kernelscale_engine", default=())


def _integer(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


# option -> (test of a value that is not None, the allowed values in words)
_RULES = {
    "device": (lambda v: v in ("auto", "cpu", "gpu"), "'auto', 'cpu' or 'gpu'"),
    "dtype": (lambda v: str(v) in ("auto", "float64", "float32"), "'auto', 'float64' or 'float32'"),
    "memory_budget": (lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and v > 0
                      and v != float("inf"), "a positive number of MB or None"),
    "window_rows": (lambda v: _integer(v) and v >= 1, "an integer >= 1 or None"),
    "pass_rows": (lambda v: _integer(v) and v >= 1, "an integer >= 1 or None"),
    "n_jobs": (lambda v: _integer(v) and (v >= 1 or v == -1),
               "an integer >= 1, or -1 for all cores"),
}


def as_options(value, where: str = "engine") -> dict:
    """The options set by ``value`` (None, a dict or an Engine) as a dict; one-line errors."""
    if value is None:
        return {}
    if isinstance(value, Engine):
        opts = value.set_fields()
    elif isinstance(value, dict):
        unknown = sorted(set(value) - set(NAMES))
        if unknown:
            raise ValueError(f"{where}: unknown option {unknown[0]!r} (engine options: "
                             f"{', '.join(NAMES)})")
        opts = {k: v for k, v in value.items() if v is not None}
    else:
        raise ValueError(f"{where}={value!r} must be None, a dict or kernelscale.engine.Engine")
    for k, v in opts.items():
        ok, want = _RULES[k]
        if not ok(v):
            raise ValueError(f"{where}.{k}={v!r} must be {want}")
    if "dtype" in opts:
        opts["dtype"] = str(opts["dtype"])
    return opts


def set_engine(**options) -> None:
    """Set engine options process-wide (``set_engine(device="gpu")``); None resets one."""
    _GLOBAL.update(as_options({k: v for k, v in options.items() if v is not None}, "set_engine"))
    for k in [k for k, v in options.items() if v is None]:
        _GLOBAL.pop(k, None)


def get_engine() -> Engine:
    """The options in effect here: defaults < ``set_engine`` < ``engine_context`` blocks."""
    return Engine(**{**DEFAULTS, **_GLOBAL, **dict(_CONTEXT.get())})


@contextlib.contextmanager
def engine_context(**options):
    """Engine options for the estimators fitted inside the block (nested blocks override)."""
    opts = {**dict(_CONTEXT.get()), **as_options(options, "engine_context")}
    token = _CONTEXT.set(tuple(opts.items()))
    try:
        yield get_engine()
    finally:
        _CONTEXT.reset(token)


def resolve(engine) -> Engine:
    """The engine an estimator fits with: its ``engine`` parameter over :func:`get_engine`.
    ``device`` stays as asked ("auto" included); the estimator resolves it against the host."""
    return Engine(**{**DEFAULTS, **_GLOBAL, **dict(_CONTEXT.get()), **as_options(engine)})

