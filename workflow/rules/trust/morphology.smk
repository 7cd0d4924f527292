# Section 5.1.3: real CellProfiler on RxRx1's real sites and on each generator's samples, then the
# centroid analysis, CP-space deciles and per-feature correlations (config `trust.morphology`).
#
#   trust_cp_inputs (per source and shard: PNGs as the pipeline reads them)
#   -> trust_cellprofiler (CellProfiler's own environment: `cellprofiler -c -r -p`)
#   -> trust_cp_table (the shards' Image.csv merged, attributes joined)
#   -> trust_morphology (per regime and generator)  ->  trust_morphology_report (table, Fig. 3, features)
# Sources: `real`, and `<regime>-<variant>` for every RxRx1 generator.
from condeval.core.io import files_sha256  # noqa: E402

MORPHOLOGY = TRUST.get("morphology", {})
MORPHOLOGY_REGIMES = [r for r in TRUST_REGIMES if trust_variants("rxrx1", r)]
MORPHOLOGY_SOURCES = ["real"] + [f"{r}-{v}" for r in MORPHOLOGY_REGIMES for v in trust_variants("rxrx1", r)]
MORPHOLOGY_WILDCARDS = {
    "source": "|".join(MORPHOLOGY_SOURCES),
    "cp_shard": r"\d+",
    "regime": "|".join(MORPHOLOGY_REGIMES) or "none",
    "variant": TRUST_WILDCARDS["variant"],
}
MORPHOLOGY_FOLDER = "results/trust/rxrx1/cellprofiler/{source}/shard-{cp_shard}"


def repository_path(path):
    """A relative path that names nothing in the working directory is the repository's (its pipelines,
    its .cellprofiler venv), like the configs; a bare program name (`cellprofiler`) is left to PATH."""
    if os.path.isabs(path) or os.path.exists(path) or "/" not in path:
        return path
    return str(Path(workflow.basedir) / path)


# The rule reads the configured strings and resolves them when it runs (shell below): a params or input
# holding the resolved path would differ between a run and its copy elsewhere (a lab member's clone, DVC),
# and Snakemake would rerun CellProfiler there. The pipeline's content is what the rule depends on.
MORPHOLOGY_BASEDIR = str(Path(workflow.basedir).resolve())
if MORPHOLOGY and not os.path.isfile(repository_path(MORPHOLOGY["pipeline"])):
    raise ValueError(
        f"config key 'trust.morphology.pipeline': no file {MORPHOLOGY['pipeline']!r} here or in the repository"
    )
MORPHOLOGY_PIPELINE_SHA256 = files_sha256([repository_path(MORPHOLOGY["pipeline"])]) if MORPHOLOGY else ""


def morphology_settings(*keys):
    """The section's values a rule reads (schema defaults filled; unset sizes stay absent), so an edit of
    the analysis reruns no CellProfiler job."""
    return canonical({key: MORPHOLOGY[key] for key in keys if key in MORPHOLOGY})


MORPHOLOGY_INPUTS = ("input", "side", "shards", "real_per_condition", "per_condition")
MORPHOLOGY_ANALYSIS = ("top_k", "half_splits", "bootstrap", "stratified", "random_draws", "seed", "n_bins",
                       "classifier_seeds")  # fmt: skip


def morphology_source_inputs(wildcards):
    """What a source's CellProfiler inputs are drawn from: the real table, or a generator's sample shards."""
    inputs = {"conditions": "results/trust/rxrx1/conditions.parquet", "table": "results/trust/rxrx1/real.parquet"}
    if wildcards.source == "real":
        return inputs | {"release": trust_release_path("rxrx1")}
    regime, variant = wildcards.source.split("-", 1)
    shards = range(TRUST_SHARDS)
    return inputs | {
        "samples": [TRUST_SAMPLES.format(dataset="rxrx1", regime=regime, variant=variant, shard=k) for k in shards]
    }


def morphology_tables(source):
    return [f"{MORPHOLOGY_FOLDER.format(source=source, cp_shard=k)}/Image.csv" for k in range(MORPHOLOGY["shards"])]


rule trust_cp_inputs:
    """One shard of a source's sites written as the pipeline reads them (six channels, or a composite)."""
    input:
        unpack(morphology_source_inputs),
    output:
        images=directory(f"{MORPHOLOGY_FOLDER}/images"),
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
        images=f"{MORPHOLOGY_FOLDER}/images",
    output:
        table=f"{MORPHOLOGY_FOLDER}/Image.csv",
    wildcard_constraints:
        **MORPHOLOGY_WILDCARDS,
    params:
        cellprofiler=MORPHOLOGY.get("cellprofiler", "cellprofiler"),
        pipeline=MORPHOLOGY.get("pipeline"),
        pipeline_sha256=MORPHOLOGY_PIPELINE_SHA256,
        partial=lambda wildcards: f"{MORPHOLOGY_FOLDER.format(**wildcards)}/.cellprofiler.partial",
    log:
        "logs/trust/cellprofiler_{source}_shard-{cp_shard}.log",
    conda:
        "../../../envs/cellprofiler.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "program={params.cellprofiler:q}; pipeline={params.pipeline:q}; "
        "case $program in */*) [ -e $program ] || program={MORPHOLOGY_BASEDIR}/$program;; esac; "
        "[ -e $pipeline ] || pipeline={MORPHOLOGY_BASEDIR}/$pipeline; "
        "rm -rf {params.partial} && "
        "$program -c -r -p $pipeline -i {input.images} -o {params.partial} > {log} 2>&1 && "
        "mv {params.partial}/Image.csv {output.table} && rm -rf {params.partial}"


rule trust_cp_table:
    """A source's Image.csv shards merged, each site's attributes (and, for samples, sample_id) joined."""
    input:
        unpack(morphology_source_inputs),
        tables=lambda wildcards: morphology_tables(wildcards.source),
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
        summaries=lambda wildcards: [
            f"results/trust/rxrx1/{wildcards.regime}/morphology/{v}.json"
            for v in trust_variants("rxrx1", wildcards.regime)
        ],
        contrasts=lambda wildcards: [
            f"results/trust/rxrx1/{wildcards.regime}/morphology/{v}.parquet"
            for v in trust_variants("rxrx1", wildcards.regime)
        ],
        correlations=lambda wildcards: [
            f"results/trust/rxrx1/{wildcards.regime}/morphology/{v}-features.parquet"
            for v in trust_variants("rxrx1", wildcards.regime)
        ],
        deciles=lambda wildcards: [
            f"results/trust/rxrx1/{wildcards.regime}/morphology/{v}-deciles.parquet"
            for v in trust_variants("rxrx1", wildcards.regime)
        ],
        real="results/trust/rxrx1/cellprofiler/real.parquet",
        # the miniature's ground truth: cells drawn per site, against CellProfiler's nuclei
        drawn=lambda wildcards: (
            [f"{TRUST['datasets']['rxrx1']['root']}/cells_drawn.csv"]
            if "miniature" in TRUST["datasets"]["rxrx1"]
            else []
        ),
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
        variants=lambda wildcards: trust_variants("rxrx1", wildcards.regime),
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
