"""Where DSG's GPU memory pool grows: device acquisitions by call site during one later pass.

On 10^6 deformed Fashion-MNIST rows (d = 784, 10 classes) the cupy pool held 2.2 GB after
pass 1, then ~70 GB more per pass while ~2-3 GB stayed in use (``gpu-2026-11-26-h200*.md``).
This fits pass 1 plainly, then pass 2 under a cupy memory hook that records, for every block
the pool takes from the device (``alloc``), its size and the library frames that asked, and the
most bytes in use at once (``malloc``/``free``): growth with a small in-use peak is the pool's
fragmentation; a large in-use peak is a real temporary.

    python benchmarks/gpu_pool_trace.py --fashion .devdata/fashion-mnist --n 1000000 --out DIR
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _site(depth: int = 4) -> str:
    frames = [f for f in traceback.extract_stack()[:-2] if "kernelscale" in f.filename]
    return " <- ".join(f"{f.filename.rsplit('kernelscale/', 1)[-1]}:{f.lineno}:{f.name}"
                       for f in reversed(frames[-depth:]))


def make_hook():
    from cupy.cuda import memory_hook

    class Acquisitions(memory_hook.MemoryHook):
        name = "acquisitions"

        def __init__(self):
            self.bytes_by_site = collections.Counter()
            self.count_by_site = collections.Counter()
            self.largest: list[tuple[int, str]] = []
            self.in_use = self.peak_in_use = 0
            self.sizes = {}

        def alloc_postprocess(self, **kw):
            site = _site()
            self.bytes_by_site[site] += kw["mem_size"]
            self.count_by_site[site] += 1
            self.largest = sorted(self.largest + [(kw["mem_size"], site)], reverse=True)[:25]

        def malloc_postprocess(self, **kw):
            self.sizes[kw["mem_ptr"]] = kw["mem_size"]
            self.in_use += kw["mem_size"]
            self.peak_in_use = max(self.peak_in_use, self.in_use)

        def free_postprocess(self, **kw):
            self.in_use -= self.sizes.pop(kw["mem_ptr"], 0)

    return Acquisitions()


def main(argv=None) -> int:
    import cupy

    from gpu import write_deformed
    from kernelscale.estimators.dsg import auto_sizes
    from kernelscale.io import open_zarr
    from kernelscale.pipeline import registry

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fashion", type=Path, default=Path(".devdata/fashion-mnist"))
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--budget-mb", type=float, default=4096)
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--workdir", default=None)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pool = cupy.get_default_memory_pool()
    report = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        path = Path(tmp) / "deformed.zarr"
        write_deformed(path, args.n, args.fashion, 15)
        X, y = open_zarr(path, "X"), open_zarr(path, "y")[:]
        n, d = X.shape
        est = registry.make_estimator(
            "dsg", "classification", random_state=0, warm_start=True,
            engine={"device": "gpu", "memory_budget": args.budget_mb, "dtype": "float32"})
        B = min(n, auto_sizes(n, d)[1])
        est.set_params(n_iter=int(np.ceil(n / B)))
        def timed_pass(name, hook=None):
            """One more pass (under ``hook`` if given): its time and the pool after it."""
            t = time.perf_counter()
            if hook is None:
                est.fit(X, y)
            else:
                with hook:
                    est.fit(X, y)
            report[name] = dict(fit_s=round(time.perf_counter() - t, 1),
                                pool_total_mib=pool.total_bytes() >> 20,
                                pool_used_mib=pool.used_bytes() >> 20)
            if hook is not None:
                report[name].update(peak_in_use_mib=hook.peak_in_use >> 20,
                                    acquired_mib=sum(hook.bytes_by_site.values()) >> 20,
                                    acquisitions=sum(hook.count_by_site.values()))
            print(f"[trace] {name}", report[name], flush=True)

        timed_pass("pass1")
        hook = make_hook()
        timed_pass("pass2", hook)
        timed_pass("pass3")
        report["sites"] = [dict(site=s, mib=b >> 20, count=hook.count_by_site[s])
                           for s, b in hook.bytes_by_site.most_common(15)]
        report["largest"] = [dict(mib=round(b / 2**20, 1), site=s) for b, s in hook.largest]
        for r in report["sites"]:
            print(f"[site] {r['mib']:>8} MiB in {r['count']:>6} acquisitions: {r['site']}")
        for r in report["largest"][:10]:
            print(f"[largest] {r['mib']:>8} MiB: {r['site']}")
    (args.out / "gpu-pool-trace.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
