"""Issue 20 point 4: DSG-family prediction time against fit time as blocks accumulate.

make_classification (50,000 x 20, 10 informative, standardized): 40,000 train / 10,000 test
rows, estimator defaults (B = F = 256), warm-started segments of 50 iterations:

    python benchmarks/dsg_predict_cost.py
"""

import time

from sklearn.datasets import make_classification

from kernelscale.estimators.dsg import DSGClassifier


def main():
    X, y = make_classification(n_samples=50000, n_features=20, n_informative=10, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    Xtr, ytr, Xte = X[:40000], y[:40000], X[40000:]
    print("| variant | iterations | blocks | fit s (cumulative) | predict 10k rows s | predict / fit |")
    print("|---|---|---|---|---|---|")
    for variant in ("dsg", "udsg", "cdsg"):
        est = DSGClassifier(variant=variant, n_iter=50, warm_start=True, random_state=0)
        fit = 0.0
        for _ in range(4):
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            fit += time.perf_counter() - t
            t = time.perf_counter()
            est.predict(Xte)
            pred = time.perf_counter() - t
            print(f"| {variant} | {est.solver_.t} | {est.solver_.model.n_blocks} | {fit:.1f} | "
                  f"{pred:.2f} | {pred / fit:.3f} |", flush=True)


if __name__ == "__main__":
    main()
