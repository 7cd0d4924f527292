# CReL: exact latent scores E+ (alpha-free), then per-alpha calibration, evaluation and CReL-rho.


rule crel_latent_scores:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        dqr=f"results/crel/{{dataset}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        scores="results/crel/{dataset}/crel/latent_scores.parquet",
    log:
        "logs/crel/{dataset}/crel_latent_scores.log",
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
        scores="results/crel/{dataset}/crel/latent_scores.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        dqr=f"results/crel/{{dataset}}/dqr/tau{DQR_TAU}.ckpt",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/crel/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/crel/alpha{alpha}/per_point.parquet",
    params:
        latent_points=config["grid"]["latent_points"],
        region_test_points=config["evaluation"]["region_test_points"],
    log:
        "logs/crel/{dataset}/evaluate_crel_alpha{alpha}.log",
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
        scores="results/crel/{dataset}/crel/latent_scores.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        dqr=f"results/crel/{{dataset}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        reliability="results/crel/{dataset}/crel/alpha{alpha}/reliability.parquet",
    params:
        reliability=canonical(config["reliability"]),
        region_test_points=config["evaluation"]["region_test_points"],
        seed=config["seed"],
    log:
        "logs/crel/{dataset}/crel_reliability_alpha{alpha}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=6000,
        runtime=60,
        gpu=GPU,
    script:
        "../scripts/crel_reliability.py"
