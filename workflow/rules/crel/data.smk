# Raw synthetic data (Appendix B.1), the deterministic folds, normalization and the Y-grid.


rule generate_synthetic:
    output:
        data="data/synthetic/{dataset}.parquet",
        params="data/synthetic/{dataset}.params.npz",
    params:
        n=config["synthetic"]["n"],
        p=config["synthetic"]["p"],
        d=config["synthetic"]["d"],
        sigma=config["synthetic"]["sigma"],
        seed=config["seed"],
    log:
        "logs/crel/{dataset}/generate_synthetic.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/generate_synthetic.py"


rule split_folds:
    input:
        data="data/synthetic/{dataset}.parquet",
    output:
        splits="results/crel/{dataset}/splits.parquet",
    params:
        fractions=canonical(config["synthetic"]["splits"]),
        val_fraction=config["synthetic"]["val_fraction"],
        seed=config["seed"],
    log:
        "logs/crel/{dataset}/split_folds.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/split_folds.py"


rule preprocess:
    input:
        data="data/synthetic/{dataset}.parquet",
        splits="results/crel/{dataset}/splits.parquet",
    output:
        processed="results/crel/{dataset}/processed.parquet",
        scaler="results/crel/{dataset}/preprocess.json",
    log:
        "logs/crel/{dataset}/preprocess.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/preprocess.py"


rule output_grid:
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        grid="results/crel/{dataset}/grid.json",
    params:
        n_points=config["grid"]["output_points"],
        quantiles=config["grid"]["quantiles"],
        pad=config["grid"]["pad"],
    log:
        "logs/crel/{dataset}/output_grid.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/output_grid.py"
