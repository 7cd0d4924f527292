# The trust track's real data: each release read through its real loader into one table.
#
#   (trust.datasets.<d>.miniature) trust_mini_<d>  ->  the release files under trust.datasets.<d>.root
#   trust_real_table: the release -> results/trust/<d>/real.parquet (key, split, attributes, where the
#                     pixels are) and conditions.parquet (the queried conditions, seen or not)
if "miniature" in TRUST["datasets"].get("celeba", {}):

    rule trust_mini_celeba:
        """The miniature face world, written as CelebA (JPEGs and both list files)."""
        output:
            attributes=trust_release("celeba"),
            partitions=f"{TRUST['datasets']['celeba']['root']}/list_eval_partition.txt",
            images=directory(f"{TRUST['datasets']['celeba']['root']}/img_align_celeba"),
        params:
            world=canonical(TRUST["datasets"]["celeba"]["miniature"]),
        log:
            "logs/trust/mini_celeba.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=20,
        script:
            "../../scripts/trust/mini_celeba.py"


if "miniature" in TRUST["datasets"].get("rxrx1", {}):

    rule trust_mini_rxrx1:
        """The miniature cell world, written as RxRx1 (six PNG channels per site and metadata.csv)."""
        output:
            metadata=trust_release("rxrx1"),
            images=directory(f"{TRUST['datasets']['rxrx1']['root']}/images"),
            drawn=f"{TRUST['datasets']['rxrx1']['root']}/cells_drawn.csv",
        params:
            world=canonical(TRUST["datasets"]["rxrx1"]["miniature"]),
        log:
            "logs/trust/mini_rxrx1.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=20,
        script:
            "../../scripts/trust/mini_rxrx1.py"


rule trust_real_table:
    """Every real row of a release with its split and attributes, and the conditions the generators are asked for."""
    input:
        release=trust_release_input,
    output:
        table="results/trust/{dataset}/real.parquet",
        conditions="results/trust/{dataset}/conditions.parquet",
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        root=trust_root,
        subset=trust_dataset_subset,
    log:
        "logs/trust/real_table_{dataset}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/trust/real_table.py"
