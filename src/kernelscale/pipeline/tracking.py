"""MLflow import of run folders (see ``train_run``), idempotent.

Training jobs never talk to MLflow: they write run folders. One job creates the tracking store
(``init_store``), then one job imports every finished run folder (``import_runs``). Each MLflow run
gets:

* its start and end time: ``final.json``'s ``started_at`` / ``finished_at``;
* params: ``params.json`` (estimator parameters as ``params.*``), the run's constants from
  ``final.json`` (``n_train``, ``n_test``, ``d``, ``segments``, ``n_iter``, host, version, ...) and
  what the estimator chose for its "auto" settings as ``chosen.<name>``;
* metrics: per segment (``step`` = segment, with its timestamp) the test metrics, ``objective``,
  ``iter`` and ``time_s``; the solver's history as ``history.*`` (``step`` = iteration);
  ``final.*`` for the final numbers; ``system_metrics.csv`` as ``system/<name>``; all through
  batched ``log_batch`` calls;
* the fitted estimator as an MLflow model (``mlflow.sklearn``; ``runs:/<run id>/model``);
* the prepared dataset as an input (name, path, digest of its ``meta.json``);
* tags: ``dataset``, ``algorithm``, ``seed``, ``device``, ``metric``, ``at_baseline``, and the git
  commit and config hash passed in the environment (``KERNELSCALE_GIT_COMMIT``,
  ``KERNELSCALE_CONFIG_HASH``);
* with ``parent_name``, a parent run (one per import job) holding the config's runs as children.

Each MLflow run is tagged with its run-folder key (``dataset/algorithm/seedN``), the folder's
absolute path and a content hash, set last; importing again skips runs whose hash is unchanged and
replaces the others, so there is at most one MLflow run per run folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import os
import pickle
import time
import warnings
from pathlib import Path

from .system_metrics import read_rows

KEY_TAG = "kernelscale.run_key"
HASH_TAG = "kernelscale.content_hash"
HASHED_FILES = ("final.json", "metrics.csv", "params.json")
ARTIFACT_SKIP = ("checkpoint.pkl",)
_BATCH = 900  # log_batch accepts at most 1000 metrics per call
FINAL_METRICS = ("value", "objective", "train_time_s", "eval_time_s", "predict_time_s",
                 "peak_mem_mb", "peak_rss_mb", "model_size_mb", "baseline_value")
STEP_PARAMS = ("test_rows",)  # per-segment columns that are settings, not measurements
HISTORY_MAX_ROWS = 20000  # longer histories are thinned evenly (the last row always kept)
GIT_ENV, CONFIG_HASH_ENV = "KERNELSCALE_GIT_COMMIT", "KERNELSCALE_CONFIG_HASH"
KIND_TAG = "kernelscale.kind"
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
SQLITE = "sqlite:///"


def artifact_root_for(uri: str) -> str | None:
    """Artifacts of a ``sqlite:///path/mlflow.db`` store go beside it in ``mlartifacts/``."""
    if uri.startswith(SQLITE):
        return (Path(uri[len(SQLITE):]).resolve().parent / "mlartifacts").as_uri()
    return None


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def init_store(uri: str, experiment: str) -> str:
    """Create the tracking store (database tables) and the experiment; returns the experiment id."""
    if uri.startswith(SQLITE):
        Path(uri[len(SQLITE):]).parent.mkdir(parents=True, exist_ok=True)
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


def run_folders(paths) -> list[Path]:
    """The run folders of ``paths``: run folders or their ``final.json``."""
    return [Path(d).parent if Path(d).name == "final.json" else Path(d) for d in paths]


def run_folder_key(run_dir: Path) -> str:
    """``dataset/algorithm/seedN`` from ``.../runs/dataset/algorithm/seedN``."""
    return "/".join(Path(run_dir).resolve().parts[-3:])


def content_hash(run_dir: Path) -> str:
    h = hashlib.sha256()
    for name in HASHED_FILES:
        p = Path(run_dir) / name
        if p.is_file():
            h.update(name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _num(v) -> float | None:
    """``v`` as a finite float, else None (None, "", text, nan, inf)."""
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
                steps += [(k, x, ts, step) for k, v in row.items()
                          if k not in ("step", "timestamp_ms", *STEP_PARAMS)
                          and (x := _num(v)) is not None]
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
        out += [(f"history.{k}", x, ts, step) for k, v in row.items()
                if k != "iter" and (x := _num(v)) is not None]
    return out


def provenance_tags() -> dict[str, str]:
    """Git commit and config hash handed over by the pipeline (environment), as MLflow tags."""
    return {tag: os.environ[env] for tag, env in (("mlflow.source.git.commit", GIT_ENV),
                                                  ("kernelscale.config_hash", CONFIG_HASH_ENV))
            if os.environ.get(env)}


def _log_model(client, rid: str, run_dir: Path) -> str | None:
    """The fitted estimator as an MLflow (sklearn-flavour) model named ``model``; None (and a
    line on stdout) if it cannot be logged: the run keeps ``model.pkl`` as an artifact then."""
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
    tags = {KEY_TAG: key, KIND_TAG: "run",
            **{k: str(final.get(k)) for k in ("dataset", "algorithm", "seed", "device", "metric")},
            "at_baseline": str(bool(final.get("at_baseline"))),
            "run_folder": str(Path(run_dir).resolve()), **provenance_tags(),
            **({"mlflow.parentRunId": parent_id} if parent_id else {})}
    rid = client.create_run(exp_id, start_time=start_ms, tags=tags, run_name=key).info.run_id
    flat = {k: v for k, v in _flatten(params).items() if k not in ("params",)}
    skip = set(FINAL_METRICS) | {"finished_at", "started_at", "at_baseline"}
    for k, v in final.items():  # the run's constants; params.json's value wins
        if k not in skip and (not k.startswith("test_") or k in STEP_PARAMS) and v is not None \
                and not isinstance(v, (dict, list)):
            flat.setdefault(k, str(v))
    if isinstance(final.get("chosen"), dict):  # the values behind params.* = "auto"
        flat.update(_flatten(final["chosen"], "chosen."))
    plist = [Param(k, v) for k, v in flat.items()]
    metrics = [Metric(k, v, ts, step) for k, v, ts, step in
               steps + history_metrics(run_dir, steps, finished_ms)]
    metrics += [Metric(f"system/{k}", v, ts, step) for k, v, ts, step in read_rows(run_dir)]
    last_step = int(final.get("segments") or 0)
    metrics += [Metric(f"final.{k}", x, finished_ms, last_step) for k, v in final.items()
                if (k in FINAL_METRICS or k.startswith("test_")) and k not in STEP_PARAMS
                and not isinstance(v, bool) and (x := _num(v)) is not None]
    for i in range(0, max(len(plist), 1), 100):
        client.log_batch(rid, params=plist[i:i + 100])
    for i in range(0, len(metrics), _BATCH):
        client.log_batch(rid, metrics=metrics[i:i + _BATCH])
    _log_dataset(client, rid, final)
    logged_model = _log_model(client, rid, run_dir)
    # the model's fluent run context ended the run; it is not complete until HASH_TAG is set
    client.update_run(rid, status="RUNNING")
    for p in sorted(Path(run_dir).iterdir()):  # model.pkl: logged as the MLflow model, if it was
        if p.is_file() and p.name not in ARTIFACT_SKIP and not p.name.endswith(".tmp") \
                and not (p.name == "model.pkl" and logged_model):
            client.log_artifact(rid, str(p))
    # after the model (whose fluent run context ends the run "now"): the job's real end time
    client.set_terminated(rid, status="FINISHED", end_time=finished_ms or None)
    # last: an import killed before it leaves a run that the next import replaces
    client.set_tag(rid, HASH_TAG, digest)
    return rid


def pipeline_run_name() -> str:
    """``pipeline <date time> config <hash>``: the parent run of one pipeline invocation."""
    return (f"pipeline {time.strftime('%Y-%m-%d %H:%M:%S')} "
            f"config {os.environ.get(CONFIG_HASH_ENV) or '?'}")


def _pipeline_parent(client, exp_id: str, name: str, dirs) -> str:
    """One parent run for this pipeline invocation (its span: the first start to the last end of
    the run folders ``dirs``)."""
    finals, now = [_read_json(d / "final.json") for d in dirs], int(time.time() * 1000)
    start = min((int(f["started_at"] * 1000) for f in finals if f.get("started_at")), default=now)
    end = max((int(f["finished_at"] * 1000) for f in finals if f.get("finished_at")), default=now)
    rid = client.create_run(exp_id, start_time=start, run_name=name,
                            tags={KIND_TAG: "pipeline", **provenance_tags()}).info.run_id
    client.set_terminated(rid, status="FINISHED", end_time=end)
    return rid


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
    dirs = run_folders(run_dirs)
    for d in dirs:
        if not (d / "final.json").is_file():
            raise FileNotFoundError(f"{d}: no final.json (run not finished)")
    parent_id = _pipeline_parent(client, exp_id, parent_name, dirs) if parent_name else None
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
