# Tables and figures of the CReL synthetic track, collected by `snakemake --report`.


rule table1:
    input:
        summaries=method_summaries,
    output:
        csv=report(
            "reports/crel/{dataset}/table1.csv",
            caption="../report/table1.rst",
            category="CReL synthetic",
            subcategory="Table 1",
            labels={"table": "Table 1", "format": "CSV"},
        ),
        markdown=report(
            "reports/crel/{dataset}/table1.md",
            caption="../report/table1.rst",
            category="CReL synthetic",
            subcategory="Table 1",
            labels={"table": "Table 1", "format": "Markdown"},
        ),
        png=report(
            "reports/crel/{dataset}/table1.png",
            caption="../report/table1.rst",
            category="CReL synthetic",
            subcategory="Table 1",
            labels={"table": "Table 1", "format": "PNG"},
        ),
    log:
        "logs/crel/{dataset}/table1.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/table1.py"


rule coverage_vs_alpha:
    input:
        summaries=method_summaries,
    output:
        png=report(
            "reports/crel/{dataset}/coverage_vs_alpha.png",
            caption="../report/coverage_vs_alpha.rst",
            category="CReL synthetic",
            subcategory="Coverage",
            labels={"figure": "coverage against alpha"},
        ),
    log:
        "logs/crel/{dataset}/coverage_vs_alpha.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/coverage_vs_alpha.py"


rule fig2_regions:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents=f"results/crel/{{dataset}}/{MAIN_LGM}/latents.parquet",
        scores=f"results/crel/{{dataset}}/{MAIN_LGM}/crel/latent_scores.parquet",
        lgm=lgm_file("{dataset}", MAIN_LGM),
        dqr=f"results/crel/{{dataset}}/{MAIN_LGM}/dqr/tau{DQR_TAU}.ckpt",
        crel=f"results/crel/{{dataset}}/{MAIN_LGM}/crel/alpha{figure_alpha()}/summary.json",
        feldman=f"results/crel/{{dataset}}/{MAIN_LGM}/feldman/alpha{figure_alpha()}/summary.json",
        dqr_summary=f"results/crel/{{dataset}}/{MAIN_LGM}/dqr/alpha{figure_alpha()}/summary.json",
        dqr_models=baseline_dqr_checkpoints,
        grid="results/crel/{dataset}/grid.json",
    output:
        png=report(
            "reports/crel/{dataset}/fig2_regions.png",
            caption="../report/fig2_regions.rst",
            category="CReL synthetic",
            subcategory="Fig. 2",
            labels={"figure": "Fig. 2"},
        ),
    params:
        lgm_options=lgm_loading_options(MAIN_LGM),
        n_cases=config["evaluation"]["figure_cases"],
        latent_points=4 * config["grid"]["latent_points"],
        levels=BASELINE_TAUS,
    log:
        "logs/crel/{dataset}/fig2_regions.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/fig2_regions.py"


rule fig5_vae_vs_cvae:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        params="data/synthetic/{dataset}.params.npz",
        scaler="results/crel/{dataset}/preprocess.json",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        cvae="results/crel/{dataset}/lgm/cvae.ckpt",
    output:
        png=report(
            "reports/crel/{dataset}/fig5_vae_vs_cvae.png",
            caption="../report/fig5_vae_vs_cvae.rst",
            category="CReL synthetic",
            subcategory="Fig. 5",
            labels={"figure": "Fig. 5"},
        ),
    params:
        condition=0,
        n_samples=2000,
        seed=config["seed"],
    log:
        "logs/crel/{dataset}/fig5_vae_vs_cvae.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/fig5_vae_vs_cvae.py"


rule reliability_table:
    input:
        reliability=expand("results/crel/{{dataset}}/{lgm}/crel/alpha{alpha}/reliability.parquet", lgm=MAIN_LGM, alpha=ALPHAS),
    output:
        csv=report(
            "reports/crel/{dataset}/reliability.csv",
            caption="../report/reliability.rst",
            category="CReL synthetic",
            subcategory="Reliability score",
            labels={"table": "CReL-rho"},
        ),
    params:
        alphas=ALPHAS,
        metric=config["lgm"]["metric"],
    log:
        "logs/crel/{dataset}/reliability_table.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/reliability_table.py"


rule lgm_cost:
    input:
        vae="results/crel/{dataset}/lgm/vae_summary.json",
        cvae="results/crel/{dataset}/lgm/cvae_summary.json",
    output:
        csv=report(
            "reports/crel/{dataset}/lgm_cost.csv",
            caption="../report/lgm_cost.rst",
            category="CReL synthetic",
            subcategory="LGM cost",
            labels={"table": "Table 11"},
        ),
    log:
        "logs/crel/{dataset}/lgm_cost.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/lgm_cost.py"
