"""MLflow import of run folders (see ``train_run``), idempotent.

Training jobs never talk to MLflow: they write run folders. One job creates the tracking store
(``init_store``: a fresh SQLite database must not be created by several processes at once), then one
job imports every finished run folder (``import_runs``): params, per-step metrics with their steps
and wall-clock timestamps (``log_batch``), final metrics and the folder's files as artifacts.

Each MLflow run is tagged with its run-folder key (``dataset/algorithm/seedN``) and a content hash;
importing again skips runs whose hash is unchanged and replaces runs whose folder changed, so there
is never more than one MLflow run per run folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path

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
        return exp.experiment_id
    return client.create_experiment(experiment, artifact_location=artifact_root_for(uri))


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
                    if k in ("step", "timestamp_ms"):
                        continue
                    x = _num(v)
                    if x is not None:
                        steps.append((k, x, ts, step))
    return params, steps, final


def _import_one(client, exp_id: str, run_dir: Path, key: str, digest: str) -> str:
    from mlflow.entities import Metric, Param

    params, steps, final = run_records(run_dir)
    finished_ms = int(float(final.get("finished_at", 0)) * 1000)
    start_ms = min([s[2] for s in steps if s[2]] or [finished_ms])
    # HASH_TAG is set last, after everything else is logged: an import killed half-way leaves a
    # run without it, which the next import replaces instead of calling it "unchanged"
    tags = {KEY_TAG: key, "dataset": str(final.get("dataset")),
            "algorithm": str(final.get("algorithm")), "seed": str(final.get("seed")),
            "device": str(final.get("device")), "metric": str(final.get("metric")),
            "run_folder": str(Path(run_dir).resolve())}
    run = client.create_run(exp_id, start_time=start_ms, tags=tags, run_name=key)
    rid = run.info.run_id
    flat = {k: v for k, v in _flatten(params).items() if k not in ("params",)}
    plist = [Param(k, v) for k, v in flat.items()]
    metrics = [Metric(k, v, ts, step) for k, v, ts, step in steps]
    for k, v in final.items():
        x = _num(v) if not isinstance(v, bool) else None
        if x is not None and k not in ("finished_at", "seed"):
            metrics.append(Metric(f"final.{k}", x, finished_ms, int(final.get("segments") or 0)))
    for i in range(0, max(len(plist), 1), 100):
        client.log_batch(rid, params=plist[i:i + 100])
    for i in range(0, len(metrics), _BATCH):
        client.log_batch(rid, metrics=metrics[i:i + _BATCH])
    for p in sorted(Path(run_dir).iterdir()):
        if p.is_file() and p.name not in ARTIFACT_SKIP and not p.name.endswith(".tmp"):
            client.log_artifact(rid, str(p))
    client.set_terminated(rid, status="FINISHED", end_time=finished_ms or None)
    client.set_tag(rid, HASH_TAG, digest)  # last: marks the run complete
    return rid


def import_runs(uri: str, experiment: str, run_dirs) -> list[dict]:
    """Import finished run folders; returns one record per folder (key, run_id, action)."""
    exp_id = init_store(uri, experiment)
    client = _client(uri)
    # A run folder is (key, its absolute path): two checkouts importing into one store keep
    # their own runs (a key alone made the second import delete the first's runs).
    existing: dict[tuple, list] = {}
    for r in _all_runs(client, exp_id):
        k = r.data.tags.get(KEY_TAG)
        if k:
            existing.setdefault((k, r.data.tags.get("run_folder")), []).append(r)
    out = []
    for d in run_dirs:
        d = Path(d)
        if d.name == "final.json":
            d = d.parent
        if not (d / "final.json").is_file():
            raise FileNotFoundError(f"{d}: no final.json (run not finished)")
        key, digest = run_folder_key(d), content_hash(d)
        old = existing.get((key, str(d.resolve())), [])
        same = [r for r in old if r.data.tags.get(HASH_TAG) == digest]
        if same and len(old) == 1:
            out.append({"key": key, "run_id": same[0].info.run_id, "action": "unchanged"})
            continue
        for r in old:
            client.delete_run(r.info.run_id)
        rid = _import_one(client, exp_id, d, key, digest)
        out.append({"key": key, "run_id": rid, "action": "replaced" if old else "created"})
        print(f"mlflow: {out[-1]['action']} {key} -> run {rid}", flush=True)
    return out


def _all_runs(client, exp_id: str):
    token = None
    while True:
        page = client.search_runs([exp_id], max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            break


def search_runs(uri: str, experiment: str):
    """All active runs of the experiment as a pandas DataFrame (``mlflow.search_runs``)."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=[experiment], max_results=100000)
