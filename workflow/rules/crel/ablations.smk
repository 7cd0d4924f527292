# CReL Appendix C on the synthetic data: every table beside the paper's numbers.
# Each ablation is an LGM id (see common.smk); its training jobs are keyed by their
# own hyperparameters, so editing any alpha never retrains them.


rule evaluate_uncalibrated:
    """Coverage of the uncalibrated DQR region R_Z and of its decoded image R_Y (Tables 4-6)."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/{lgm}/crel/latent_scores.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
        grid="results/crel/{dataset}/grid.json",
    output:
        summary="results/crel/{dataset}/{lgm}/crel/uncalibrated.json",
    params:
        lgm_options=lgm_options,
        latent_points=latent_points,
        region_test_points=region_test_points,
    log:
        "logs/crel/{dataset}/{lgm}/evaluate_uncalibrated.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=60,
    script:
        "../../scripts/crel/evaluate_uncalibrated.py"


rule crel_reliability_sweep:
    """CReL-rho with num_z0 starts and optimizer seed s (Appendix C.8)."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        scores="results/crel/{dataset}/{lgm}/crel/latent_scores.parquet",
        lgm=lgm_checkpoint,
        dqr=f"results/crel/{{dataset}}/{{lgm}}/dqr/tau{DQR_TAU}.ckpt",
    output:
        reliability="results/crel/{dataset}/{lgm}/crel/alpha{alpha}/reliability_z{num_z0}_seed{rseed}.parquet",
    params:
        lgm_options=lgm_options,
        reliability=sweep_reliability_params,
        region_test_points=sweep_test_points,
        seed=sweep_seed,
    log:
        "logs/crel/{dataset}/{lgm}/crel_reliability_alpha{alpha}_z{num_z0}_seed{rseed}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_sweep_work),
        gpu=0,
    script:
        "../../scripts/crel/crel_reliability.py"


rule ablation_table:
    """One Appendix C table (CSV and Markdown) with the paper's numbers beside ours."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        unpack(ablation_table_inputs),
    output:
        csv=report(
            "reports/crel/{dataset}/ablations/{table}.csv",
            caption="../../report/crel/ablations.rst",
            category="CReL synthetic",
            subcategory="Ablations (Appendix C)",
            labels=ablation_labels,
        ),
        markdown="reports/crel/{dataset}/ablations/{table}.md",
    params:
        settings=ablation_settings,
    log:
        "logs/crel/{dataset}/ablation_{table}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/ablation_table.py"


rule num_z0_curve:
    """CReL-rho against the number of starts, and its spread over optimizer seeds (Figs. 6-7, Table 13)."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        curve=num_z0_curve_inputs,
        seeds=num_z0_seed_inputs,
    output:
        png=report(
            "reports/crel/{dataset}/ablations/fig6_num_z0.png",
            caption="../../report/crel/num_z0.rst",
            category="CReL synthetic",
            subcategory="Ablations (Appendix C)",
            labels={"figure": "Fig. 6 / Table 13 analogue"},
        ),
        csv="reports/crel/{dataset}/ablations/num_z0.csv",
        seeds_csv=report(
            "reports/crel/{dataset}/ablations/table13_seeds.csv",
            caption="../../report/crel/num_z0.rst",
            category="CReL synthetic",
            subcategory="Ablations (Appendix C)",
            labels={"table": "Table 13 analogue"},
        ),
    params:
        paper_std=PAPER["table13_std"],
        num_z0=CREL["ablations"]["num_z0"],
        seed_num_z0=CREL["reliability"]["num_z0"],
        metric=CREL["lgm"]["metric"],
        alpha=f"{CREL['ablations']['alpha']:g}",
    log:
        "logs/crel/{dataset}/num_z0_curve.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/num_z0_curve.py"


rule ablation_lgm_cost:
    """Table 11 for every LGM the ablations train: VAE, CVAE, the 300-epoch VAE and both DDPMs."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        unpack(ablation_lgm_cost_inputs),
    output:
        csv=report(
            "reports/crel/{dataset}/ablations/table11_lgm_cost.csv",
            caption="../../report/crel/ablation_lgm_cost.rst",
            category="CReL synthetic",
            subcategory="Ablations (Appendix C)",
            labels={"table": "Table 11"},
        ),
    params:
        paper=PAPER["table11"],
    log:
        "logs/crel/{dataset}/ablation_lgm_cost.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../../scripts/crel/lgm_cost.py"
