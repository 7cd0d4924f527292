# Raw synthetic data (Appendix B.1), the deterministic folds, normalization and the Y-grid.


rule generate_synthetic:
    wildcard_constraints:
        **CREL_WILDCARDS,
    output:
        data="data/synthetic/{dataset}.parquet",
        params="data/synthetic/{dataset}.params.npz",
    params:
        n=CREL["synthetic"]["n"],
        p=CREL["synthetic"]["p"],
        d=CREL["synthetic"]["d"],
        sigma=CREL["synthetic"]["sigma"],
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/generate_synthetic.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crel/generate_synthetic.py"


rule split_folds:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        data="data/synthetic/{dataset}.parquet",
    output:
        splits="results/crel/{dataset}/splits.parquet",
    params:
        fractions=canonical(CREL["synthetic"]["splits"]),
        val_fraction=CREL["synthetic"]["val_fraction"],
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/split_folds.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../../scripts/crel/split_folds.py"


rule preprocess:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        data="data/synthetic/{dataset}.parquet",
        splits="results/crel/{dataset}/splits.parquet",
    output:
        processed="results/crel/{dataset}/processed.parquet",
        scaler="results/crel/{dataset}/preprocess.json",
    params:
        p=CREL["synthetic"]["p"],
        d=CREL["synthetic"]["d"],
    log:
        "logs/crel/{dataset}/preprocess.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crel/preprocess.py"


rule output_grid:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        grid="results/crel/{dataset}/grid.json",
    params:
        n_points=CREL["grid"]["output_points"],
        quantiles=CREL["grid"]["quantiles"],
        pad=CREL["grid"]["pad"],
    log:
        "logs/crel/{dataset}/output_grid.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/output_grid.py"
