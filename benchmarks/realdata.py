"""Real-data race (issue 10): every registered estimator at its defaults on every real dataset of
``../shared/devdata/``, next to the references a researcher would compare with.

For each dataset (prepared exactly as the pipeline prepares it: ``devdata.yaml``'s spec through
``kernelscale.pipeline.data.prepare``, i.e. the seeded hash split and training-set standardization):

* trivial predictor: majority class (classification) / training mean (regression);
* references: LIBSVM ``SVC(C=10)`` at the median-heuristic gamma and scikit-learn's ``SVC()`` at its
  own defaults (classification); exact kernel ridge, ``alpha=1`` at the median bandwidth, by a
  direct solve (regression) — fixed settings, so that the yardstick does not move with our
  defaults;
* every algorithm of ``kernelscale.pipeline.registry.ALGORITHMS`` that does the task, built by
  ``make_estimator(name, task, random_state=0)``: nothing but the registry preset.

Each fit runs in a forked child (a hung or exploding fit is killed at ``--time-cap`` seconds and
reported, the race goes on); its peak memory is the child's resident-set peak over its RSS at the
start of the fit (sampled every 5 ms), i.e. the method's own memory, not the interpreter's.

Output: ``<out>/realdata-<tag>.csv`` and ``.md`` (one table per run: test error or RMSE, fit and
predict time, fit-time ratio to SVC(C=10) / exact KRR, peak memory, and a flag for a model at the
trivial level or outside the accuracy bounds of issue 10) and one MLflow run (experiment
``kernelscale-realdata``) with the tables as artifacts.

Usage::

    python benchmarks/realdata.py                          # everything, all 12 sets
    python benchmarks/realdata.py --datasets dev_phoneme dev_pol --algorithms dsg cdsg
    python benchmarks/realdata.py --max-train 4000 --tag quick   # subsampled training sets
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

# the development sets, prepared as the pipeline prepares them (peers.py uses them through here)
from kernelscale.pipeline.devdata import load_devdata_specs, prepared, subsample  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DEVDATA = REPO.parent / "shared" / "devdata"
EXPERIMENT = "kernelscale-realdata"
REFERENCES = ("trivial", "svc_c10_median", "svc_default", "krr_ref")
# issue 10's bounds: classification error <= SVC(C=10, median gamma) + 1 point; RMSE <= 1.05 x
# exact KRR; the DSG family within +0.5 point / 1.02 x.
CLF_SLACK, REG_RATIO = 0.01, 1.05
DSG_SLACK, DSG_RATIO = 0.005, 1.02


# ---------------------------------------------------------------------------------------------
# one fit, in a forked child
# ---------------------------------------------------------------------------------------------
def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Peak resident set size over the value at start, sampled by a thread every 5 ms."""

    def __init__(self):
        self.base = _rss_bytes()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_bytes())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())
        return (self.peak - self.base) / 2**20


def reference_dtype(n: int) -> str:
    """float64 while the n x n kernel matrix takes at most 40 % of the memory available, else
    float32: with alpha = 1 the system K + I has condition number <= n + 1, so float32's
    Cholesky keeps ~1e-3 relative accuracy, far below the 2-5 % bounds it is a yardstick for
    (kin40k and protein need 10-14 GB in float64, more than a shared 24 GB machine has free)."""
    import psutil

    if os.environ.get("REALDATA_KRR_DTYPE"):  # e.g. float64 when float32's BLAS fails at this n
        return os.environ["REALDATA_KRR_DTYPE"]
    return "float64" if 8.0 * n * n <= 0.4 * psutil.virtual_memory().available else "float32"


def make_reference(name: str, task: str, n_rows: int = 0):
    from sklearn.dummy import DummyClassifier, DummyRegressor
    from sklearn.svm import SVC

    from kernelscale import ExactKRRRegressor, ExactSVMClassifier

    if name == "trivial":
        return DummyRegressor() if task == "regression" else DummyClassifier(strategy="most_frequent")
    if name == "svc_c10_median":
        return ExactSVMClassifier(reg="0.1/n", bandwidth="median", random_state=0, cache_size=1000)
    if name == "svc_default":
        return SVC(cache_size=1000)
    if name == "krr_ref":
        return ExactKRRRegressor(reg="1.0/n", bandwidth="median", max_n=10**6, random_state=0,
                                 engine={"device": "cpu", "dtype": reference_dtype(n_rows)})
    raise KeyError(name)


DEVICE = "cpu"  # --device: where the algorithms fit (references stay on the CPU)


def cpu_name() -> str:
    """The CPU's model name and widest vector extension (Linux ``/proc/cpuinfo``): float64 exp,
    which sets the time of the host's kernel values, is vectorized by numpy only with AVX-512."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    field = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in info.splitlines())
             if k.strip() in ("model name", "flags")}
    flags = set(field.get("flags", "").split())
    simd = next((f for f in ("avx512f", "avx2", "avx") if f in flags), "no AVX")
    return f"{field.get('model name', platform.machine())}, {simd.upper()}"


def _gpu_name() -> str:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as e:  # the header still gets written
        return f"GPU name unavailable: {e}"


def make_algorithm(name: str, task: str):
    from kernelscale.pipeline.registry import CPU_ONLY, make_estimator

    # resolved in the forked child: the parent never opens a CUDA context (fork would break it)
    return make_estimator(name, task, random_state=0,
                          engine={"device": "cpu" if name in CPU_ONLY else DEVICE})


def _fit_and_score(kind, name, task, data):
    X_tr, y_tr, X_te, y_te = data
    est = make_reference(name, task, X_tr.shape[0]) if kind == "reference" \
        else make_algorithm(name, task)
    mem = PeakRSS()
    t0 = time.perf_counter()
    est.fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = est.predict(X_te)
    predict_s = time.perf_counter() - t0
    peak_mb = mem.stop()
    pred = np.asarray(pred)
    if task == "regression":
        score = float(np.sqrt(np.mean((pred.astype(np.float64) - y_te) ** 2)))
    else:
        score = float(np.mean(pred != y_te))
    extra = {}
    for attr in ("n_iter_", "n_blocks_", "bandwidth_", "n_epochs_"):
        if hasattr(est, attr):
            val = getattr(est, attr)
            if isinstance(val, (int, float, np.integer, np.floating)):
                extra[attr.rstrip("_")] = float(val)
    return {"score": score, "fit_s": fit_s, "predict_s": predict_s, "peak_mb": peak_mb, **extra}


def run_child(kind, name, task, data, time_cap: float, fit=None) -> dict:
    """The fit in a forked child; {"status": "ok", ...} or {"status": "timeout"/"error", ...}.
    ``fit(kind, name, task, data)`` -> dict of results does the work (default: a reference's or
    a registry estimator's fit, ``_fit_and_score``)."""
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            out = {"status": "ok", **(fit or _fit_and_score)(kind, name, task, data)}
        except BaseException as e:  # noqa: BLE001 - reported as the row's status
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            out = {"status": "error", "error": f"{type(e).__name__}: {msg}"[:300]}
        with os.fdopen(w, "wb") as f:
            pickle.dump(out, f)
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + time_cap
    with os.fdopen(r, "rb") as f:
        os.set_blocking(f.fileno(), False)
        while True:
            try:
                part = f.read()
            except BlockingIOError:
                part = None
            if part:
                chunks.append(part)
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                os.set_blocking(f.fileno(), True)
                rest = f.read()
                if rest:
                    chunks.append(rest)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"status": "timeout", "error": f"killed after {time_cap:.0f} s"}
            time.sleep(0.05)
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001
        return {"status": "error", "error": "child died without a result (out of memory?)"}


# ---------------------------------------------------------------------------------------------
# the race
# ---------------------------------------------------------------------------------------------
def algorithms_for(task: str, only=None) -> list[str]:
    from kernelscale.pipeline.registry import ALGORITHMS

    kind = "regression" if task == "regression" else "classification"
    names = [a for a, e in ALGORITHMS.items() if kind in e]
    return [a for a in names if only is None or a in only]


def references_for(task: str) -> list[str]:
    if task == "regression":
        return ["trivial", "krr_ref"]
    return ["trivial", "svc_c10_median", "svc_default"]


def read_references(path) -> list[dict]:
    """Reference rows (status ok) of an earlier run's CSV: the references do not depend on
    kernelscale's defaults, so a before/after pair can share them."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "reference" and r["status"] == "ok"]
    for r in rows:
        for k in ("score", "fit_s", "predict_s", "peak_mb"):
            r[k] = float(r[k])
    return rows


def joined(paths) -> list[dict]:
    """Rows of several runs' CSVs, references first, each (dataset, name) once (first file
    wins), with time ratios and flags recomputed against the joined references."""
    rows = []
    for path in paths:
        only_refs = path.startswith("refs:")  # "refs:FILE": take that run's references only
        with open(path.removeprefix("refs:"), newline="") as f:
            for r in csv.DictReader(f):
                if only_refs and r["kind"] != "reference":
                    continue
                for k in ("score", "fit_s", "predict_s", "peak_mb"):
                    r[k] = float(r[k]) if r.get(k) not in (None, "") else None
                for k in ("n_train", "n_test", "d"):
                    r[k] = int(r[k])
                same = [i for i, o in enumerate(rows)
                        if o["dataset"] == r["dataset"] and o["name"] == r["name"]]
                if not same:
                    rows.append(r)
                elif rows[same[0]]["status"] != "ok" and r["status"] == "ok":
                    rows[same[0]] = r  # a later run got what an earlier one could not
    order = list(dict.fromkeys(r["dataset"] for r in rows))
    out = []
    for ds in order:
        rs = [r for r in rows if r["dataset"] == ds]
        refs = [r for r in rs if r["kind"] == "reference"]
        refs.sort(key=lambda r: REFERENCES.index(r["name"]) if r["name"] in REFERENCES else 99)
        scores = {r["name"]: r["score"] for r in refs if r["status"] == "ok"}
        times = {r["name"]: r["fit_s"] for r in refs if r["status"] == "ok"}
        for r in refs + [r for r in rs if r["kind"] != "reference"]:
            base_t = times.get("krr_ref" if r["task"] == "regression" else "svc_c10_median")
            r["time_ratio"] = r["fit_s"] / base_t if r["status"] == "ok" and base_t else None
            r["flag"] = flag_row(r, scores)
            out.append(r)
    return out


def flag_row(row: dict, ref: dict) -> str:
    """'' if the result meets issue 10's bounds; else why not."""
    if row["status"] != "ok":
        return row["status"]
    s, task = row["score"], row["task"]
    triv, base = ref.get("trivial"), ref.get("krr_ref" if task == "regression" else "svc_c10_median")
    flags = []
    if triv is not None:
        if task == "regression" and s >= 0.98 * triv:
            flags.append("TRIVIAL")
        if task != "regression" and s >= triv - 0.002:
            flags.append("TRIVIAL")
    if base is not None and row["kind"] == "algorithm":
        dsg = row["name"] in ("dsg", "udsg", "cdsg")
        if task == "regression":
            if s > REG_RATIO * base:
                flags.append(f"> {REG_RATIO} x KRR")
            elif dsg and s > DSG_RATIO * base:
                flags.append(f"> {DSG_RATIO} x KRR")
        else:
            if s > base + CLF_SLACK:
                flags.append("> SVC + 1 pt")
            elif dsg and s > base + DSG_SLACK:
                flags.append("> SVC + 0.5 pt")
    return ", ".join(flags)


def run_race(args, csv_path: Path | None = None) -> list[dict]:
    """The race; the CSV is rewritten after every dataset (a partial run keeps its rows)."""
    specs = load_devdata_specs(Path(args.devdata))
    names = args.datasets or list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise SystemExit(f"realdata: unknown dataset(s) {unknown}; known: {sorted(specs)}")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for ds in names:
        spec = specs[ds]
        task = spec["task"]
        X_tr, y_tr, X_te, y_te, meta = prepared(ds, spec, cache)
        X_tr, y_tr = subsample(X_tr, y_tr, args.max_train)
        data = (X_tr, y_tr, X_te, y_te)
        print(f"\n== {ds}: {task}, train {X_tr.shape[0]} x {X_tr.shape[1]}, test {X_te.shape[0]}",
              flush=True)
        ref_scores, ref_times = {}, {}
        # read per dataset: a reference run going on beside this one may have added rows
        saved_refs = []
        for path in args.references_from or []:
            if Path(path).is_file():
                saved_refs += read_references(path)
        known = {r["name"]: r for r in saved_refs
                 if r["dataset"] == ds and int(r["n_train"]) == X_tr.shape[0]}
        jobs = [("reference", r) for r in references_for(task) if not args.no_references] + \
               [("algorithm", a) for a in algorithms_for(task, args.algorithms)]
        for kind, name in jobs:
            t0 = time.perf_counter()
            if kind == "reference" and name in known:  # same yardstick as an earlier run
                res = {k: known[name][k] for k in ("status", "score", "fit_s", "predict_s",
                                                   "peak_mb")}
                res["reused"] = 1
            elif kind == "reference" and name in args.external_references:
                continue  # computed by a run beside this one; joined by --report
            else:
                res = run_child(kind, name, task, data, args.time_cap)
            row = {"dataset": ds, "task": task, "n_train": int(X_tr.shape[0]),
                   "n_test": int(X_te.shape[0]), "d": int(X_tr.shape[1]), "kind": kind,
                   "name": name, **res}
            if kind == "reference" and res["status"] == "ok":
                ref_scores[name], ref_times[name] = res["score"], res["fit_s"]
            base_t = ref_times.get("krr_ref" if task == "regression" else "svc_c10_median")
            if res["status"] == "ok" and base_t:
                row["time_ratio"] = res["fit_s"] / base_t
            row["flag"] = flag_row(row, ref_scores)
            rows.append(row)
            metric = "rmse" if task == "regression" else "err"
            if res["status"] == "ok":
                print(f"  {name:16s} {metric} {res['score']:.4f}  fit {res['fit_s']:7.2f} s  "
                      f"predict {res['predict_s']:6.2f} s  peak {res['peak_mb']:7.1f} MB  "
                      f"{row['flag']}", flush=True)
            else:
                print(f"  {name:16s} {res['status']}: {res.get('error', '')} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if csv_path is not None:
            write_csv(rows, csv_path)
    return rows


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------
COLUMNS = ("dataset", "task", "n_train", "n_test", "d", "kind", "name", "status", "score",
           "fit_s", "predict_s", "time_ratio", "peak_mb", "flag", "n_iter", "n_blocks",
           "n_epochs", "bandwidth", "error")


def write_csv(rows, path: Path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in COLUMNS})


def _fmt(v, spec):
    return "" if v is None or v == "" or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def markdown(rows, header: str) -> str:
    lines = [header, ""]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        rs = [r for r in rows if r["dataset"] == ds]
        r0 = rs[0]
        metric = "RMSE" if r0["task"] == "regression" else "error %"
        base = "exact KRR" if r0["task"] == "regression" else "SVC(C=10)"
        lines += [f"### {ds} ({r0['task']}, train {r0['n_train']} x {r0['d']}, test {r0['n_test']})",
                  "", f"| estimator | {metric} | fit s | predict s | fit / {base} | peak MB | flag |",
                  "|---|---|---|---|---|---|---|"]
        for r in rs:
            if r["status"] == "ok":
                s = r["score"] if r["task"] == "regression" else 100 * r["score"]
                lines.append(f"| {r['name']} | {s:.{4 if r['task'] == 'regression' else 2}f} | "
                             f"{_fmt(r['fit_s'], '.2f')} | {_fmt(r['predict_s'], '.2f')} | "
                             f"{_fmt(r.get('time_ratio'), '.2f')} | {_fmt(r['peak_mb'], '.0f')} | "
                             f"{r['flag']} |")
            else:
                lines.append(f"| {r['name']} | {r['status']} | | | | | {r.get('error', '')} |")
        lines.append("")
    return "\n".join(lines)


def summary_matrix(rows) -> str:
    """Algorithms x datasets: error % or RMSE, '!' where a bound is missed."""
    ds_list = list(dict.fromkeys(r["dataset"] for r in rows))
    names = list(dict.fromkeys(r["name"] for r in rows))
    out = ["| estimator | " + " | ".join(d.replace("dev_", "") for d in ds_list) + " |",
           "|---|" + "---|" * len(ds_list)]
    for n in names:
        cells = []
        for d in ds_list:
            r = next((r for r in rows if r["dataset"] == d and r["name"] == n), None)
            if r is None:
                cells.append("")
            elif r["status"] != "ok":
                cells.append(r["status"])
            else:
                v = r["score"] if r["task"] == "regression" else 100 * r["score"]
                cells.append(f"{v:.3f}" if r["task"] == "regression" else f"{v:.2f}")
                if r["flag"]:
                    cells[-1] += " !"
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def log_mlflow(uri: str, args, rows, files) -> str:
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(EXPERIMENT)
    with mlflow.start_run(run_name=f"realdata-{args.tag}") as run:
        mlflow.log_params({"tag": args.tag, "max_train": args.max_train, "threads": args.threads,
                           "time_cap_s": args.time_cap, "machine": platform.node(),
                           "cpus": os.cpu_count()})
        metrics = {}
        for r in rows:
            if r["status"] == "ok":
                key = f"{r['dataset']}.{r['name']}"
                metrics[f"{key}.score"] = r["score"]
                metrics[f"{key}.fit_s"] = r["fit_s"]
                metrics[f"{key}.predict_s"] = r["predict_s"]
        mlflow.log_metrics(metrics)
        for f in files:
            mlflow.log_artifact(str(f))
        return run.info.run_id


def limit_threads(n: int) -> None:
    """BLAS, kernelscale's element-wise passes and numba (read once, at its import) at ``n``
    threads, for the whole process."""
    from threadpoolctl import threadpool_limits

    from kernelscale import parallel

    threadpool_limits(n)
    parallel.set_threads(n)
    os.environ["NUMBA_NUM_THREADS"] = str(n)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devdata", default=str(DEFAULT_DEVDATA))
    p.add_argument("--datasets", nargs="*")
    p.add_argument("--algorithms", nargs="*")
    p.add_argument("--no-references", action="store_true")
    p.add_argument("--references-from", metavar="CSV", nargs="*",
                   help="reuse the reference rows of an earlier run's CSV (same dataset and rows)")
    p.add_argument("--external-references", nargs="*", default=[], metavar="NAME",
                   help="references never computed here (another run makes them; see --report)")
    p.add_argument("--report", nargs="*", metavar="CSV",
                   help="no race: join these runs' CSVs (references + algorithms; 'refs:FILE' "
                        "takes only FILE's references; the first file holding a (dataset, "
                        "estimator) wins), recompute flags and ratios, write the tables under --tag")
    p.add_argument("--max-train", type=int, default=None, help="subsample training rows")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="device of the algorithms' fits (references always run on the CPU)")
    p.add_argument("--threads", type=int, default=1, help="BLAS / element-wise threads per fit")
    p.add_argument("--time-cap", type=float, default=900.0, help="seconds per fit")
    p.add_argument("--cache", default=str(REPO / "results" / "realdata" / "data"))
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    p.add_argument("--tracking-uri", default=f"sqlite:///{REPO / 'results' / 'realdata' / 'mlflow.db'}",
                   help="MLflow store ('none' to skip)")
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    if args.threads < 1:
        raise SystemExit(f"realdata: --threads {args.threads} must be >= 1")
    limit_threads(args.threads)
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"realdata-{args.tag}"
    if args.report:
        rows = joined(args.report)
        write_csv(rows, stem.with_suffix(".csv"))
    else:
        rows = run_race(args, stem.with_suffix(".csv"))
    load = os.getloadavg()
    where = ("Rows joined from the runs' CSVs (machine and device: see each run's report)"
             if args.report else
             f"{platform.node()}, {os.cpu_count()} CPUs ({cpu_name()}), algorithms on {args.device}"
             f"{' (' + _gpu_name() + ')' if args.device == 'gpu' else ''}, "
             f"{args.threads} thread(s) per fit, load average {load[0]:.1f} at the end; "
             f"{(time.time() - t0) / 60:.1f} min in all; training rows capped at "
             f"{args.max_train or 'none'}")
    header = (f"# Real-data race `{args.tag}`\n\n{where}. Command: `python benchmarks/realdata.py "
              f"{' '.join(argv if argv is not None else sys.argv[1:])}`\n\n"
              "Every estimator at its registry defaults (`random_state=0`). Flags: TRIVIAL = at the "
              "majority-class / mean level; `> SVC + 1 pt` / `> 1.05 x KRR` = outside issue 10's "
              "bound; the DSG family is held to +0.5 pt / 1.02 x.\n\n## Summary (error % / RMSE)\n\n"
              + summary_matrix(rows) + "\n\n## Per dataset\n")
    stem.with_suffix(".md").write_text(markdown(rows, header))
    print(f"\nwrote {stem}.csv, {stem}.md", flush=True)
    if args.tracking_uri != "none":
        Path(REPO / "results" / "realdata").mkdir(parents=True, exist_ok=True)
        run_id = log_mlflow(args.tracking_uri, args, rows, [stem.with_suffix(".csv"),
                                                            stem.with_suffix(".md")])
        print(f"MLflow run {run_id} in {args.tracking_uri} (experiment {EXPERIMENT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
