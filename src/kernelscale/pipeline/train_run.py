"""One training run = one run folder, written so that a killed run resumes where it stopped.

``train(...)`` fits algorithm ``algorithm`` (a ``config.yaml`` entry: registry name, params,
device, segments) on a prepared dataset and writes ``out_dir``:

* ``params.json``: what was run (dataset, algorithm, estimator, seed, device, estimator params)
* ``metrics.csv``: one row per segment: step, iter, time_s (training wall time so far),
  timestamp_ms, objective (when the solver reports one), test metrics
* ``history.csv``: the estimator's ``history_`` (per iteration), when it has one
* ``model.pkl``: the fitted estimator (pickle); ``input_example.npy``: the first test rows
* ``system_metrics.csv``: CPU, memory and GPU use while fitting and evaluating (``system_metrics``)
* ``final.json``: final test metric, fit and predict time (the whole test set), the method's
  peak memory, model size, the trivial baseline, device, sizes, and under ``chosen`` what the
  "auto" settings chose (``chosen.chosen_settings``); written last: the run is complete
* ``checkpoint.pkl``: while running, estimator + rows after each finished segment

Iterative estimators (class attribute ``iterative = True``) are fitted in ``segments`` warm-started
calls of ``n_iter`` iterations each; after every segment the test metric is evaluated (in chunks)
and a checkpoint is written. Intermediate evaluations use the first ``step_test_rows`` test rows
(default 10,000; 0 = all; column ``test_rows``), the last one the whole test set. A rerun after a
kill continues from the checkpoint, unless its run description (params, seed, data) differs.

``dask_scheduler`` ("local", "slurm" or a scheduler address; config ``dask:``) runs the chunked work
on a dask cluster (``kernelscale.spread``); results do not depend on it, so it is not part of the
run description. Every worker must read the dataset's first rows as the job does
(``spread.cluster.check_workers_read``), else a one-line error before the fit. A run that fails
before it has anything to resume leaves no run folder it created (``failed_start_leaves_nothing``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import pickle
import platform
import shutil
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .. import __version__
from ..backend import resolve_device
from ..budget import MB, lifetime_peak_rss_bytes, peak_rss_bytes, reset_peak_rss, rss_bytes
from ..spread.cluster import check_workers_read, client_from_setting, current_client, use_client
from . import registry
from .chosen import chosen_settings
from .evaluate import evaluate, primary_metric
from .runs import entry_defaults
from .system_metrics import SystemSampler

CHECKPOINT = "checkpoint.pkl"


def open_prepared(data_dir: str | Path):
    """(meta, arrays) of a prepared dataset folder (``meta.json`` + ``data.zarr``)."""
    from .data import open_prepared as _open  # the data stage's reader

    data_dir = Path(data_dir)
    if not (data_dir / "meta.json").is_file():
        raise FileNotFoundError(f"{data_dir}/meta.json not found: prepare the dataset first")
    return _open(data_dir)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if hasattr(v, "item") and getattr(v, "shape", None) == ():
        return v.item()
    return repr(v)


def peak_rss_mb() -> float:
    """Peak resident set of this process since it started, in MB."""
    return lifetime_peak_rss_bytes() / MB


class MethodMemory:
    """The method's own peak memory: peak RSS during fit + evaluation minus the RSS just before
    (``budget.reset_peak_rss``); where the reset is refused, the process peak since start-up."""

    def start(self) -> None:
        self.reset = reset_peak_rss()
        rss = rss_bytes()
        self.base = rss / MB if (self.reset and rss is not None) else peak_rss_mb()

    def peak(self) -> float:
        peak = peak_rss_bytes() / MB if self.reset else peak_rss_mb()
        return max(0.0, peak - self.base)


def trivial_baseline(task: str, y_train, y_test) -> dict:
    """What a model that ignores X scores on the test set: the majority class of the training
    labels (classification, error) or their mean (regression, RMSE). A model near this value has
    learned nothing."""
    y_train, y_test = np.asarray(y_train[:]), np.asarray(y_test[:])
    if task == "regression":
        mean = float(np.mean(y_train))
        rmse = float(np.sqrt(np.mean((y_test.astype(np.float64) - mean) ** 2)))
        return {"baseline": "mean predictor", "baseline_value": rmse}
    values, counts = np.unique(y_train, return_counts=True)
    majority = values[np.argmax(counts)]
    return {"baseline": f"majority class ({_jsonable(majority)})",
            "baseline_value": float(np.mean(y_test != majority))}


AT_BASELINE_MARGIN = 0.02


def at_baseline(value, baseline_value, margin: float = AT_BASELINE_MARGIN) -> bool:
    """True when ``value`` (error or RMSE, lower is better) is not at least ``margin`` (relative)
    better than the trivial baseline: such a model is no better than ignoring the inputs."""
    return (value is not None and baseline_value is not None
            and float(value) >= (1.0 - margin) * float(baseline_value))


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as CSV, the columns in order of first appearance, written atomically."""
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    w.writeheader()
    w.writerows(rows)
    _atomic_write_bytes(path, text.getvalue().encode())


def _last(history, key):
    if isinstance(history, dict) and history.get(key):
        v = history[key][-1]
        return v.item() if hasattr(v, "item") else v
    return None


def build_estimator(spec: dict, task: str, seed: int):
    """Estimator of a config algorithm entry, seeded, on its device (the entry's ``device`` is
    the engine's), warm-startable if iterative; returns (estimator, device it will run on)."""
    est = registry.make_estimator(spec["estimator"], task, **dict(spec.get("params") or {}))
    names = est.get_params(deep=False)
    device = spec.get("device", entry_defaults()["device"])
    updates = {}
    if "random_state" in names:
        updates["random_state"] = int(seed)
    if "engine" in names:  # kernelscale's estimators; a registered third-party one has none
        updates["engine"] = {**(names["engine"] or {}), "device": device}
    if getattr(est, "iterative", False):
        updates["warm_start"] = True
    if updates:
        est.set_params(**updates)
    if "engine" in names and spec["estimator"] not in registry.CPU_ONLY:
        return est, resolve_device(device)
    return est, "cpu"


def run_key(meta: dict, algorithm: str, spec: dict, seed: int) -> str:
    """Hash of everything that defines a run (a checkpoint is reused only if it matches)."""
    desc = {"dataset": meta,  # all of meta.json: sizes, and the preparation's statistics
            "algorithm": algorithm, "spec": spec, "seed": int(seed)}
    return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()


def train(data_dir, out_dir, algorithm: str, spec: dict, seed: int, *,
          stop_after: int | None = None, eval_chunk_rows: int | None = None,
          dask_scheduler: str | None = None, dask_workers: int | None = None) -> dict | None:
    """Run (or resume) one training run; returns final.json's content, or None when stopped early
    by ``stop_after`` (number of segments to do in this call; for tests and debugging).
    ``dask_scheduler``/``dask_workers``: see ``spread.client_from_setting``; None keeps the
    caller's ``use_client`` setting."""
    with failed_start_leaves_nothing(out_dir), ExitStack() as stack:
        prepared = open_prepared(data_dir)  # before the cluster: a bad dataset fails in seconds
        if dask_scheduler is None:
            client = current_client()  # a caller's use_client, if any
        else:
            client = stack.enter_context(client_from_setting(dask_scheduler, dask_workers))
            stack.enter_context(use_client(client))
        check_workers_read(client, prepared[1])  # a worker without the data: one line
        return _train(data_dir, out_dir, prepared, algorithm, spec, seed, stop_after,
                      eval_chunk_rows)


@contextmanager
def failed_start_leaves_nothing(out_dir):
    """On an exception in the block: remove the run folder ``out_dir`` if the block created it and
    it holds nothing to resume (no checkpoint, no final.json), else only the ``*.tmp`` files of
    interrupted writes; then re-raise."""
    out = Path(out_dir)
    made = not out.exists()
    try:
        yield out
    except BaseException:
        try:
            if out.is_dir():
                keep = (out / CHECKPOINT).exists() or (out / "final.json").exists()
                if made and not keep:
                    shutil.rmtree(out)
                else:
                    for tmp in out.glob("*.tmp"):
                        tmp.unlink(missing_ok=True)
        except OSError as e:  # the failure is the news: say what is left, raise the failure
            print(f"warning: could not clean up the run folder {out} after the failure "
                  f"({e.strerror or e})", flush=True)
        raise


def _train(data_dir, out_dir, prepared, algorithm: str, spec: dict, seed: int,
           stop_after: int | None, eval_chunk_rows: int | None) -> dict | None:
    data_dir, out = Path(data_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta, arrays = prepared
    task = meta["task"]
    est, device = build_estimator(spec, task, seed)
    iterative = bool(getattr(est, "iterative", False))
    segments = int(spec.get("segments", entry_defaults()["segments"])) if iterative else 1
    if segments < 1:
        raise ValueError(f"algorithm {algorithm!r}: segments must be >= 1, got {segments}")
    key = run_key(meta, algorithm, spec, seed)
    dataset = meta.get("name", data_dir.name)
    name = f"{dataset}/{algorithm}/seed{seed}"
    X, y = arrays["X_train"], arrays["y_train"]
    Xt, yt = arrays["X_test"], arrays["y_test"]
    chunk = eval_chunk_rows or meta.get("chunk_rows")
    step_rows = int(spec.get("step_test_rows", entry_defaults()["step_test_rows"])) or None

    state = {"key": key, "segment": 0, "train_time": 0.0, "eval_time": 0.0, "rows": [],
             "estimator": est, "peak_rss_mb": 0.0, "peak_mem_mb": 0.0, "resumed": 0,
             "started_at": time.time(), "predict_time": None}
    ckpt = out / CHECKPOINT
    if ckpt.is_file():
        try:
            saved = pickle.loads(ckpt.read_bytes())
        except Exception as e:  # a torn or foreign file: start over, say so
            print(f"warning: ignoring unreadable checkpoint {ckpt} "
                  f"({' '.join(str(e).split()) or type(e).__name__}); starting over", flush=True)
            saved = None
        if saved is not None and not (isinstance(saved, dict) and set(state) <= set(saved)
                                      and isinstance(saved.get("rows"), list)
                                      and hasattr(saved.get("estimator"), "fit")):
            # another program's pickle, or an older layout: it would fail every rerun
            print(f"warning: {ckpt} is not a checkpoint of this version (a "
                  f"{type(saved).__name__}); starting over", flush=True)
            saved = None
        if saved and saved.get("key") == key:
            state = {**state, **saved}  # checkpoints of older versions lack newer keys
            state["resumed"] += 1
            est = state["estimator"]
            print(f"resuming {name} from checkpoint after segment {state['segment']}/{segments}",
                  flush=True)
        elif saved:
            print(f"checkpoint {ckpt} belongs to another run description; starting over", flush=True)

    print(f"train {name}: estimator={spec['estimator']} device={device} "
          f"n_train={meta.get('n_train')} d={meta.get('d')} segments={segments}", flush=True)
    metric = primary_metric(task)
    # a bar on a terminal, plain lines otherwise (log files)
    progress = tqdm(total=segments, initial=state["segment"], desc=name, unit="seg",
                    disable=not sys.stderr.isatty())
    done_now = 0
    memory = MethodMemory()
    memory.start()  # after the data is opened and the checkpoint loaded: only fit + predict count
    try:
        with SystemSampler(out):  # CPU, memory, GPU: system_metrics.csv
            while state["segment"] < segments:
                if stop_after is not None and done_now >= stop_after:
                    return None
                t0 = time.perf_counter()
                est.fit(X, y)
                state["train_time"] += time.perf_counter() - t0
                t1 = time.perf_counter()
                last_segment = state["segment"] + 1 == segments
                rows = None if last_segment else step_rows
                scores = evaluate(est, Xt, yt, task, chunk, max_rows=rows)
                eval_s = time.perf_counter() - t1
                state["eval_time"] += eval_s
                if last_segment:  # the whole test set: the method's prediction time
                    state["predict_time"] = eval_s
                state["peak_mem_mb"] = max(state["peak_mem_mb"], memory.peak())
                state["segment"] += 1
                done_now += 1
                hist = getattr(est, "history_", None)
                row = {"step": state["segment"], "iter": _last(hist, "iter"),
                       "time_s": round(state["train_time"], 6),
                       "timestamp_ms": int(time.time() * 1000),
                       "objective": _last(hist, "objective"),
                       "test_rows": min(int(Xt.shape[0]), rows or int(Xt.shape[0]))}
                if _last(hist, "n_blocks") is not None:
                    row["n_blocks"] = _last(hist, "n_blocks")
                row.update(scores)
                state["rows"].append(row)
                state["peak_rss_mb"] = max(state["peak_rss_mb"], peak_rss_mb())
                _atomic_write_bytes(ckpt, pickle.dumps(state))
                write_csv(out / "metrics.csv", state["rows"])
                line = (f"step {row['step']}/{segments} iter={row['iter']} "
                        f"time={row['time_s']:.2f}s objective={row['objective']} "
                        f"{metric}={scores[metric]:.5g}")
                if progress.disable:
                    print(line, flush=True)
                else:
                    progress.set_postfix_str(line, refresh=False)
                    progress.update(1)
    finally:
        progress.close()

    last = state["rows"][-1]
    what = {"dataset": dataset, "algorithm": algorithm, "estimator": spec["estimator"],
            "seed": int(seed)}
    params = {**what, "device": device, "segments": segments, "iterative": iterative,
              "params": _jsonable(est.get_params(deep=False))}
    _atomic_write_bytes(out / "params.json", json.dumps(params, indent=2, sort_keys=True).encode())
    write_csv(out / "metrics.csv", state["rows"])
    hist = getattr(est, "history_", None)
    n_hist = min(map(len, hist.values())) if isinstance(hist, dict) and hist else 0
    if n_hist:
        write_csv(out / "history.csv",
                  [{k: _jsonable(v[i]) for k, v in hist.items()} for i in range(n_hist)])
    model_bytes = pickle.dumps(est)
    _atomic_write_bytes(out / "model.pkl", model_bytes)
    example = io.BytesIO()  # the MLflow model's input example (the import opens no dataset)
    np.save(example, np.asarray(Xt[:5]))
    _atomic_write_bytes(out / "input_example.npy", example.getvalue())
    try:
        data_digest = hashlib.sha256((data_dir / "meta.json").read_bytes()).hexdigest()
    except OSError:
        data_digest = None
    base = trivial_baseline(task, y, yt)
    flagged = at_baseline(last[metric], base["baseline_value"])
    final = {**what, "task": task, "metric": metric, "value": last[metric],
             **{k: v for k, v in last.items() if k.startswith("test_")},
             "objective": last.get("objective"), "n_iter": last.get("iter"),
             "segments": segments, "train_time_s": state["train_time"],
             "eval_time_s": state["eval_time"], "predict_time_s": state["predict_time"],
             "peak_mem_mb": state["peak_mem_mb"],
             "peak_rss_mb": max(state["peak_rss_mb"], peak_rss_mb()),
             "model_size_mb": len(model_bytes) / 2**20, **base, "at_baseline": flagged,
             "device": device, "chosen": chosen_settings(est),
             "n_train": meta.get("n_train"), "n_test": meta.get("n_test"), "d": meta.get("d"),
             "resumed": state["resumed"], "host": platform.node(),
             "kernelscale_version": __version__, "data_dir": str(data_dir.resolve()),
             "data_digest": data_digest, "started_at": state["started_at"],
             "finished_at": time.time()}
    final = _jsonable(final)
    _atomic_write_bytes(out / "final.json", json.dumps(final, indent=2).encode())
    ckpt.unlink(missing_ok=True)
    if flagged:  # the one line a researcher must not miss in the log
        print(f"WARNING: {name} is at the trivial baseline: "
              f"{metric}={final['value']:.5g} vs {base['baseline']} {base['baseline_value']:.5g} "
              f"(not {AT_BASELINE_MARGIN:.0%} better); it has learned nothing useful", flush=True)
    print(f"done {name}: {metric}={final['value']:.5g} "
          f"train_time={final['train_time_s']:.2f}s predict_time={final['predict_time_s'] or 0:.2f}s "
          f"peak_mem={final['peak_mem_mb']:.0f}MB (process {final['peak_rss_mb']:.0f}MB)",
          flush=True)
    return final
