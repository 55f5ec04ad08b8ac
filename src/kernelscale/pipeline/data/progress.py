"""Progress reporting: a tqdm bar on a terminal, otherwise a log line every ~10 % and at the
end."""

from __future__ import annotations

import contextlib
import logging
import sys
import time

log = logging.getLogger("kernelscale.pipeline.data")


def on_terminal() -> bool:
    """True when stderr is an interactive terminal (where a bar can redraw itself)."""
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


class _LogLines(contextlib.AbstractContextManager):
    """Minimal tqdm stand-in that logs ``desc: done/total unit (pct, rate)`` at 10 % steps."""

    def __init__(self, total: int | None, desc: str, unit: str):
        self.total, self.desc, self.unit = total, desc, unit
        self.n = 0
        self._start = time.monotonic()
        self._next_report = 0.1
        self._last_log = self._start

    def update(self, k: int) -> None:
        self.n += k
        now = time.monotonic()
        if self.total:
            fraction = self.n / self.total
            if fraction >= self._next_report:
                self._report(now)
                while self._next_report <= fraction:
                    self._next_report += 0.1
        elif now - self._last_log >= 10.0:  # unknown total: at most one line per 10 s
            self._report(now)

    def _report(self, now: float) -> None:
        self._last_log = now
        rate = self.n / max(now - self._start, 1e-9)
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        total = f"/{self.total}" if self.total else ""
        log.info("%s: %d%s %s%s, %.0f %s/s", self.desc, self.n, total, self.unit, pct, rate,
                 self.unit)

    def close(self) -> None:
        if not self.total or self.n < self.total:
            self._report(time.monotonic())

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()


def progress(total: int | None, desc: str, unit: str = "rows"):
    """A context manager with ``update(k)``: tqdm on a terminal, log lines otherwise."""
    if on_terminal():
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)
    return _LogLines(total, desc, unit)
