"""MLflow import of run folders (see ``train_run``), idempotent.

Training jobs never talk to MLflow: they write run folders. One job creates the tracking store
(``init_store``: a fresh SQLite database must not be created by several processes at once), then one
job imports every finished run folder (``import_runs``). Each MLflow run gets:

* its real start and end time (``final.json``'s ``started_at`` / ``finished_at``: the Duration
  column is the job's wall time, resumes included);
* params: what was run (``params.json``: estimator parameters as ``params.*``) and the run's
  constants (``n_train``, ``n_test``, ``d``, ``segments``, ``n_iter``, host, version, ...): they
  are not metrics, so they do not fill the charts view; what the estimator chose for its "auto"
  settings (``final.json``'s ``chosen``) as ``chosen.<name>`` (``chosen.reg``,
  ``chosen.bandwidth``, ``chosen.eta0``, ...);
* metrics: per segment (``step`` = segment, with its wall-clock timestamp) the test metrics,
  ``objective``, ``iter`` and ``time_s``; the solver's per-iteration history as ``history.*``
  (``step`` = iteration); ``final.*`` for the final numbers (test metric, fit / predict time, the
  method's peak memory, model size, trivial baseline); the job's CPU, memory and GPU use
  (``system_metrics.csv``) as MLflow's system metrics ``system/<name>``, with their steps and
  timestamps. All through ``log_batch``, batched;
* the fitted estimator as an MLflow model (``mlflow.sklearn``: ``mlflow.pyfunc.load_model(
  "runs:/<run id>/model")`` predicts with it; loading needs kernelscale installed);
* the prepared dataset as an input (name, path, digest of its ``meta.json``);
* tags: ``dataset``, ``algorithm``, ``seed``, ``device``, ``metric``, ``at_baseline``, the git
  commit (``mlflow.source.git.commit``) and the config hash (``kernelscale.config_hash``), which
  the pipeline passes in the environment (``KERNELSCALE_GIT_COMMIT``, ``KERNELSCALE_CONFIG_HASH``:
  a new commit must not re-run the import job, as a rule param would);
* with ``parent_name``, a parent run (one per pipeline invocation, i.e. per import job) holding
  the config's runs as children.

Each MLflow run is tagged with its run-folder key (``dataset/algorithm/seedN``), the folder's
absolute path and a content hash; importing again skips runs whose hash is unchanged and replaces
runs whose folder changed, so there is never more than one MLflow run per run folder (two checkouts
sharing one store keep their own runs). The hash is the last thing written to a run: an import
killed half-way leaves a run without it, which the next import redoes.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path

from .system_metrics import read_rows

KEY_TAG = "kernelscale.run_key"
HASH_TAG = "kernelscale.content_hash"
HASHED_FILES = ("final.json", "metrics.csv", "params.json")
ARTIFACT_SKIP = ("checkpoint.pkl",)
_BATCH = 900  # log_batch accepts at most 1000 metrics per call


def artifact_root_for(uri: str) -> str | None:
    """Artifacts of a ``sqlite:///path/mlflow.db`` store go beside it in ``mlartifacts/``."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        return (db.resolve().parent / "mlartifacts").as_uri()
    return None


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def init_store(uri: str, experiment: str) -> str:
    """Create the tracking store (database tables) and the experiment; returns the experiment id."""
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        if exp.tags.get(EXPERIMENT_KIND_TAG) is None:
            client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return exp.experiment_id
    # MLflow 3's UI opens an experiment on its GenAI view unless the experiment says what it is
    return client.create_experiment(experiment, artifact_location=artifact_root_for(uri),
                                    tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})


def runs_table_url(uri: str, experiment: str, server: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI's address of the experiment's runs table (created when missing), under the
    "Model training" switch: a bare experiment address opens MLflow 3's GenAI pages."""
    return (f"{server.rstrip('/')}/#/experiments/{init_store(uri, experiment)}/runs"
            "?workflowType=machine_learning")


def run_folder_key(run_dir: Path) -> str:
    """``dataset/algorithm/seedN`` from ``.../runs/dataset/algorithm/seedN``."""
    run_dir = Path(run_dir)
    return "/".join(run_dir.resolve().parts[-3:])


def content_hash(run_dir: Path) -> str:
    h = hashlib.sha256()
    for name in HASHED_FILES:
        p = Path(run_dir) / name
        if p.is_file():
            h.update(name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _num(v):
    if v is None or v == "":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = str(v)[:6000]
    return out


FINAL_METRICS = ("value", "objective", "train_time_s", "eval_time_s", "predict_time_s",
                 "peak_mem_mb", "peak_rss_mb", "model_size_mb", "baseline_value")
STEP_PARAMS = ("test_rows",)  # per-segment columns that are settings, not measurements
HISTORY_MAX_ROWS = 20000  # longer histories are thinned evenly (the last row always kept)
GIT_ENV, CONFIG_HASH_ENV = "KERNELSCALE_GIT_COMMIT", "KERNELSCALE_CONFIG_HASH"
KIND_TAG = "kernelscale.kind"
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"


def _read_json(path: Path) -> dict:
    """A run folder's JSON record; one line naming the file when it is damaged."""
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path} is not valid JSON ({e}); re-run the training job "
                         f"(delete {path.parent})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def run_records(run_dir: Path):
    """(params, per-step metrics [(key, value, timestamp_ms, step)], final) of a run folder."""
    run_dir = Path(run_dir)
    final = _read_json(run_dir / "final.json")
    params = _read_json(run_dir / "params.json") if (run_dir / "params.json").is_file() else {}
    steps = []
    mpath = run_dir / "metrics.csv"
    if mpath.is_file():
        with open(mpath, newline="") as f:
            for row in csv.DictReader(f):
                step = int(float(row["step"]))
                ts = int(float(row.get("timestamp_ms") or 0))
                for k, v in row.items():
                    if k in ("step", "timestamp_ms") or k in STEP_PARAMS:
                        continue
                    x = _num(v)
                    if x is not None:
                        steps.append((k, x, ts, step))
    return params, steps, final


def history_metrics(run_dir: Path, steps, default_ts: int) -> list[tuple]:
    """``history.csv`` as metrics ``history.<column>`` with step = iteration. The timestamp of an
    iteration is that of the segment it belongs to (the history has no wall clock of its own)."""
    path = Path(run_dir) / "history.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if len(rows) > HISTORY_MAX_ROWS:
        idx = sorted({round(i * (len(rows) - 1) / (HISTORY_MAX_ROWS - 1))
                      for i in range(HISTORY_MAX_ROWS)})
        rows = [rows[i] for i in idx]
    seg_ends = sorted({(int(v), ts) for k, v, ts, _ in steps if k == "iter"})
    out = []
    for i, row in enumerate(rows):
        it = _num(row.get("iter"))
        step = int(it) if it is not None else i + 1
        ts = next((t for end, t in seg_ends if end >= step), default_ts) or default_ts
        for k, v in row.items():
            x = _num(v)
            if k != "iter" and x is not None:
                out.append((f"history.{k}", x, ts, step))
    return out


def provenance_tags() -> dict[str, str]:
    """Git commit and config hash handed over by the pipeline (environment), as MLflow tags."""
    import os

    tags = {}
    if os.environ.get(GIT_ENV):
        tags["mlflow.source.git.commit"] = os.environ[GIT_ENV]
    if os.environ.get(CONFIG_HASH_ENV):
        tags["kernelscale.config_hash"] = os.environ[CONFIG_HASH_ENV]
    return tags


def _constants(final: dict) -> dict[str, str]:
    """The numbers of final.json that describe the run rather than measure it: MLflow params."""
    skip = set(FINAL_METRICS) | {"finished_at", "started_at", "at_baseline"}
    return {k: str(v) for k, v in final.items()
            if k not in skip and (not k.startswith("test_") or k in STEP_PARAMS) and v is not None
            and not isinstance(v, (dict, list))}


def _log_model(client, rid: str, run_dir: Path) -> str | None:
    """The fitted estimator as an MLflow (sklearn-flavour) model named ``model``; None (and a
    line on stdout) if it cannot be logged: the run keeps ``model.pkl`` as an artifact then."""
    import logging
    import pickle
    import warnings

    # its per-model warning about pickle formats: model.pkl is a pickle already, said in the README
    logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
    try:
        import cloudpickle
        import mlflow
        import numpy as np
        import sklearn

        est = pickle.loads((Path(run_dir) / "model.pkl").read_bytes())
        example = Path(run_dir) / "input_example.npy"
        example = np.load(example) if example.is_file() else None
        mlflow.set_tracking_uri(client.tracking_uri)
        with warnings.catch_warnings(), mlflow.start_run(run_id=rid):
            warnings.simplefilter("ignore")
            # cloudpickle, as model.pkl: MLflow's default (skops) refuses kernelscale's classes.
            # Explicit requirements: inferring them imports the model in a subprocess (seconds).
            info = mlflow.sklearn.log_model(
                est, name="model", input_example=example, serialization_format="cloudpickle",
                pip_requirements=[f"numpy=={np.__version__}",
                                  f"scikit-learn=={sklearn.__version__}",
                                  f"cloudpickle=={cloudpickle.__version__}"])
        return info.model_uri
    except Exception as e:  # the run's numbers matter more than the model flavour
        print(f"mlflow: could not log {run_dir}/model.pkl as an MLflow model: "
              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
        return None


def _log_dataset(client, rid: str, final: dict) -> None:
    import warnings

    if not final.get("data_dir"):
        return
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    with warnings.catch_warnings():  # "can be interpreted in multiple ways": both are local
        warnings.simplefilter("ignore")
        source = resolve_dataset_source(str(final["data_dir"]))
    ds = MetaDataset(source, name=str(final.get("dataset")),
                     digest=str(final.get("data_digest") or "")[:36] or None)
    client.log_inputs(rid, datasets=[DatasetInput(
        ds._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", "train")])])


def _import_one(client, exp_id: str, run_dir: Path, key: str, digest: str,
                parent_id: str | None = None) -> str:
    from mlflow.entities import Metric, Param

    params, steps, final = run_records(run_dir)
    finished_ms = int(float(final.get("finished_at", 0)) * 1000)
    if final.get("started_at"):
        start_ms = int(float(final["started_at"]) * 1000)
    else:  # run folders of older versions: the first segment's end is the best we know
        start_ms = min([s[2] for s in steps if s[2]] or [finished_ms])
    # HASH_TAG is set last, after everything else is logged: an import killed half-way leaves a
    # run without it, which the next import replaces instead of calling it "unchanged"
    tags = {KEY_TAG: key, KIND_TAG: "run", "dataset": str(final.get("dataset")),
            "algorithm": str(final.get("algorithm")), "seed": str(final.get("seed")),
            "device": str(final.get("device")), "metric": str(final.get("metric")),
            "at_baseline": str(bool(final.get("at_baseline"))),
            "run_folder": str(Path(run_dir).resolve()), **provenance_tags()}
    if parent_id:
        tags["mlflow.parentRunId"] = parent_id
    run = client.create_run(exp_id, start_time=start_ms, tags=tags, run_name=key)
    rid = run.info.run_id
    flat = {k: v for k, v in _flatten(params).items() if k not in ("params",)}
    for k, v in _constants(final).items():
        flat.setdefault(k, v)  # params.json's value wins: MLflow params cannot change
    if isinstance(final.get("chosen"), dict):  # the values behind params.* = "auto"
        flat.update(_flatten(final["chosen"], "chosen."))
    plist = [Param(k, v) for k, v in flat.items()]
    metrics = [Metric(k, v, ts, step) for k, v, ts, step in steps]
    metrics += [Metric(k, v, ts, step)
                for k, v, ts, step in history_metrics(run_dir, steps, finished_ms)]
    metrics += [Metric(f"system/{k}", v, ts, step) for k, v, ts, step in read_rows(run_dir)]
    last_step = int(final.get("segments") or 0)
    for k, v in final.items():
        x = _num(v) if not isinstance(v, bool) else None
        if x is not None and (k in FINAL_METRICS or k.startswith("test_")) \
                and k not in STEP_PARAMS:
            metrics.append(Metric(f"final.{k}", x, finished_ms, last_step))
    for i in range(0, max(len(plist), 1), 100):
        client.log_batch(rid, params=plist[i:i + 100])
    for i in range(0, len(metrics), _BATCH):
        client.log_batch(rid, metrics=metrics[i:i + _BATCH])
    _log_dataset(client, rid, final)
    logged_model = _log_model(client, rid, run_dir)
    # the model's fluent run context ended the run; it is not complete until HASH_TAG is set
    client.update_run(rid, status="RUNNING")
    for p in sorted(Path(run_dir).iterdir()):
        if not p.is_file() or p.name in ARTIFACT_SKIP or p.name.endswith(".tmp"):
            continue
        if p.name == "model.pkl" and logged_model:  # already there as the MLflow model
            continue
        client.log_artifact(rid, str(p))
    # after the model (whose fluent run context ends the run "now"): the job's real end time
    client.set_terminated(rid, status="FINISHED", end_time=finished_ms or None)
    client.set_tag(rid, HASH_TAG, digest)  # last: marks the run complete
    return rid


def pipeline_run_name() -> str:
    """``pipeline <date time> config <hash>``: the parent run of one pipeline invocation."""
    import os
    import time

    return (f"pipeline {time.strftime('%Y-%m-%d %H:%M:%S')} "
            f"config {os.environ.get(CONFIG_HASH_ENV) or '?'}")


def _pipeline_parent(client, exp_id: str, name: str, starts, ends) -> str:
    """One parent run for this pipeline invocation (its span: first start to last end)."""
    import time

    now = int(time.time() * 1000)
    tags = {KIND_TAG: "pipeline", **provenance_tags()}
    run = client.create_run(exp_id, start_time=min(starts, default=now), tags=tags,
                            run_name=name)
    client.set_terminated(run.info.run_id, status="FINISHED", end_time=max(ends, default=now))
    return run.info.run_id


def import_runs(uri: str, experiment: str, run_dirs, parent_name: str | None = None
                ) -> list[dict]:
    """Import finished run folders; returns one record per folder (key, run_id, action).

    With ``parent_name``, a parent run of that name is created and every listed run (imported
    now or unchanged) becomes its child; pipeline parents left without children are deleted, so
    the MLflow UI shows one parent per pipeline invocation with the runs of its config."""
    exp_id = init_store(uri, experiment)
    client = _client(uri)
    # A run folder is (key, its absolute path): two checkouts importing into one store keep
    # their own runs (a key alone made the second import delete the first's runs).
    existing: dict[tuple, list] = {}
    for r in _all_runs(client, exp_id):
        k = r.data.tags.get(KEY_TAG)
        if k:
            existing.setdefault((k, r.data.tags.get("run_folder")), []).append(r)
    dirs = []
    for d in run_dirs:
        d = Path(d)
        if d.name == "final.json":
            d = d.parent
        if not (d / "final.json").is_file():
            raise FileNotFoundError(f"{d}: no final.json (run not finished)")
        dirs.append(d)
    parent_id = None
    if parent_name:
        finals = [_read_json(d / "final.json") for d in dirs]
        parent_id = _pipeline_parent(
            client, exp_id, parent_name,
            [int(f["started_at"] * 1000) for f in finals if f.get("started_at")],
            [int(f["finished_at"] * 1000) for f in finals if f.get("finished_at")])
    out = []
    for d in dirs:
        key, digest = run_folder_key(d), content_hash(d)
        old = existing.get((key, str(d.resolve())), [])
        same = [r for r in old if r.data.tags.get(HASH_TAG) == digest]
        if same and len(old) == 1:
            if parent_id:
                client.set_tag(same[0].info.run_id, "mlflow.parentRunId", parent_id)
            out.append({"key": key, "run_id": same[0].info.run_id, "action": "unchanged"})
            continue
        for r in old:
            client.delete_run(r.info.run_id)
        rid = _import_one(client, exp_id, d, key, digest, parent_id)
        out.append({"key": key, "run_id": rid, "action": "replaced" if old else "created"})
        print(f"mlflow: {out[-1]['action']} {key} -> run {rid}", flush=True)
    if parent_id:
        _delete_childless_parents(client, exp_id, keep=parent_id)
    return out


def _delete_childless_parents(client, exp_id: str, keep: str) -> None:
    runs = list(_all_runs(client, exp_id))
    parents = {r.data.tags.get("mlflow.parentRunId") for r in runs}
    for r in runs:
        if r.data.tags.get(KIND_TAG) == "pipeline" and r.info.run_id != keep \
                and r.info.run_id not in parents:
            client.delete_run(r.info.run_id)


def _all_runs(client, exp_id: str):
    token = None
    while True:
        page = client.search_runs([exp_id], max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            break


def search_runs(uri: str, experiment: str):
    """The active run-folder runs of the experiment (not the pipeline parents) as a pandas
    DataFrame (``mlflow.search_runs``)."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    df = mlflow.search_runs(experiment_names=[experiment], max_results=100000)
    if len(df) and f"tags.{KEY_TAG}" in df.columns:
        df = df[df[f"tags.{KEY_TAG}"].notna()].reset_index(drop=True)
    return df
