# Section 5.1.1: the trust score fitted on real training-support features, the samples scored, the
# P95-real selection per queried condition, and the table over datasets, regimes and generators.
#
#   trust_selection (per dataset, regime, variant)  ->  trust_selection_table


rule trust_selection:
    """Fit the score on the regime's real support, score the samples, select per condition by P95-real, KID;
    the Appendix J scorers under the same protocol."""
    input:
        unpack(trust_selection_inputs),
    output:
        scores="results/trust/{dataset}/{regime}/scores/{variant}.parquet",
        conditions="results/trust/{dataset}/{regime}/selection/{variant}.parquet",
        summary="results/trust/{dataset}/{regime}/selection/{variant}.json",
        ablation="results/trust/{dataset}/{regime}/selection/{variant}-scorers.parquet",
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        spaces=trust_feature_spaces,
        scorer=canonical(TRUST["scorer"]),
        selection=canonical(TRUST["selection"]),
        per_condition=trust_dataset_per_condition,
        subset=trust_dataset_subset,
        clip_loading=trust_extractor_loading("clip") if TRUST_CLIP_DATASETS else {},
        seed=TRUST["seed"],
    log:
        "logs/trust/selection_{dataset}_{regime}_{variant}.log",
    conda:
        # torch: Appendix J's CLIP alignment embeds the condition prompts with the CLIP's text tower
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/trust/selection.py"


rule trust_selection_table:
    """The Section 5.1.1 table (Accept%, KID of the trust-selected and of random subsets, Spearman) and
    Appendix J's scorer ablation."""
    input:
        summaries=[
            f"results/trust/{run['dataset']}/{run['regime']}/selection/{run['variant']}.json" for run in trust_runs()
        ],
        ablations=[
            f"results/trust/{run['dataset']}/{run['regime']}/selection/{run['variant']}-scorers.parquet"
            for run in trust_runs()
        ],
    output:
        table="results/trust/selection_table.parquet",
        markdown=report(
            "reports/trust/selection_table.md",
            caption="../../report/trust/selection_table.rst",
            category="Trust score",
            subcategory="Section 5.1.1",
            labels={"table": "Section 5.1.1"},
        ),
        ablation=report(
            "reports/trust/scorer_ablation.md",
            caption="../../report/trust/scorer_ablation.rst",
            category="Trust score",
            subcategory="Appendix J",
            labels={"table": "Appendix J scorers"},
        ),
    params:
        runs=trust_runs(),
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


rule trust_rankings:
    """Section 5.1.2: deciles of trust, realism and faithfulness; KID, z-KID and a condition classifier per decile."""
    input:
        unpack(trust_selection_inputs),
        scores="results/trust/{dataset}/{regime}/scores/{variant}.parquet",
    output:
        rankings="results/trust/{dataset}/{regime}/rankings/{variant}.parquet",
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        spaces=trust_feature_spaces,
        rankings=canonical(TRUST["rankings"]),
        selection=canonical(TRUST["selection"]),
        subset=trust_dataset_subset,
        seed=TRUST["seed"],
    log:
        "logs/trust/rankings_{dataset}_{regime}_{variant}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/trust/rankings.py"


rule trust_fig_deciles:
    """Figs. 2, 8 and 9: KID, z-KID and real-test classifier accuracy per decile, every generator."""
    input:
        rankings=per_variant("results/trust/{dataset}/{regime}/rankings/{variant}.parquet"),
    output:
        markdown="reports/trust/{dataset}/{regime}/deciles.md",
        figure=report(
            "reports/trust/{dataset}/{regime}/deciles.png",
            caption="../../report/trust/deciles.rst",
            category="Trust score",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "regime": "{regime}", "figure": "deciles (Figs. 2, 8, 9)"},
        ),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        variants=trust_regime_variants,
    log:
        "logs/trust/fig_deciles_{dataset}_{regime}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    script:
        "../../scripts/trust/fig_deciles.py"


rule trust_fig_graded_shift:
    """Fig. 7: per-condition mean trust and KID against the minimum Hamming distance to the support."""
    input:
        table="results/trust/{dataset}/real.parquet",
        conditions=per_variant("results/trust/{dataset}/{regime}/selection/{variant}.parquet"),
    output:
        shift="results/trust/{dataset}/{regime}/graded_shift.parquet",
        markdown="reports/trust/{dataset}/{regime}/graded_shift.md",
        figure=report(
            "reports/trust/{dataset}/{regime}/graded_shift.png",
            caption="../../report/trust/graded_shift.rst",
            category="Trust score",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "regime": "{regime}", "figure": "graded shift (Fig. 7)"},
        ),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        variants=trust_regime_variants,
        subset=trust_dataset_subset,
    log:
        "logs/trust/fig_graded_shift_{dataset}_{regime}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    script:
        "../../scripts/trust/fig_graded_shift.py"


rule trust_generator_signal:
    """Whether the generators draw the requested attributes (seen and unseen conditions), read by real-fitted probes."""
    input:
        table="results/trust/{dataset}/real.parquet",
        conditions="results/trust/{dataset}/conditions.parquet",
        real=trust_real_features("{dataset}", "dinov3"),
        samples=trust_regime_sample_features,
    output:
        signal="results/trust/{dataset}/{regime}/generator_signal.parquet",
        markdown=report(
            "reports/trust/{dataset}/{regime}/generator_signal.md",
            caption="../../report/trust/generator_signal.rst",
            category="Trust score",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "regime": "{regime}", "table": "generator signal"},
        ),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        variants=trust_regime_variants,
        shards=TRUST_SHARDS,
        per_condition=trust_dataset_per_condition,
        subset=trust_dataset_subset,
        seed=TRUST["seed"],
    log:
        "logs/trust/generator_signal_{dataset}_{regime}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/trust/generator_signal.py"
