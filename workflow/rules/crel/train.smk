# Lightning-trained models. None of these rules depends on alpha, so editing
# crel.calibration.alphas never retrains them. A training job's run folder (`<model>_run` beside its
# model: checkpoints, CSV logs) is deliberately no output: Snakemake removes a failed job's outputs, or
# rolls an `update()` output back to its state before the attempt, so a declared folder would lose
# the last.ckpt a rerun resumes from. A job whose inputs or params changed starts afresh (its fingerprint).
# LGM files live in results/crel/{dataset}/lgm/; everything downstream of an LGM in
# results/crel/{dataset}/{lgm}/ (see LGM_ID in common.smk).


rule train_vae:
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/{model}.ckpt",
        summary="results/crel/{dataset}/lgm/{model}_summary.json",
    wildcard_constraints:
        **CREL_WILDCARDS,
        model=r"vae|vae-beta[0-9.e+-]+|vae-r\d+|vae-mae",
    params:
        conditional=False,
        model=vae_model_params,
        epochs=canonical({"max_epochs": CREL["lgm"]["max_epochs"], "patience": CREL["lgm"]["patience"]}),
        save_epochs=[],
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/train_{model}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_vae_work),
        gpu=0,
    script:
        "../../scripts/crel/train_lgm.py"


rule train_cvae:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/cvae.ckpt",
        summary="results/crel/{dataset}/lgm/cvae_summary.json",
    params:
        conditional=True,
        model=design.vae_hyperparameters(CREL),
        epochs=canonical(CREL["cvae"]),
        save_epochs=[],
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/train_cvae.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_cvae_work),
        gpu=0,
    script:
        "../../scripts/crel/train_lgm.py"


rule train_vae_long:
    """One VAE run without early stopping, keeping snapshots at chosen epochs (Table 10)."""
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/vae-long-best.ckpt",
        summary="results/crel/{dataset}/lgm/vae-long-best_summary.json",
        snapshots=expand(
            "results/crel/{{dataset}}/lgm/vae-long-epoch{epoch}.ckpt", epoch=CREL["ablations"]["checkpoint_epochs"]
        ),
    params:
        conditional=False,
        model=design.vae_hyperparameters(CREL),
        epochs=canonical(
            {"max_epochs": CREL["ablations"]["long_max_epochs"], "patience": CREL["ablations"]["long_max_epochs"]}
        ),
        save_epochs=CREL["ablations"]["checkpoint_epochs"],
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/train_vae_long.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_vae_long_work),
        gpu=0,
    script:
        "../../scripts/crel/train_lgm.py"


rule train_ddpm:
    """Latent diffusion (Appendix A.2) in the latent space of the configured VAE."""
    input:
        processed="results/crel/{dataset}/processed.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
    output:
        model="results/crel/{dataset}/lgm/ddpm-{conditioning}.ckpt",
        summary="results/crel/{dataset}/lgm/ddpm-{conditioning}_summary.json",
    wildcard_constraints:
        **CREL_WILDCARDS,
        conditioning="cond|uncond",
    params:
        conditional=ddpm_is_conditional,
        model=ddpm_model_params(),
        epochs=canonical({"max_epochs": CREL["diffusion"]["max_epochs"], "patience": CREL["diffusion"]["patience"]}),
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/train_ddpm_{conditioning}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_ddpm_work),
        gpu=0,
    script:
        "../../scripts/crel/train_ddpm.py"


rule encode_latents:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        lgm=lgm_checkpoint,
    output:
        latents="results/crel/{dataset}/{lgm}/latents.parquet",
    params:
        lgm_options=lgm_options,
    log:
        "logs/crel/{dataset}/{lgm}/encode_latents.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    script:
        "../../scripts/crel/encode_latents.py"


rule train_dqr:
    wildcard_constraints:
        **CREL_WILDCARDS,
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/{lgm}/latents.parquet",
    output:
        model="results/crel/{dataset}/{lgm}/dqr/tau{tau}.ckpt",
        summary="results/crel/{dataset}/{lgm}/dqr/tau{tau}_summary.json",
    params:
        model=dqr_training_params(),
        seed=CREL["seed"],
    log:
        "logs/crel/{dataset}/{lgm}/train_dqr_tau{tau}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(crel_dqr_work),
        gpu=0,
    script:
        "../../scripts/crel/train_dqr.py"
