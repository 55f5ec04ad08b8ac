# The scale benchmark (benchmarks/harness.py: time to SVC's error, block throughput, epoch cost,
# memory against the budget) as a target of its own, logged to the pipeline's MLflow store:
# `make bench` = `snakemake bench`. Not part of `all`: ~12 minutes on 2 cores (`bench: {quick:
# true}` in config.yaml: ~3 minutes). Its output is removed first so that asking for it reruns it.


rule bench:
    output:
        "results/bench/bench.md",
    params:
        args=runs.bench_args(config),
        uri=TRACKING["uri"],
        script=f"{workflow.basedir}/benchmarks/harness.py",
    log:
        "results/logs/bench.log",
    threads: runs.bench_threads(config)
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python {params.script:q} --out results/bench"
        " --tracking-uri {params.uri:q} {params.args} > {log} 2>&1"
