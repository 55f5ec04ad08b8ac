# MLflow: create the store once (parallel writers must not create a fresh SQLite file together),
# then import every finished run folder of this config (idempotent: one MLflow run per run
# folder), grouped under one parent run per pipeline invocation.


localrules:
    tracking_init,
    tracking_import,


rule tracking_init:
    output:
        "results/tracking/store.json",
    params:
        uri=TRACKING["uri"],
        experiment=TRACKING["experiment"],
    log:
        "results/logs/tracking_init.log",
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli tracking-init --uri {params.uri:q} --experiment {params.experiment:q}"
        " --out {output} > {log} 2>&1"


rule tracking_import:
    input:
        store="results/tracking/store.json",
        finals=runs.final_files(config),
    output:
        "results/tracking/imported.json",
    params:
        uri=TRACKING["uri"],
        experiment=TRACKING["experiment"],
    log:
        "results/logs/tracking_import.log",
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli track --uri {params.uri:q} --experiment {params.experiment:q}"
        " --parent --out {output} {input.finals} > {log} 2>&1"
