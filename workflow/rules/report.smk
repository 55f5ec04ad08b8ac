# Comparison tables (from MLflow: the runs the import job listed, i.e. this config's runs) and
# per-dataset figures (from the run folders), registered for `snakemake --report
# results/report.html` with captions from workflow/report/.


localrules:
    tables,
    plots,


rule tables:
    input:
        "results/tracking/imported.json",
    output:
        csv=report(
            "results/tables/summary.csv",
            caption="../report/summary.rst",
            category="Tables",
        ),
        md="results/tables/summary.md",
        wide=report(
            "results/tables/wide.csv",
            caption="../report/wide.rst",
            category="Tables",
        ),
    params:
        uri=TRACKING["uri"],
        experiment=TRACKING["experiment"],
    log:
        "results/logs/tables.log",
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli tables --uri {params.uri:q} --experiment {params.experiment:q}"
        " --runs-from {input} --csv {output.csv} --md {output.md} --wide-csv {output.wide}"
        " > {log} 2>&1"


rule plots:
    input:
        lambda wc: runs.final_files(config, wc.dataset),
    output:
        metric=report(
            "results/plots/{dataset}/metric_vs_time.png",
            caption="../report/metric_vs_time.rst",
            category="Plots",
            subcategory="{dataset}",
        ),
        objective=report(
            "results/plots/{dataset}/objective_vs_time.png",
            caption="../report/objective_vs_time.rst",
            category="Plots",
            subcategory="{dataset}",
        ),
    log:
        "results/logs/plots/{dataset}.log",
    conda:
        "../../envs/cpu.yaml"
    shell:
        "python -m kernelscale.pipeline.cli plots --dataset {wildcards.dataset} --metric-png {output.metric}"
        " --objective-png {output.objective} {input} > {log} 2>&1"
