# Baselines of Table 1 on the same folds: Feldman et al. (output-space grid calibration),
# DQR alone (lowered quantile level) and PCP (K samples of the CVAE). Alpha-free work
# (scores, samples, level coverages) is done once; per-alpha rules only threshold and count.


rule feldman_scores:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        dqr=f"results/crel/{{dataset}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        scores="results/crel/{dataset}/feldman/cal_scores.parquet",
    params:
        latent_points=config["grid"]["latent_points"],
    log:
        "logs/crel/{dataset}/feldman_scores.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../scripts/feldman_scores.py"


rule evaluate_feldman:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/feldman/cal_scores.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        dqr=f"results/crel/{{dataset}}/dqr/tau{DQR_TAU}.ckpt",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/feldman/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/feldman/alpha{alpha}/per_point.parquet",
    params:
        latent_points=config["grid"]["latent_points"],
        region_test_points=config["evaluation"]["region_test_points"],
    log:
        "logs/crel/{dataset}/evaluate_feldman_alpha{alpha}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../scripts/evaluate_feldman.py"


rule dqr_level_coverage:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/latents.parquet",
        models=baseline_dqr_checkpoints,
    output:
        coverage="results/crel/{dataset}/dqr/level_coverage.json",
    params:
        levels=BASELINE_TAUS,
    log:
        "logs/crel/{dataset}/dqr_level_coverage.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/dqr_level_coverage.py"


rule evaluate_dqr:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/latents.parquet",
        coverage="results/crel/{dataset}/dqr/level_coverage.json",
        models=baseline_dqr_checkpoints,
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/dqr/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/dqr/alpha{alpha}/per_point.parquet",
    params:
        levels=BASELINE_TAUS,
        latent_points=config["grid"]["latent_points"],
        region_test_points=config["evaluation"]["region_test_points"],
    log:
        "logs/crel/{dataset}/evaluate_dqr_alpha{alpha}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../scripts/evaluate_dqr.py"


rule pcp_samples:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        cvae="results/crel/{dataset}/lgm/cvae.ckpt",
    output:
        cal_scores="results/crel/{dataset}/pcp/cal_scores.parquet",
        test_samples="results/crel/{dataset}/pcp/test_samples.npz",
    params:
        n_samples=config["pcp"]["n_samples"],
        region_test_points=config["evaluation"]["region_test_points"],
        seed=config["seed"],
    log:
        "logs/crel/{dataset}/pcp_samples.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/pcp_samples.py"


rule evaluate_pcp:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        cal_scores="results/crel/{dataset}/pcp/cal_scores.parquet",
        test_samples="results/crel/{dataset}/pcp/test_samples.npz",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/pcp/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/pcp/alpha{alpha}/per_point.parquet",
    log:
        "logs/crel/{dataset}/evaluate_pcp_alpha{alpha}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/evaluate_pcp.py"
