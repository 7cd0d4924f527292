# CReL Appendix E, Fig. 8: total calibration time on the calibration fold against the latent
# dimension r, for CReL (exact latent scores E+) and Feldman et al.'s grid scheme, on the linear
# synthetic data (config key `crel.scaling`). This track has its own data, folds, VAE and DQR per r:
# data/synthetic/scaling-{dataset}.parquet and results/crel_scaling/{dataset}/. Its data, training and
# encoding rules are the main track's (`use rule ... with:`) with the settings of `crel.scaling`; the
# architectures, learning rates, batch sizes and DQR directions come from `lgm` and `dqr`.
#
# Timing jobs run single-threaded, start only once every model of the track is trained, and hold
# the global resource `exclusive_timing`, which workflow/profiles/default sets to 1: within this track no
# job runs beside a timing (jobs of other targets requested in the same run still could).


use rule generate_synthetic as scaling_generate_synthetic with:
    output:
        data="data/synthetic/scaling-{dataset}.parquet",
        params="data/synthetic/scaling-{dataset}.params.npz",
    params:
        n=SCALING.get("n"),
        p=SCALING.get("p"),
        d=SCALING.get("d"),
        sigma=SCALING.get("sigma"),
        seed=CREL["seed"],
    log:
        "logs/crel_scaling/{dataset}/generate_synthetic.log",


use rule split_folds as scaling_split_folds with:
    input:
        data="data/synthetic/scaling-{dataset}.parquet",
    output:
        splits="results/crel_scaling/{dataset}/splits.parquet",
    params:
        fractions=canonical(SCALING.get("splits", {})),
        val_fraction=SCALING.get("val_fraction"),
        seed=CREL["seed"],
    log:
        "logs/crel_scaling/{dataset}/split_folds.log",


use rule preprocess as scaling_preprocess with:
    input:
        data="data/synthetic/scaling-{dataset}.parquet",
        splits="results/crel_scaling/{dataset}/splits.parquet",
    output:
        processed="results/crel_scaling/{dataset}/processed.parquet",
        scaler="results/crel_scaling/{dataset}/preprocess.json",
    params:
        p=SCALING.get("p"),
        d=SCALING.get("d"),
    log:
        "logs/crel_scaling/{dataset}/preprocess.log",


use rule train_vae as scaling_train_vae with:
    input:
        processed="results/crel_scaling/{dataset}/processed.parquet",
    output:
        model="results/crel_scaling/{dataset}/r{r}/vae.ckpt",
        summary="results/crel_scaling/{dataset}/r{r}/vae_summary.json",
    params:
        conditional=False,
        model=scaling_vae_params,
        epochs=canonical({"max_epochs": SCALING.get("vae_epochs"), "patience": SCALING.get("vae_patience")}),
        save_epochs=[],
        seed=CREL["seed"],
    log:
        "logs/crel_scaling/{dataset}/r{r}/train_vae.log",
    resources:
        **gpu_resources(scaling_vae_work),
        gpu=0,


use rule encode_latents as scaling_encode_latents with:
    input:
        processed="results/crel_scaling/{dataset}/processed.parquet",
        lgm="results/crel_scaling/{dataset}/r{r}/vae.ckpt",
    output:
        latents="results/crel_scaling/{dataset}/r{r}/latents.parquet",
    params:
        lgm_options={},
    log:
        "logs/crel_scaling/{dataset}/r{r}/encode_latents.log",


use rule train_dqr as scaling_train_dqr with:
    input:
        processed="results/crel_scaling/{dataset}/processed.parquet",
        latents="results/crel_scaling/{dataset}/r{r}/latents.parquet",
    output:
        model="results/crel_scaling/{dataset}/r{r}/dqr/tau{tau}.ckpt",
        summary="results/crel_scaling/{dataset}/r{r}/dqr/tau{tau}_summary.json",
    params:
        model=scaling_dqr_params(),
        seed=CREL["seed"],
    log:
        "logs/crel_scaling/{dataset}/r{r}/train_dqr_tau{tau}.log",
    resources:
        **gpu_resources(scaling_dqr_work),
        gpu=0,


rule scaling_calibration_time:
    """Times CReL's and Feldman's calibration at one r; the grid scheme under `scaling.grid_budget_s`."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel_scaling/{dataset}/processed.parquet",
        vae="results/crel_scaling/{dataset}/r{r}/vae.ckpt",
        dqr=f"results/crel_scaling/{{dataset}}/r{{r}}/dqr/tau{DQR_TAU}.ckpt",
        others=scaling_other_models,
    output:
        timing="results/crel_scaling/{dataset}/r{r}/timing.json",
    params:
        alpha=SCALING.get("alpha"),
        points_per_axis=SCALING.get("points_per_axis"),
        max_output_points=SCALING.get("max_output_points"),
        budget_s=SCALING.get("grid_budget_s"),
        probe_points=SCALING.get("probe_points"),
        max_region_points=SCALING.get("max_region_points"),
        probe_budget_s=SCALING.get("probe_budget_s"),
        seed=CREL["seed"],
    log:
        "logs/crel_scaling/{dataset}/r{r}/calibration_time.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=scaling_timing_runtime,
        exclusive_timing=1,
    script:
        "../../scripts/crel/calibration_scaling.py"


rule scaling_fig8:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        timings=scaling_timings,
    output:
        png=report(
            "reports/crel/scaling/fig8_calibration_runtime.png",
            caption="../../report/crel/fig8_calibration_runtime.rst",
            category="CReL synthetic",
            subcategory="Appendix E",
            labels={"figure": "Fig. 8", "format": "PNG"},
        ),
        svg=report(
            "reports/crel/scaling/fig8_calibration_runtime.svg",
            caption="../../report/crel/fig8_calibration_runtime.rst",
            category="CReL synthetic",
            subcategory="Appendix E",
            labels={"figure": "Fig. 8", "format": "SVG"},
        ),
        csv=report(
            "reports/crel/scaling/calibration_runtime.csv",
            caption="../../report/crel/fig8_calibration_runtime.rst",
            category="CReL synthetic",
            subcategory="Appendix E",
            labels={"figure": "Fig. 8", "format": "CSV"},
        ),
    params:
        paper=PAPER["fig8"],
    log:
        "logs/crel_scaling/fig8_calibration_runtime.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/crel/fig8_calibration_runtime.py"
