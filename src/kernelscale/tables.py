"""Comparison tables from the tracking store (``mlflow.search_runs``).

``summary_table`` gives one row per dataset x algorithm x seed: the final test metric (error for
classification, RMSE for regression, plus accuracy / R²), train time and peak memory.
``aggregate_table`` gives mean ± std over seeds per dataset x algorithm.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

COLUMNS = ["dataset", "algorithm", "seed", "metric", "value", "test_accuracy", "test_r2",
           "train_time_s", "peak_rss_mb", "n_train", "d", "device", "run_id"]


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Flatten an ``mlflow.search_runs`` frame of imported runs into the summary table."""
    if runs is None or len(runs) == 0:
        return pd.DataFrame(columns=COLUMNS)

    def col(name, default=None):
        return runs[name] if name in runs.columns else pd.Series([default] * len(runs),
                                                                  index=runs.index)

    df = pd.DataFrame({
        "dataset": col("tags.dataset"),
        "algorithm": col("tags.algorithm"),
        "seed": pd.to_numeric(col("tags.seed"), errors="coerce").astype("Int64"),
        "metric": col("tags.metric"),
        "value": col("metrics.final.value"),
        "test_accuracy": col("metrics.final.test_accuracy"),
        "test_r2": col("metrics.final.test_r2"),
        "train_time_s": col("metrics.final.train_time_s"),
        "peak_rss_mb": col("metrics.final.peak_rss_mb"),
        "n_train": pd.to_numeric(col("metrics.final.n_train"), errors="coerce").astype("Int64"),
        "d": pd.to_numeric(col("metrics.final.d"), errors="coerce").astype("Int64"),
        "device": col("tags.device"),
        "run_id": col("run_id"),
    })
    return df.sort_values(["dataset", "algorithm", "seed"]).reset_index(drop=True)


def aggregate_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per dataset x algorithm."""
    if len(summary) == 0:
        return pd.DataFrame(columns=["dataset", "algorithm", "metric", "seeds", "value_mean",
                                     "value_std", "train_time_s_mean", "peak_rss_mb_max"])
    g = summary.groupby(["dataset", "algorithm", "metric"], dropna=False)
    out = g.agg(seeds=("seed", "count"), value_mean=("value", "mean"),
                value_std=("value", "std"), train_time_s_mean=("train_time_s", "mean"),
                peak_rss_mb_max=("peak_rss_mb", "max")).reset_index()
    return out


def _markdown(df: pd.DataFrame) -> str:
    if len(df) == 0:
        return "_no runs_\n"
    return df.to_markdown(index=False, floatfmt=".4g") + "\n"


def write_tables(runs: pd.DataFrame, csv_path, md_path) -> pd.DataFrame:
    """Write ``summary.csv`` and ``summary.md`` (per-run table, then mean over seeds)."""
    summary = summary_table(runs)
    csv_path, md_path = Path(csv_path), Path(md_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    summary.to_csv(csv_path, index=False)
    text = ("# Summary: one row per dataset x algorithm x seed\n\n"
            "`value` is the final test `metric` (error for classification, RMSE for regression; "
            "lower is better).\n\n" + _markdown(summary.drop(columns=["run_id"]))
            + "\n## Mean over seeds\n\n" + _markdown(aggregate_table(summary)))
    md_path.write_text(text)
    return summary
