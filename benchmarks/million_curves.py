"""Time-to-error figure of the 10^6-row CPU runs (issue 21, point 4): a panel per data set.

Reads the pipeline's per-segment metrics gathered in ``million-cpu-*.csv`` (columns dataset,
algorithm, step, time_s, test_error, ...) and, optionally, the DSG family's four-pass runs of
``dsg-scale-1e6.csv`` (columns variant, fit_s, test_error, bayes_error; generator ``bayes``).
Draws the Bayes error of ``bayes_1m`` and a reference error per data set as lines.

    python benchmarks/million_curves.py benchmarks/results/million-cpu-2026-11-26.csv \\
        --dsg-scale benchmarks/results/dsg-scale-1e6.csv \\
        --reference "bayes_1m=Bayes=8.81" "fmnist_deformed_1m=SVC C=10 on the plain 60k=11.31" \\
        --rename "eigenpro_rf_1m=eigenpro_rf_1m (former D = 2,000)" \\
        --out benchmarks/results/million-cpu-2026-11-26.png
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def read_curves(path: str, dsg_scale: str | None) -> dict[str, dict[str, list]]:
    """{dataset: {method: [(seconds, error %), ...]}} from the two CSV layouts."""
    curves: dict[str, dict[str, list]] = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            curves.setdefault(r["dataset"], {}).setdefault(r["algorithm"], []).append(
                (float(r["time_s"]), 100 * float(r["test_error"])))
    if dsg_scale:
        with open(dsg_scale) as f:
            for r in csv.DictReader(f):
                if int(r["n"]) == 1_000_000:  # the generator of bayes_1m, outside the pipeline
                    curves.setdefault("bayes_1m", {}).setdefault(
                        f"{r['variant']} (dsg-scale-1e6)", []).append(
                        (float(r["fit_s"]), 100 * float(r["test_error"])))
    return curves


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", help="million-cpu-*.csv")
    p.add_argument("--dsg-scale", default=None, help="dsg-scale-1e6.csv")
    p.add_argument("--reference", nargs="*", default=[], metavar="DATASET=LABEL=ERROR_PCT")
    p.add_argument("--rename", nargs="*", default=[], metavar="ALGORITHM=LABEL",
                   help="legend labels, e.g. for runs made before a default changed")
    p.add_argument("--out", required=True, help="the .png to write")
    args = p.parse_args(argv)
    curves = read_curves(args.csv, args.dsg_scale)
    rename = dict(spec.split("=", 1) for spec in args.rename)
    refs = {}
    for spec in args.reference:
        data, rest = spec.split("=", 1)
        label, value = rest.rsplit("=", 1)
        refs.setdefault(data, []).append((label, float(value)))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(6.5 * len(curves), 4.5), squeeze=False)
    for ax, (data, methods) in zip(axes[0], sorted(curves.items()), strict=True):
        for name, pts in sorted(methods.items()):
            pts.sort()
            ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=rename.get(name, name))
        for label, value in refs.get(data, []):
            ax.axhline(value, color="k", lw=1, ls="--", label=f"{label} {value:.2f} %")
        ax.set(title=f"{data}, one CPU core", xlabel="fit seconds (log scale)",
               ylabel="test error %", xscale="log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(Path(args.out), dpi=120)
    print(f"wrote {args.out} ({sum(len(m) for m in curves.values())} curves)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
