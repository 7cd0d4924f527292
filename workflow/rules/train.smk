# Lightning-trained models. None of these rules depends on alpha, so editing
# calibration.alphas never retrains them. Run folders keep checkpoints for resuming.


rule train_vae:
    input:
        processed="results/crel/{dataset}/processed.parquet",
    output:
        model="results/crel/{dataset}/lgm/vae.ckpt",
        summary="results/crel/{dataset}/lgm/vae_summary.json",
    params:
        conditional=False,
        model=canonical(config["lgm"]),
        epochs=canonical({"max_epochs": config["lgm"]["max_epochs"], "patience": config["lgm"]["patience"]}),
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/train_vae.log",
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
        model=canonical(config["lgm"]),
        epochs=canonical(config["cvae"]),
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


rule encode_latents:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        model="results/crel/{dataset}/lgm/vae.ckpt",
    output:
        latents="results/crel/{dataset}/latents.parquet",
    log:
        "logs/crel/{dataset}/encode_latents.log",
    conda:
        "../../envs/condeval.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/encode_latents.py"


rule train_dqr:
    input:
        processed="results/crel/{dataset}/processed.parquet",
        latents="results/crel/{dataset}/latents.parquet",
    output:
        model="results/crel/{dataset}/dqr/tau{tau}.ckpt",
        summary="results/crel/{dataset}/dqr/tau{tau}_summary.json",
    params:
        model=dqr_training_params(),
        seed=config["seed"],
        accelerator=config["resources"]["accelerator"],
    log:
        "logs/crel/{dataset}/train_dqr_tau{tau}.log",
    conda:
        "../../envs/condeval.yaml"
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=GPU,
    script:
        "../scripts/train_dqr.py"
