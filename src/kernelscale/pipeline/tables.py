"""Comparison tables from the tracking store (``mlflow.search_runs``).

``summary_table``: one row per dataset x algorithm x seed (columns ``COLUMNS``: the final test
metric, error for classification and RMSE for regression, fit and predict time, the method's peak
memory, model size, ``at_baseline``, what "auto" chose: ``bandwidth``, ``reg``, ``n_features`` =
random features / centres / non-empty bins, ``iterations``), then per dataset the reference rows.
``aggregate_table``: mean ± std over seeds; ``wide_table``: algorithms x datasets.
``write_tables(..., run_ids=...)`` keeps only the runs the import job listed (``imported.json``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from .registry import EXACT_KERNEL

BASELINE = "trivial baseline"
EXACT_PREFIX = "best exact kernel"
COLUMNS = ["dataset", "algorithm", "estimator", "seed", "metric", "value", "at_baseline",
           "test_accuracy", "test_r2", "train_time_s", "predict_time_s", "peak_mem_mb",
           "model_size_mb", "bandwidth", "reg", "l1_reg", "n_features", "iterations",
           "baseline_value",
           "n_train", "d", "device", "run_id"]
FINAL_COLUMNS = ("value", "test_accuracy", "test_r2", "train_time_s", "predict_time_s",
                 "peak_mem_mb", "model_size_mb", "baseline_value")  # metrics.final.*
AGGREGATES = {"seeds": ("seed", "count"), "value_mean": ("value", "mean"),  # aggregate_table
              "value_std": ("value", "std"), "at_baseline": ("at_baseline", "any"),
              "train_time_s_mean": ("train_time_s", "mean"),
              "predict_time_s_mean": ("predict_time_s", "mean"),
              "peak_mem_mb_max": ("peak_mem_mb", "max"),
              "model_size_mb_mean": ("model_size_mb", "mean")}
WIDE_QUANTITIES = (("value_mean", None), ("train_time_s_mean", "fit s"),  # None: the metric
                   ("predict_time_s_mean", "predict s"), ("model_size_mb_mean", "size MB"))


def run_ids_from_import(path) -> dict[str, str]:
    """MLflow run id -> run-folder key of an import record (``kernelscale track --out``): the
    config's runs."""
    return {r["run_id"]: r["key"] for r in json.loads(Path(path).read_text())["runs"]}


def best_exact_kernel(results: Iterable[Mapping]) -> Mapping | None:
    """The result with the lowest ``value`` (test error, or RMSE: lower is better) among those
    whose ``estimator`` is an exact kernel machine (``registry.EXACT_KERNEL``), or None when no
    exact-kernel estimator has a finite value. ``results``: run records of one dataset (a run's
    final.json, or a summary-table row as a dict). The tables' reference row and the plots'
    reference line both come from here."""
    exact = [r for r in results if r.get("estimator") in EXACT_KERNEL and _finite(r.get("value"))]
    return min(exact, key=lambda r: float(r["value"]), default=None)


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):  # None, pd.NA, a string
        return False


def exact_kernel_label(algorithm: str) -> str:
    """The label of the best exact-kernel result, e.g. ``best exact kernel (exact_krr)``."""
    return f"{EXACT_PREFIX} ({algorithm})"


def is_reference(algorithm) -> bool:
    """True for the reference rows (trivial baseline, best exact kernel), which are not runs."""
    return algorithm == BASELINE or str(algorithm).startswith(EXACT_PREFIX)


def _flag(v) -> bool:
    return str(v).strip().lower() in ("true", "1", "1.0")


def summary_table(runs: pd.DataFrame, run_ids=None) -> pd.DataFrame:
    """Flatten an ``mlflow.search_runs`` frame of imported runs into the summary table (only the
    runs in ``run_ids`` when given), with per dataset the best exact-kernel run as a reference
    row (when one ran; a copy of that run's row, labelled ``exact_kernel_label``) and a
    trivial-baseline row."""
    if runs is not None and run_ids is not None and len(runs):
        runs = runs[runs["run_id"].isin(set(run_ids))]
    if runs is None or len(runs) == 0:
        return pd.DataFrame(columns=COLUMNS)

    def col(*names, default=None):  # newer imports' names first, then older ones'
        name = next((n for n in names if n in runs.columns), None)
        return runs[name] if name else pd.Series([default] * len(runs), index=runs.index)

    def num(*names):
        return pd.to_numeric(col(*names), errors="coerce")

    df = pd.DataFrame({
        "dataset": col("tags.dataset"),
        "algorithm": col("tags.algorithm"),
        # the registry's name; imports of older versions lack it: the algorithm's own name
        "estimator": col("params.estimator").fillna(col("tags.algorithm")),
        "seed": num("tags.seed").astype("Int64"),
        "metric": col("tags.metric"),
        "at_baseline": col("tags.at_baseline", default="False").map(_flag),
        **{c: num(f"metrics.final.{c}") for c in FINAL_COLUMNS},
        **{c: num(f"params.chosen.{c}") for c in ("bandwidth", "reg", "l1_reg")},
        # RFF and Nystrom: n_components; Random Binning: its non-empty bins; DSG: blocks x size
        "n_features": num("params.chosen.n_components").fillna(num("params.chosen.n_features_out"))
        .fillna(num("metrics.n_blocks") * num("params.chosen.block_size")).astype("Int64"),
        "iterations": num("params.chosen.iterations").astype("Int64"),
        "n_train": num("params.n_train", "metrics.final.n_train").astype("Int64"),
        "d": num("params.d", "metrics.final.d").astype("Int64"),
        "device": col("tags.device"),
        "run_id": col("run_id"),
    })
    rows = []
    for (dataset, metric), g in df.groupby(["dataset", "metric"], dropna=False):
        best = best_exact_kernel(g.to_dict("records"))
        if best is not None:
            rows.append({**best, "algorithm": exact_kernel_label(best["algorithm"])})
        b = g["baseline_value"].dropna()
        if len(b):  # the same for every run of a dataset: computed from its prepared labels
            rows.append({"dataset": dataset, "algorithm": BASELINE, "metric": metric,
                         "value": float(b.iloc[0]), "at_baseline": True,
                         "baseline_value": float(b.iloc[0]),
                         "n_train": g["n_train"].iloc[0], "d": g["d"].iloc[0]})
    if rows:
        df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
    for c in ("seed", "n_features", "iterations"):  # counts stay integers beside the NA rows
        df[c] = df[c].astype("Int64")
    df["at_baseline"] = df["at_baseline"].astype(bool)
    # within each dataset: the runs, then the best exact kernel, then the trivial baseline
    df["_ref"] = df["algorithm"].map(lambda a: 2 if a == BASELINE else int(is_reference(a)))
    df = df.sort_values(["dataset", "_ref", "algorithm", "seed"]).drop(columns="_ref")
    return df.reset_index(drop=True)[COLUMNS]


def aggregate_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per dataset x algorithm (``at_baseline``: any seed at it)."""
    keys = ["dataset", "algorithm", "metric"]
    if len(summary) == 0:
        return pd.DataFrame(columns=keys + list(AGGREGATES))
    return summary.groupby(keys, dropna=False, sort=False).agg(**AGGREGATES).reset_index()


def wide_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Algorithms in rows; per dataset its error (mean over seeds; RMSE for regression), fit
    time, predict time and model size in columns named ``dataset: quantity``. A value at the
    trivial baseline is kept as a number; ``at_baseline`` columns say which. The reference rows
    come last: the best exact kernel (one row per algorithm that was best on some dataset,
    empty on the others), then the trivial baseline."""
    agg = aggregate_table(summary)
    if len(agg) == 0:
        return pd.DataFrame(columns=["algorithm"])
    names = list(dict.fromkeys(agg["algorithm"]))
    order = [a for a in names if not is_reference(a)] \
        + [a for a in names if is_reference(a) and a != BASELINE] + [BASELINE]
    out = pd.DataFrame({"algorithm": order})
    for dataset, g in agg.groupby("dataset", sort=True):
        g = g.set_index("algorithm")
        metric = str(g["metric"].iloc[0]).replace("test_", "")
        for q, label in WIDE_QUANTITIES:
            out[f"{dataset}: {label or metric}"] = out["algorithm"].map(g[q])
        out[f"{dataset}: at_baseline"] = out["algorithm"].map(g["at_baseline"])
    return out


def _markdown(df: pd.DataFrame) -> str:
    if len(df) == 0:
        return "_no runs_\n"
    df = df.astype(object).where(df.notna(), None)  # nan and <NA> as blanks (missingval)
    return df.to_markdown(index=False, floatfmt=".4g", missingval="") + "\n"


def _wide_markdown(wide: pd.DataFrame) -> str:
    """The wide table with a ⚠ after every error at the trivial baseline (flag columns folded
    in: a table a paper can take)."""
    if wide.shape[1] <= 1:
        return "_no runs_\n"
    show = pd.DataFrame({"algorithm": wide["algorithm"]})
    seen: set[str] = set()
    for c in wide.columns[1:]:
        dataset = c.split(": ")[0]
        if c.endswith(": at_baseline"):
            continue
        col = wide[c].map(lambda v: "" if pd.isna(v) else f"{v:.4g}")
        if dataset not in seen:  # a dataset's first column is its error (wide_table's order)
            seen.add(dataset)
            marks = (wide[f"{dataset}: at_baseline"].fillna(False).astype(bool)
                     & (wide["algorithm"] != BASELINE))
            col = col.where(~marks, col + " ⚠")
        show[c] = col
    return show.to_markdown(index=False) + "\n"


def write_tables(runs: pd.DataFrame, csv_path, md_path, run_ids=None,
                 wide_csv_path=None) -> pd.DataFrame:
    """Write ``summary.csv`` (long: one row per run + baseline rows), ``summary.md`` (the wide
    table, then the long one, then the mean over seeds) and, when asked, the wide table as CSV.
    The long table leaves out the columns that no row has a value in."""
    summary = summary_table(runs, run_ids)
    csv_path, md_path = Path(csv_path), Path(md_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    # a column no row has a value in (R² of a classification-only config): left out
    long = summary.drop(columns=[c for c in summary if summary[c].isna().all() and len(summary)])
    long.to_csv(csv_path, index=False)
    wide = wide_table(summary)
    if wide_csv_path is not None:
        wide.to_csv(wide_csv_path, index=False)
    flagged = summary[summary["at_baseline"] & ~summary["algorithm"].map(is_reference)]
    warn = "".join(f"* **{r.dataset}/{r.algorithm}/seed{r.seed}** is at the trivial baseline "
                   f"({r.metric} {r.value:.4g} vs {r.baseline_value:.4g})\n"
                   for r in flagged.itertuples())
    text = ("# Summary\n\n"
            "Error = final test error (classification) or RMSE (regression), lower is better; "
            "fit and predict times in seconds (predict: the whole test set), model size in MB "
            "(pickled). `best exact kernel (...)`: the exact-kernel run (exact kernel ridge, "
            "LIBSVM) with the lowest error on the dataset, when one ran. "
            "`trivial baseline`: majority class / mean of the training labels. "
            "⚠ / `at_baseline`: not 2 % better than the trivial baseline.\n\n"
            + (warn + "\n" if warn else "")
            + "## Algorithms x datasets (mean over seeds)\n\n" + _wide_markdown(wide)
            + "\n## One row per dataset x algorithm x seed\n\n"
            + _markdown(long.drop(columns=["run_id"], errors="ignore"))
            + "\n## Mean over seeds\n\n" + _markdown(aggregate_table(summary)))
    md_path.write_text(text)
    return summary
