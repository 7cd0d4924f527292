# CReL: exact latent scores E+ (alpha-free), then per-alpha calibration, evaluation and CReL-rho.


rule crel_latent_scores:
    wildcard_constraints:
        **CREL_WILDCARDS,
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
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    script:
        "../../scripts/crel/crel_latent_scores.py"


rule evaluate_crel:
    wildcard_constraints:
        **CREL_WILDCARDS,
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
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../../scripts/crel/evaluate_crel.py"


rule crel_reliability:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/{lgm}/crel/latent_scores.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        reliability="results/crel/{dataset}/{lgm}/crel/alpha{alpha}/reliability.parquet",
    params:
        lgm_options=lgm_options,
        reliability=canonical(CREL["reliability"]),
        region_test_points=region_test_points,
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/{lgm}/crel_reliability_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_reliability_work),
        gpu=0,
    script:
        "../../scripts/crel/crel_reliability.py"
