# Data stage 1: fetch each file of a url-sourced dataset into the download cache, verified by
# sha256 (a mismatching file is deleted, never used). Cache: $KERNELSCALE_CACHE or
# results/downloads; mirror: $KERNELSCALE_MIRROR. Runs on the submit host (localrule): cluster
# compute nodes often have no internet access.
from pathlib import Path

from kernelscale.pipeline.data import rule_helpers as data_rules

DOWNLOAD_CACHE = str(data_rules.cache_dir())


localrules:
    download,


rule download:
    output:
        f"{DOWNLOAD_CACHE}/{{dataset}}/{{filename}}",
    wildcard_constraints:
        dataset=data_rules.url_dataset_pattern(config),
        filename=r"[^/]+",
    params:
        spec=lambda wc: data_rules.spec_json(config, wc.dataset),
        cache=lambda wc, output: str(Path(output[0]).parent.parent),
    log:
        "results/logs/download/{dataset}/{filename}.log",
    threads: 1
    resources:
        mem_mb=500,
        runtime=120,
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli download --dataset {wildcards.dataset:q}"
        " --spec-json {params.spec:q} --cache-dir {params.cache:q} --file {wildcards.filename:q}"
        " > {log} 2>&1"
