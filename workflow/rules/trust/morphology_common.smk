# Helpers of morphology.smk (config `trust.morphology`): the section, its checks and input functions.
import shutil

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


# trust_cellprofiler reads the configured strings and resolves them when it runs: a params or input
# holding the resolved path would differ between a run and its copy elsewhere (a lab member's clone, DVC),
# and Snakemake would rerun CellProfiler there. The pipeline's content is what the rule depends on.
if MORPHOLOGY and not os.path.isfile(repository_path(MORPHOLOGY["pipeline"])):
    raise ValueError(
        f"config key 'trust.morphology.pipeline': no file {MORPHOLOGY['pipeline']!r} here or in the repository"
    )
MORPHOLOGY_PIPELINE_SHA256 = files_sha256([repository_path(MORPHOLOGY["pipeline"])]) if MORPHOLOGY else ""


def cellprofiler_preflight(log):
    """onstart: when a CellProfiler job will run in this run's own environment (no conda, container or
    modules), the configured program (`trust.morphology.cellprofiler`: a name on PATH, or a path in the
    working directory or the repository, as the job resolves it) must exist before any job starts."""
    if workflow.deployment_settings.deployment_method:
        return  # the job's environment provides it
    if not any(job.rule.name == "trust_cellprofiler" for job in workflow.dag.needrun_jobs()):
        return
    program = MORPHOLOGY.get("cellprofiler", "cellprofiler")
    found = shutil.which(program) if "/" not in program else os.access(repository_path(program), os.X_OK)
    if not found:
        raise ValueError(
            f"config key 'trust.morphology.cellprofiler' names {program!r}, no program here: `make cellprofiler` "
            "builds .cellprofiler/bin/cellprofiler; on a cluster see docs/cluster.md (or run with --sdm conda)"
        )


ONSTART_CHECKS.append(cellprofiler_preflight)


def morphology_settings(*keys):
    """The section's values a rule reads (schema defaults filled; unset sizes stay absent), so an edit of
    the analysis reruns no CellProfiler job."""
    return canonical({key: MORPHOLOGY[key] for key in keys if key in MORPHOLOGY})


MORPHOLOGY_INPUTS = ("input", "side", "shards", "real_per_condition", "per_condition")
MORPHOLOGY_ANALYSIS = (
    "top_k",
    "half_splits",
    "bootstrap",
    "stratified",
    "random_draws",
    "seed",
    "n_bins",
    "deciles",
    "classifier_seeds",
)


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


def morphology_source_tables(wildcards):
    """The job's source's CellProfiler tables, one per shard."""
    return morphology_tables(wildcards.source)


def morphology_partial_folder(wildcards):
    """Where a CellProfiler shard writes until its table is whole."""
    return f"{MORPHOLOGY_FOLDER.format(**wildcards)}/.cellprofiler.partial"


def morphology_drawn_cells(wildcards):
    """The miniature's ground truth (cells drawn per site) against CellProfiler's nuclei; none for the release."""
    rxrx1 = TRUST["datasets"]["rxrx1"]
    return [f"{rxrx1['root']}/cells_drawn.csv"] if "miniature" in rxrx1 else []


def morphology_regime_variants(wildcards):
    """RxRx1's generators in the job's regime."""
    return trust_variants("rxrx1", wildcards.regime)
