# Tables and figures of the CReL synthetic track, collected by `snakemake --report`.


rule table1:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        summaries=method_summaries,
    output:
        csv=report(
            "reports/crel/{dataset}/table1.csv",
            caption="../../report/crel/table1.rst",
            category="CReL synthetic",
            subcategory="Table 1",
            labels={"table": "Table 1", "format": "CSV"},
        ),
        markdown=report(
            "reports/crel/{dataset}/table1.md",
            caption="../../report/crel/table1.rst",
            category="CReL synthetic",
            subcategory="Table 1",
            labels={"table": "Table 1", "format": "Markdown"},
        ),
        png=report(
            "reports/crel/{dataset}/table1.png",
            caption="../../report/crel/table1.rst",
            category="CReL synthetic",
            subcategory="Table 1",
            labels={"table": "Table 1", "format": "PNG"},
        ),
    params:
        paper=PAPER["table1"],
    log:
        "logs/crel/{dataset}/table1.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/table1.py"


rule coverage_vs_alpha:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        summaries=method_summaries,
    output:
        png=report(
            "reports/crel/{dataset}/coverage_vs_alpha.png",
            caption="../../report/crel/coverage_vs_alpha.rst",
            category="CReL synthetic",
            subcategory="Coverage",
            labels={"figure": "coverage against alpha"},
        ),
    params:
        paper=PAPER["table1"],
    log:
        "logs/crel/{dataset}/coverage_vs_alpha.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/coverage_vs_alpha.py"


rule fig2_regions:
    wildcard_constraints:
        **CREL_WILDCARDS,
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
            caption="../../report/crel/fig2_regions.rst",
            category="CReL synthetic",
            subcategory="Fig. 2",
            labels={"figure": "Fig. 2"},
        ),
    params:
        lgm_options=design.lgm_loading_options(MAIN_LGM),
        n_cases=CREL["evaluation"]["figure_cases"],
        latent_points=4 * CREL["grid"]["latent_points"],
    log:
        "logs/crel/{dataset}/fig2_regions.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crel/fig2_regions.py"


rule fig5_vae_vs_cvae:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        params="data/synthetic/{dataset}.params.npz",
        data="data/synthetic/{dataset}.parquet",
        splits="results/crel/{dataset}/splits.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
        cvae="results/crel/{dataset}/lgm/cvae.ckpt",
    output:
        png=report(
            "reports/crel/{dataset}/fig5_vae_vs_cvae.png",
            caption="../../report/crel/fig5_vae_vs_cvae.rst",
            category="CReL synthetic",
            subcategory="Fig. 5",
            labels={"figure": "Fig. 5"},
        ),
    params:
        condition=0,
        n_samples=2000,
        p=CREL["synthetic"]["p"],
        d=CREL["synthetic"]["d"],
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/fig5_vae_vs_cvae.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crel/fig5_vae_vs_cvae.py"


rule reliability_table:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        reliability=expand(
            "results/crel/{{dataset}}/{lgm}/crel/alpha{alpha}/reliability.parquet", lgm=MAIN_LGM, alpha=ALPHAS
        ),
    output:
        csv=report(
            "reports/crel/{dataset}/reliability.csv",
            caption="../../report/crel/reliability.rst",
            category="CReL synthetic",
            subcategory="Reliability score",
            labels={"table": "CReL-rho"},
        ),
    params:
        alphas=ALPHAS,
        metric=CREL["lgm"]["metric"],
    log:
        "logs/crel/{dataset}/reliability_table.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/reliability_table.py"


rule lgm_cost:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        vae="results/crel/{dataset}/lgm/vae_summary.json",
        cvae="results/crel/{dataset}/lgm/cvae_summary.json",
    output:
        csv=report(
            "reports/crel/{dataset}/lgm_cost.csv",
            caption="../../report/crel/lgm_cost.rst",
            category="CReL synthetic",
            subcategory="LGM cost",
            labels={"table": "Table 11"},
        ),
    params:
        paper=PAPER["table11"],
    log:
        "logs/crel/{dataset}/lgm_cost.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../../scripts/crel/lgm_cost.py"
