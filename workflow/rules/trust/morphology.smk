# Section 5.1.3: real CellProfiler on RxRx1's real sites and on each generator's samples, then the
# centroid analysis, CP-space deciles and per-feature correlations (config `trust.morphology`).
#
#   trust_cp_inputs (per source and shard: PNGs as the pipeline reads them)
#   -> trust_cellprofiler (CellProfiler's own environment: `cellprofiler -c -r -p`)
#   -> trust_cp_table (the shards' Image.csv merged, attributes joined)
#   -> trust_morphology (per regime and generator)  ->  trust_morphology_report (table, Fig. 3, features)
# Sources: `real`, and `<regime>-<variant>` for every RxRx1 generator.


rule trust_cp_inputs:
    """One shard of a source's sites written as the pipeline reads them (six channels, or a composite)."""
    input:
        unpack(morphology_source_inputs),
    output:
        images=directory(f"{MORPHOLOGY_FOLDER}/images"),
        manifest=saved_manifest(f"{MORPHOLOGY_FOLDER}/images"),
    wildcard_constraints:
        **MORPHOLOGY_WILDCARDS,
    params:
        morphology=morphology_settings(*MORPHOLOGY_INPUTS),
        root=TRUST["datasets"]["rxrx1"]["root"],
        per_condition=trust_per_condition("rxrx1"),
        image_size=TRUST["image_size"],
    log:
        "logs/trust/cp_inputs_{source}_shard-{cp_shard}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/trust/cp_inputs.py"


rule trust_cellprofiler:
    """CellProfiler 4.2.8, headless, on one shard (its own environment; the output folder appears whole)."""
    input:
        images=saved_manifest(f"{MORPHOLOGY_FOLDER}/images"),
    output:
        table=f"{MORPHOLOGY_FOLDER}/Image.csv",
    wildcard_constraints:
        **MORPHOLOGY_WILDCARDS,
    params:
        cellprofiler=MORPHOLOGY.get("cellprofiler", "cellprofiler"),
        pipeline=MORPHOLOGY.get("pipeline"),
        pipeline_sha256=MORPHOLOGY_PIPELINE_SHA256,
        partial=morphology_partial_folder,
    log:
        "logs/trust/cellprofiler_{source}_shard-{cp_shard}.log",
    conda:
        "../../../envs/cellprofiler.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../../scripts/trust/cellprofiler.py"


rule trust_cp_table:
    """A source's Image.csv shards merged, each site's attributes (and, for samples, sample_id) joined."""
    input:
        unpack(morphology_source_inputs),
        tables=morphology_source_tables,
    output:
        table="results/trust/rxrx1/cellprofiler/{source}.parquet",
    wildcard_constraints:
        **MORPHOLOGY_WILDCARDS,
    params:
        morphology=morphology_settings("input"),
    log:
        "logs/trust/cp_table_{source}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/trust/cp_table.py"


rule trust_morphology:
    """One generator's Section 5.1.3 readouts: centroid z of trust-selected against random samples per arm
    (bootstrap CI), per-feature correlations, CP-space deciles."""
    input:
        real="results/trust/rxrx1/cellprofiler/real.parquet",
        generated="results/trust/rxrx1/cellprofiler/{regime}-{variant}.parquet",
        scores="results/trust/rxrx1/{regime}/scores/{variant}.parquet",
        conditions="results/trust/rxrx1/conditions.parquet",
    output:
        summary="results/trust/rxrx1/{regime}/morphology/{variant}.json",
        contrast="results/trust/rxrx1/{regime}/morphology/{variant}.parquet",
        correlations="results/trust/rxrx1/{regime}/morphology/{variant}-features.parquet",
        deciles="results/trust/rxrx1/{regime}/morphology/{variant}-deciles.parquet",
    wildcard_constraints:
        **MORPHOLOGY_WILDCARDS,
    params:
        morphology=morphology_settings(*MORPHOLOGY_ANALYSIS),
    log:
        "logs/trust/morphology_{regime}_{variant}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/trust/morphology.py"


rule trust_morphology_report:
    """The Section 5.1.3 table over generators and arms, Fig. 3 (CP-space deciles), the per-feature tables
    and the segmentation check."""
    input:
        summaries=per_variant("results/trust/rxrx1/{regime}/morphology/{variant}.json", morphology_regime_variants),
        contrasts=per_variant("results/trust/rxrx1/{regime}/morphology/{variant}.parquet", morphology_regime_variants),
        correlations=per_variant(
            "results/trust/rxrx1/{regime}/morphology/{variant}-features.parquet", morphology_regime_variants
        ),
        deciles=per_variant(
            "results/trust/rxrx1/{regime}/morphology/{variant}-deciles.parquet", morphology_regime_variants
        ),
        real="results/trust/rxrx1/cellprofiler/real.parquet",
        # the miniature's ground truth: cells drawn per site, against CellProfiler's nuclei
        drawn=morphology_drawn_cells,
    output:
        table=report(
            "reports/trust/rxrx1/{regime}/morphology_table.md",
            caption="../../report/trust/morphology_table.rst",
            category="Trust score",
            subcategory="rxrx1",
            labels={"dataset": "rxrx1", "regime": "{regime}", "table": "Section 5.1.3 (CellProfiler)"},
        ),
        figure=report(
            "reports/trust/rxrx1/{regime}/morphology_deciles.png",
            caption="../../report/trust/morphology_deciles.rst",
            category="Trust score",
            subcategory="rxrx1",
            labels={"dataset": "rxrx1", "regime": "{regime}", "figure": "CP-space deciles (Fig. 3)"},
        ),
    wildcard_constraints:
        **MORPHOLOGY_WILDCARDS,
    params:
        variants=morphology_regime_variants,
        morphology=morphology_settings(*MORPHOLOGY_ANALYSIS),
    log:
        "logs/trust/morphology_report_{regime}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    script:
        "../../scripts/trust/morphology_report.py"
