# CReL: exact latent scores E+ (alpha-free), then per-alpha calibration, evaluation and CReL-rho.


rule crel_latent_scores:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        scores="results/crel/{dataset}/{lgm}/crel/latent_scores.parquet",
    params:
        lgm_options=lgm_options,
    log:
        "logs/crel/{dataset}/{lgm}/crel_latent_scores.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../scripts/crel_latent_scores.py"


rule evaluate_crel:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/{lgm}/crel/latent_scores.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/{lgm}/crel/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/{lgm}/crel/alpha{alpha}/per_point.parquet",
    params:
        lgm_options=lgm_options,
        latent_points=latent_points,
        region_test_points=region_test_points,
    log:
        "logs/crel/{dataset}/{lgm}/evaluate_crel_alpha{alpha}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../scripts/evaluate_crel.py"


rule crel_reliability:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/{lgm}/crel/latent_scores.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        reliability="results/crel/{dataset}/{lgm}/crel/alpha{alpha}/reliability.parquet",
    params:
        lgm_options=lgm_options,
        reliability=canonical(config["reliability"]),
        region_test_points=region_test_points,
        seed=config["seed"],
    log:
        "logs/crel/{dataset}/{lgm}/crel_reliability_alpha{alpha}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=6000,
        runtime=60,
        gpu=GPU,
    script:
        "../scripts/crel_reliability.py"
