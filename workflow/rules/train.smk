# One job per (dataset, algorithm, seed): fit, evaluate on the test set after each segment,
# checkpoint; a rerun after a kill resumes from results/runs/.../checkpoint.pkl (not an output,
# so Snakemake leaves it in place).


rule train:
    input:
        meta="results/data/{dataset}/meta.json",
    output:
        final="results/runs/{dataset}/{algorithm}/seed{seed}/final.json",
        metrics="results/runs/{dataset}/{algorithm}/seed{seed}/metrics.csv",
        params="results/runs/{dataset}/{algorithm}/seed{seed}/params.json",
        model="results/runs/{dataset}/{algorithm}/seed{seed}/model.pkl",
    params:
        data=lambda wc, input: str(Path(input.meta).parent),
        run_dir=lambda wc, output: str(Path(output.final).parent),
        spec=lambda wc: runs.algorithm_spec_json(config, wc.algorithm),
    log:
        "results/logs/train/{dataset}/{algorithm}/seed{seed}.log",
    threads: lambda wc: runs.train_resources(config, wc.algorithm)["threads"]
    resources:
        mem_mb=lambda wc: runs.train_resources(config, wc.algorithm)["mem_mb"],
        runtime=lambda wc: runs.train_resources(config, wc.algorithm)["runtime"],
        gpu=lambda wc: runs.train_resources(config, wc.algorithm)["gpu"],
    conda:
        lambda wc: provenance.conda_env(config, wc.algorithm, workflow.basedir)
    shell:
        "python -m kernelscale.pipeline.cli train --data {params.data} --out {params.run_dir}"
        " --algorithm {wildcards.algorithm} --seed {wildcards.seed} --spec {params.spec:q}"
        " --threads {threads} > {log} 2>&1"
