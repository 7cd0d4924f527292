# Section 5.1.1: the trust score fitted on real training-support features, the samples scored, the
# P95-real selection per queried condition, and the table over datasets, regimes and generators.
#
#   trust_selection (per dataset, regime, variant)  ->  trust_selection_table


rule trust_selection:
    """Fit the score on the regime's real support, score the samples, select per condition by P95-real, KID."""
    input:
        unpack(trust_selection_inputs),
    output:
        scores="results/trust/{dataset}/{regime}/scores/{variant}.parquet",
        conditions="results/trust/{dataset}/{regime}/selection/{variant}.parquet",
        summary="results/trust/{dataset}/{regime}/selection/{variant}.json",
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        scorer=canonical(TRUST["scorer"]),
        selection=canonical(TRUST["selection"]),
        per_condition=TRUST["sampling"]["per_condition"],
        subset=lambda wildcards: trust_subset(wildcards.dataset),
        seed=TRUST["seed"],
    log:
        "logs/trust/selection_{dataset}_{regime}_{variant}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/trust/selection.py"


rule trust_selection_table:
    """The Section 5.1.1 table: Accept%, KID of the trust-selected and of random subsets, Spearman."""
    input:
        summaries=[
            f"results/trust/{dataset}/{regime}/selection/{variant}.json"
            for dataset in TRUST_DATASETS
            for regime in TRUST_REGIMES
            for variant in TRUST_VARIANTS
        ],
    output:
        table="results/trust/selection_table.parquet",
        markdown=report(
            "reports/trust/selection_table.md",
            caption="../../report/trust/selection_table.rst",
            category="Trust score",
            labels={"table": "Section 5.1.1"},
        ),
    params:
        runs=[
            {"dataset": dataset, "regime": regime, "variant": variant}
            for dataset in TRUST_DATASETS
            for regime in TRUST_REGIMES
            for variant in TRUST_VARIANTS
        ],
    log:
        "logs/trust/selection_table.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/trust/selection_table.py"
