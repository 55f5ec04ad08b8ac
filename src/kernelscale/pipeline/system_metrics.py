"""System metrics of a training job, sampled into its run folder for MLflow.

``SystemSampler`` samples CPU and memory (psutil) from a background thread every ``interval``
seconds and once more when its ``with`` block ends, appending rows to ``system_metrics.csv``
(step, timestamp_ms, then one column per metric, named as MLflow's system metrics without the
``system/`` prefix); ``tracking`` logs them as ``system/<name>``. A resumed run appends, its steps
continuing. GPU columns appear only where ``pynvml`` (``nvidia-ml-py``) imports and sees a device.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

FILE = "system_metrics.csv"


def _gpu_handles() -> list:
    try:
        import pynvml

        pynvml.nvmlInit()
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:  # no pynvml, no driver, no device
        return []


class SystemSampler:
    """Samples CPU utilisation and memory (system-wide and this process) and, where present, GPU
    utilisation and memory into ``run_dir/system_metrics.csv``; use as a context manager."""

    def __init__(self, run_dir, interval: float = 5.0):
        import psutil

        self.path, self.interval = Path(run_dir) / FILE, float(interval)
        self.proc, self.psutil = psutil.Process(), psutil
        self.fields, self.step = None, 0
        if self.path.is_file():  # a resumed run: its columns, its steps go on
            with open(self.path, newline="") as f:
                text = f.read()
            rows = list(csv.reader(text.splitlines()))
            if text and not text.endswith("\n"):  # a row torn by a kill: the next one on its own
                with open(self.path, "a") as f:
                    f.write("\n")
            self.fields, self.step = (rows[0], len(rows) - 1) if rows else (None, 0)
        self.gpus = _gpu_handles()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="system-metrics")

    def sample(self) -> dict:
        """One row: ``step``, ``timestamp_ms`` and the metrics (CPU % since the last sample)."""
        vm = self.psutil.virtual_memory()
        row = {"step": self.step, "timestamp_ms": int(time.time() * 1000),
               "cpu_utilization_percentage": self.psutil.cpu_percent(),
               "system_memory_usage_megabytes": vm.used / 1e6,
               "system_memory_usage_percentage": vm.used / vm.total * 100,
               "process_cpu_utilization_percentage": self.proc.cpu_percent(),
               "process_memory_rss_megabytes": self.proc.memory_info().rss / 1e6}
        if self.gpus:
            import pynvml

            for i, h in enumerate(self.gpus):
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                row[f"gpu_{i}_utilization_percentage"] = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
                row[f"gpu_{i}_memory_usage_megabytes"] = mem.used / 1e6
                row[f"gpu_{i}_memory_usage_percentage"] = mem.used / mem.total * 100
        return row

    def _write(self) -> None:
        row = self.sample()
        with open(self.path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.fields or list(row), extrasaction="ignore")
            if self.fields is None:
                w.writeheader()
                self.fields = list(row)
            w.writerow(row)
        self.step += 1

    def _loop(self) -> None:
        # a first call only starts the clocks (psutil keeps the system's per calling thread)
        self.psutil.cpu_percent(), self.proc.cpu_percent()
        last = None
        while not self._stop.wait(self.interval):
            self._write()
            last = time.monotonic()
        # at the block's end, unless a sample was just taken: CPU % over milliseconds reads 0
        if last is None or time.monotonic() - last > 0.5:
            self._write()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def read_rows(run_dir) -> list[tuple[str, float, int, int]]:
    """``(name, value, timestamp_ms, step)`` of a run folder's ``system_metrics.csv`` (none when
    it is absent; a row torn by a kill is skipped)."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return []
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                step, ts = int(row.pop("step")), int(row.pop("timestamp_ms"))
                out += [(k, float(v), ts, step) for k, v in row.items() if k and v]
            except (TypeError, ValueError, KeyError):
                continue
    return out
