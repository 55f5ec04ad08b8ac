"""Time-to-error figure of the GPU races: test error against fit seconds, one curve per method.

Reads the ``curve`` column of ``gpu.py``'s CSVs (``gpu-scale-*.csv``: the 10^7-row generated
problem; ``gpu-deformed-*.csv``: deformed Fashion-MNIST) and, optionally, earlier curves
already in long form (``--long``: columns call, data, estimator, fit_s, passes, test_error_pct,
gpu_peak_mib). Writes one long CSV and one figure (a panel per data set) with the Bayes error
and Bayes + 0.5 point (generated data) or a reference error (``--reference``) as lines.

    python benchmarks/gpu_curves.py \\
        --scale "session 2=benchmarks/results/gpu-scale-2026-11-26-h200-s2.csv" \\
        --deformed "session 2=benchmarks/results/gpu-deformed-2026-11-26-h200-s2.csv" \\
        --long "session 1=benchmarks/results/gpu-curves-2026-11-26-h200.csv" \\
        --reference "SVC C=10 on the plain 60k=11.31" --out benchmarks/results/gpu-curves-10m
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

SCALE, DEFORMED = "10M bayes d=20", "deformed Fashion-MNIST 1M"


def _label(row: dict) -> str:
    chosen = json.loads(row.get("chosen") or "{}")
    name = row["estimator"]
    if "n_components_" in chosen:
        name += f", D = {chosen['n_components_']:,}"
    return name


def read_curves(spec: str, data: str) -> tuple[list[dict], float | None]:
    """Rows of one ``gpu.py`` CSV given as ``CALL=PATH``; the Bayes error where recorded."""
    call, path = spec.split("=", 1)
    rows, bayes = [], None
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get("bayes_error"):
                bayes = float(r["bayes_error"])
            for fit_s, passes, err, peak in json.loads(r["curve"]):
                rows.append(dict(call=call, data=data, estimator=_label(r), fit_s=fit_s,
                                 passes=passes, test_error_pct=round(100 * err, 3),
                                 gpu_peak_mib=peak))
    return rows, bayes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", nargs="*", default=[], metavar="CALL=CSV")
    p.add_argument("--deformed", nargs="*", default=[], metavar="CALL=CSV")
    p.add_argument("--long", nargs="*", default=[], metavar="[SESSION=]CSV",
                   help="earlier curves in long form")
    p.add_argument("--reference", default=None, metavar="LABEL=ERROR_PCT",
                   help="a reference error for the deformed panel")
    p.add_argument("--out", required=True, help="output prefix (.csv and .png are added)")
    args = p.parse_args(argv)
    rows, bayes = [], None
    for spec in args.scale:
        r, b = read_curves(spec, SCALE)
        rows += r
        bayes = b if b is not None else bayes
    for spec in args.deformed:
        rows += read_curves(spec, DEFORMED)[0]
    for spec in args.long:  # [SESSION=]PATH; their EigenPro-RF had the former 2,000 features
        session, _, path = spec.rpartition("=")
        with open(path) as f:
            rows += [dict(r, call=f"{session}, {r['call']}" if session else r["call"],
                          estimator=r["estimator"] + (", D = 2,000" if r["estimator"]
                                                      == "eigenpro_rf" else ""))
                     for r in csv.DictReader(f)]
    out = Path(args.out)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, ["call", "data", "estimator", "fit_s", "passes", "test_error_pct",
                               "gpu_peak_mib"])
        w.writeheader()
        w.writerows(rows)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datas = [d for d in (SCALE, DEFORMED) if any(r["data"] == d for r in rows)]
    fig, axes = plt.subplots(1, len(datas), figsize=(6.5 * len(datas), 4.5), squeeze=False)
    for ax, data in zip(axes[0], datas, strict=True):
        curves: dict[tuple[str, str], list] = {}
        for r in rows:
            if r["data"] == data:
                curves.setdefault((r["estimator"], r["call"]), []).append(
                    (float(r["fit_s"]), float(r["test_error_pct"])))
        for (name, call), pts in curves.items():
            pts.sort()
            ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=f"{name} ({call})")
        if data == SCALE and bayes is not None:
            ax.axhline(100 * bayes, color="k", lw=1, label=f"Bayes {100 * bayes:.2f} %")
            ax.axhline(100 * bayes + 0.5, color="k", lw=1, ls="--", label="Bayes + 0.5")
        if data == DEFORMED and args.reference:
            label, value = args.reference.rsplit("=", 1)
            ax.axhline(float(value), color="k", lw=1, ls="--", label=label)
        ax.set(title=data, xlabel="fit seconds (reading the data included)",
               ylabel="test error %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')} ({len(rows)} points)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
