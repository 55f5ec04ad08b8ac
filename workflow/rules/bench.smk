# The scale benchmark (`kernelscale bench`, src/kernelscale/pipeline/bench.py: time to SVC's
# error, block throughput, epoch cost, memory against the budget) as a target of its own, logged
# to the pipeline's MLflow store: `make bench` = `snakemake bench`. Not part of `all` (minutes:
# docs/benchmarks.md; `bench: {quick: true}` in config.yaml for a smoke run). Its output is
# removed first so that asking for it reruns it.


rule bench:
    output:
        "results/bench/bench.md",
    params:
        args=runs.bench_args(config),
        uri=TRACKING["uri"],
    log:
        "results/logs/bench.log",
    threads: runs.bench_threads(config)
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli bench --out results/bench"
        " --tracking-uri {params.uri:q} {params.args} > {log} 2>&1"
