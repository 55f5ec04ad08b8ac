# The seed papers' headline claims on the devdata sets (`kernelscale reproduce`,
# src/kernelscale/pipeline/reproduce.py): `make reproduce` = `snakemake reproduce`. Claims,
# datasets and subsample sizes come from config/reproduce.yaml; each claim is one MLflow run
# (experiment kernelscale-reproduce) in the pipeline's tracking store. Not part of `all` (minutes
# on 2 cores: docs/benchmarks.md); the Makefile removes verdicts.md first so that asking for it
# reruns it. The report() files reach results/report.html only when `reproduce` is among
# --report's targets: `make report` adds it once verdicts.md exists (`snakemake all reproduce
# --report results/report.html`).


rule reproduce:
    input:
        config="config/reproduce.yaml",
    output:
        md="results/reproduce/verdicts.md",
        csv=report(
            "results/reproduce/verdicts.csv",
            caption="../report/reproduce.rst",
            category="Reproduce",
        ),
        figures=[
            report(
                f"results/reproduce/{claim}.png",
                caption="../report/reproduce.rst",
                category="Reproduce",
            )
            for claim in runs.reproduce_claims("config/reproduce.yaml")
        ],
    params:
        uri=TRACKING["uri"],
    log:
        "results/logs/reproduce.log",
    threads: 2
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli reproduce --config {input.config:q} --out results/reproduce"
        " --tracking-uri {params.uri:q} > {log} 2>&1"
