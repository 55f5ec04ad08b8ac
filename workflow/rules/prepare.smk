# Data stage 2: check, split, standardize / PCA-project a dataset into a chunked Zarr store.
# results/data/{dataset}/meta.json is written last (the folder is published by one rename), so
# depending on meta.json means depending on a complete dataset. The entry is passed as JSON so
# that `snakemake --config` overrides count, and a changed entry re-runs the job (params
# trigger).
from pathlib import Path

from kernelscale.pipeline.data import rule_helpers as data_rules

DOWNLOAD_CACHE = str(data_rules.cache_dir())


rule prepare:
    input:
        lambda wc: data_rules.prepare_inputs(config, wc.dataset, DOWNLOAD_CACHE),
    output:
        # Only meta.json: it is written last and the whole folder (data.zarr beside it) is
        # replaced by one rename, so it stands for the dataset. A directory() output for
        # data.zarr would make Snakemake drop a .snakemake_timestamp file inside the Zarr store.
        meta="results/data/{dataset}/meta.json",
    params:
        spec=lambda wc: data_rules.spec_json(config, wc.dataset),
        out=lambda wc, output: str(Path(output.meta).parent),
        cache=DOWNLOAD_CACHE,
    log:
        "results/logs/prepare/{dataset}.log",
    threads: lambda wc: data_rules.prepare_resources(config, wc.dataset)["threads"]
    resources:
        mem_mb=lambda wc: data_rules.prepare_resources(config, wc.dataset)["mem_mb"],
        runtime=lambda wc: data_rules.prepare_resources(config, wc.dataset)["runtime"],
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli prepare --dataset {wildcards.dataset:q}"
        " --spec-json {params.spec:q} --cache-dir {params.cache:q} --out {params.out:q}"
        " --threads {threads}"
        " > {log} 2>&1"
