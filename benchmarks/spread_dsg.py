"""Issue 22, point 3: DSG with its batches spread over dask worker processes, against in-process.

Generated data (``pipeline.data.bayes``, d = 20, a known Bayes error) written to zarr; a DSG
classifier with a large batch is fitted for ``--warm`` iterations (not timed: blocks accumulate),
then ``--iters`` more are timed, in each setting:

* ``in-process, 1 thread`` / ``in-process, 2 threads``: no dask client (BLAS threads set);
* ``spread, W workers``: a LocalCluster of W single-threaded worker processes (TCP between
  them and the client), the fit inside ``use_client``.

Recorded: seconds per timed iteration, the array bytes sent to / received from the workers per
iteration (``spread_``), and the test error (the same model in every setting, to rounding).

    python benchmarks/spread_dsg.py --n 1000000 --out benchmarks/results/spread-dsg-1e6.csv
    python benchmarks/spread_dsg.py --model     # the cost model's table for 1-64 nodes

Cost model (``--model``): a step at t blocks costs the workers, together,
rows = B t F (2 d + 2 C + c_cos) + 2 B F^2 [block Newton only] flop-equivalents (f over t blocks,
the new block's products), split W ways; the client receives W answers of (F C + F^2 [Newton])
words over one link of bandwidth beta, sends W updates of F C words, waits 2 round trips, and
solves one F x F system (F^3 / 3). T(W) = rows / (W R) + W bytes / beta + 2 latency + client.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np

D = 20


def cost_model(n=10_000_000, d=20, C=1, F=4096, B=50_596, t=400, R=1e12, beta=1.25e9,
               latency=1e-3, client_rate=5e11, c_cos=20.0, word=4):
    """Rows of (W, newton, rows_s, comm_s, client_s, step_s, speed-up) for W = 1..64 (see the
    module docstring); defaults: the 10^7-row "auto" sizes mid-run, a node of R = 1 TFLOP/s,
    10 GbE into the client."""
    out = []
    for newton in (True, False):
        rows = B * t * F * (2 * d + 2 * C + c_cos) + (2 * B * F * F if newton else 0)
        back = (F * C + (F * F if newton else 0)) * word
        client = (F ** 3 / 3 if newton else 2 * F * F * C) / client_rate
        base = rows / R + back / beta + 2 * latency + client
        for W in (1, 2, 4, 8, 16, 32, 64):
            comm = W * (back + F * C * word) / beta + 2 * latency
            step = rows / (W * R) + comm + client
            out.append(dict(W=W, step="block Newton (classification)" if newton else
                            "EigenPro step (regression)", rows_s=rows / (W * R), comm_s=comm,
                            client_s=client, step_s=step, speedup=base / step))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--block-size", type=int, default=1024)
    p.add_argument("--warm", type=int, default=40, help="untimed iterations first")
    p.add_argument("--iters", type=int, default=10, help="timed iterations")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--out", default="benchmarks/results/spread-dsg.csv")
    p.add_argument("--method", choices=["dsg", "nystrom", "rb_cg"], default="dsg",
                   help="nystrom / rb_cg: whole fits timed (their chunked products on the "
                        "workers), at --n-components")
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--model", action="store_true", help="print the cost model's table and stop")
    args = p.parse_args(argv)
    if args.model:
        print("| step | W | rows s | comm s | client s | step s | speed-up |")
        print("|---|---|---|---|---|---|---|")
        for r in cost_model():
            print(f"| {r['step']} | {r['W']} | {r['rows_s']:.3f} | {r['comm_s']:.3f} | "
                  f"{r['client_s']:.3f} | {r['step_s']:.3f} | {r['speedup']:.1f}x |")
        return 0

    from dsg_scale import write_zarr
    from threadpoolctl import threadpool_limits

    from kernelscale.distributed import client_for, use_client
    from kernelscale.estimators import DSGClassifier
    from kernelscale.pipeline.data.bayes import bayes_params, bayes_rows

    params = bayes_params(args.n + 20_000, n_features=D, noise=0.3)
    Xt, yt = bayes_rows(params, args.n, args.n + 20_000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        X, y = write_zarr(params, args.n, Path(tmp) / "data.zarr")
        y = y[:]
        kw = dict(batch_size=args.batch_size, block_size=args.block_size, random_state=0,
                  warm_start=True, engine={"dtype": "float32"})

        def run_whole(setting, client=None, threads=1):
            from kernelscale.estimators import NystromRidgeClassifier, RBClassifier

            est = (NystromRidgeClassifier(n_components=args.n_components, random_state=0)
                   if args.method == "nystrom" else
                   RBClassifier(n_components=args.n_components, random_state=0))
            with threadpool_limits(threads):
                t = time.perf_counter()
                if client is None:
                    est.fit(X, y)
                else:
                    with use_client(client):
                        est.fit(X, y)
                sec = time.perf_counter() - t
            row = dict(setting=setting, method=args.method, n=args.n,
                       n_components=args.n_components, fit_s=round(sec, 2),
                       test_error=float(np.mean(est.predict(Xt) != yt)))
            spread = getattr(est, "spread_", None)  # RB-CG: its CG products' traffic
            if spread and spread.get("round_trips"):
                row.update(round_trips=spread["round_trips"],
                           bytes_per_round_trip=(spread["bytes_sent"] + spread["bytes_received"])
                           // spread["round_trips"])
            print(row, flush=True)
            rows.append(row)

        def run(setting, client=None, threads=1):
            if args.method != "dsg":
                return run_whole(setting, client, threads)
            est = DSGClassifier(n_iter=args.warm, **kw)
            with threadpool_limits(threads):
                if client is None:
                    est.fit(X, y)
                    t = time.perf_counter()
                    est.set_params(n_iter=args.iters).fit(X, y)
                    sec = time.perf_counter() - t
                else:
                    with use_client(client):
                        est.fit(X, y)
                        t = time.perf_counter()
                        est.set_params(n_iter=args.iters).fit(X, y)
                        sec = time.perf_counter() - t
            s = getattr(est, "spread_", None) or {}
            row = dict(setting=setting, n=args.n, batch_size=args.batch_size,
                       block_size=args.block_size, blocks_at_start=args.warm,
                       timed_iterations=args.iters, s_per_iteration=round(sec / args.iters, 4),
                       bytes_sent_per_iteration=s.get("bytes_sent", 0) / args.iters,
                       bytes_received_per_iteration=s.get("bytes_received", 0) / args.iters,
                       test_error=float(np.mean(est.predict(Xt) != yt)))
            print(row, flush=True)
            rows.append(row)

        run("in-process, 1 thread", threads=1)
        run("in-process, 2 threads", threads=2)
        for W in args.workers:
            client = client_for(None, n_workers=W, processes=True)
            try:
                run(f"spread, {W} worker process{'es' if W > 1 else ''}", client=client)
            finally:
                client.close()
                client.cluster.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
