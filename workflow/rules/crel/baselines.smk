# Baselines of Table 1 on the same folds: Feldman et al. (output-space grid calibration),
# DQR alone (lowered quantile level) and PCP (K samples of the CVAE). Alpha-free work
# (scores, samples, level coverages) is done once; per-alpha rules only threshold and count.


rule feldman_scores:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        scores="results/crel/{dataset}/{lgm}/feldman/cal_scores.parquet",
    params:
        lgm_options=lgm_options,
        latent_points=latent_points,
    log:
        "logs/crel/{dataset}/{lgm}/feldman_scores.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../../scripts/crel/feldman_scores.py"


rule evaluate_feldman:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/{lgm}/feldman/cal_scores.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/{lgm}/feldman/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/{lgm}/feldman/alpha{alpha}/per_point.parquet",
    params:
        lgm_options=lgm_options,
        latent_points=latent_points,
        region_test_points=region_test_points,
    log:
        "logs/crel/{dataset}/{lgm}/evaluate_feldman_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../../scripts/crel/evaluate_feldman.py"


rule dqr_level_coverage:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/{lgm}/latents.parquet",
        models=baseline_dqr_checkpoints,
    output:
        coverage="results/crel/{dataset}/{lgm}/dqr/level_coverage.json",
    log:
        "logs/crel/{dataset}/{lgm}/dqr_level_coverage.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crel/dqr_level_coverage.py"


rule evaluate_dqr:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/{lgm}/latents.parquet",
        coverage="results/crel/{dataset}/{lgm}/dqr/level_coverage.json",
        models=baseline_dqr_checkpoints,
        lgm=lgm_checkpoint,
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/{lgm}/dqr/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/{lgm}/dqr/alpha{alpha}/per_point.parquet",
    params:
        lgm_options=lgm_options,
        latent_points=latent_points,
        region_test_points=region_test_points,
    log:
        "logs/crel/{dataset}/{lgm}/evaluate_dqr_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../../scripts/crel/evaluate_dqr.py"


rule pcp_samples:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        cvae="results/crel/{dataset}/lgm/cvae.ckpt",
    output:
        cal_scores="results/crel/{dataset}/pcp/seed{seed}/cal_scores.parquet",
        test_samples="results/crel/{dataset}/pcp/seed{seed}/test_samples.npz",
    params:
        n_samples=CREL["pcp"]["n_samples"],
        region_test_points=CREL["evaluation"]["region_test_points"],
    log:
        "logs/crel/{dataset}/pcp/seed{seed}/pcp_samples.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../../scripts/crel/pcp_samples.py"


rule evaluate_pcp:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        cal_scores="results/crel/{dataset}/pcp/seed{seed}/cal_scores.parquet",
        test_samples="results/crel/{dataset}/pcp/seed{seed}/test_samples.npz",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/pcp/seed{seed}/alpha{alpha}/summary.json",
        per_point="results/crel/{dataset}/pcp/seed{seed}/alpha{alpha}/per_point.parquet",
    log:
        "logs/crel/{dataset}/pcp/seed{seed}/evaluate_pcp_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/crel/evaluate_pcp.py"
