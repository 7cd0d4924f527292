# Lightning-trained models. None of these rules depends on alpha, so editing
# calibration.alphas never retrains them. Run folders keep checkpoints for resuming.
# LGM files live in results/crel/{dataset}/lgm/; everything downstream of an LGM in
# results/crel/{dataset}/{lgm}/ (see LGM_ID in common.smk).


rule train_vae:
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/{model}.ckpt",
        summary="results/crel/{dataset}/lgm/{model}_summary.json",
    wildcard_constraints:
        model=r"vae|vae-beta[0-9.e+-]+|vae-r\d+|vae-mae",
    params:
        conditional=False,
        model=vae_model_params,
        epochs=canonical({"max_epochs": config["lgm"]["max_epochs"], "patience": config["lgm"]["patience"]}),
        save_epochs=[],
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/train_{model}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=GPU,
    script:
        "../scripts/train_lgm.py"


rule train_cvae:
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/cvae.ckpt",
        summary="results/crel/{dataset}/lgm/cvae_summary.json",
    params:
        conditional=True,
        model=vae_hyperparameters(),
        epochs=canonical(config["cvae"]),
        save_epochs=[],
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/train_cvae.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=GPU,
    script:
        "../scripts/train_lgm.py"


rule train_vae_long:
    """One VAE run without early stopping, keeping snapshots at chosen epochs (Table 10)."""
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/vae-long-best.ckpt",
        summary="results/crel/{dataset}/lgm/vae-long-best_summary.json",
        snapshots=expand(
            "results/crel/{{dataset}}/lgm/vae-long-epoch{epoch}.ckpt", epoch=config["ablations"]["checkpoint_epochs"]
        ),
    params:
        conditional=False,
        model=vae_hyperparameters(),
        epochs=canonical({"max_epochs": config["ablations"]["long_max_epochs"], "patience": config["ablations"]["long_max_epochs"]}),
        save_epochs=config["ablations"]["checkpoint_epochs"],
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/train_vae_long.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=240,
        gpu=GPU,
    script:
        "../scripts/train_lgm.py"


rule train_ddpm:
    """Latent diffusion (Appendix A.2) in the latent space of the configured VAE."""
    input:
        processed="results/crel/{dataset}/processed.parquet",
        vae="results/crel/{dataset}/lgm/vae.ckpt",
    output:
        model="results/crel/{dataset}/lgm/ddpm-{conditioning}.ckpt",
        summary="results/crel/{dataset}/lgm/ddpm-{conditioning}_summary.json",
    wildcard_constraints:
        conditioning="cond|uncond",
    params:
        conditional=ddpm_is_conditional,
        model=canonical({k: v for k, v in config["diffusion"].items() if k not in ("conditional", "inference_steps", "max_epochs", "patience")}),
        epochs=canonical({"max_epochs": config["diffusion"]["max_epochs"], "patience": config["diffusion"]["patience"]}),
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/train_ddpm_{conditioning}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=240,
        gpu=GPU,
    script:
        "../scripts/train_ddpm.py"


rule encode_latents:
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
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    script:
        "../scripts/encode_latents.py"


rule train_dqr:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/{lgm}/latents.parquet",
    output:
        model="results/crel/{dataset}/{lgm}/dqr/tau{tau}.ckpt",
        summary="results/crel/{dataset}/{lgm}/dqr/tau{tau}_summary.json",
    params:
        model=dqr_training_params(),
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/{lgm}/train_dqr_tau{tau}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=GPU,
    script:
        "../scripts/train_dqr.py"
