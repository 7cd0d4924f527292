# CReL on image-to-text (Section 4.2): four captioners sample one caption per val image, CLIP and
# BERT embed everything, and CReL runs per model and metric on the features.
#
#   train_captioner (a `train:` model)  ->  generate_captions (per image-id shard)
#   -> text_features (shared rules)     ->  i2t_fit (VAE + DQR; no alpha)  ->  i2t_evaluate (alpha)
#   -> Table 2, Fig. 3, Fig. 4, the num_z0 curve, reliability cards
#
# Nothing before i2t_evaluate depends on crel.image_to_text.alpha, so an alpha edit reruns no
# training and no generation.


rule train_captioner:
    input:
        unpack(captioner_train_inputs),
    output:
        model=directory("results/crel_i2t/captioners/{model}"),
        manifest=saved_manifest("results/crel_i2t/captioners/{model}"),
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        train=captioner_train_params,
        image_size=ENCODERS["image_size"],
        seed=I2T["seed"],
    log:
        "logs/crel_i2t/train_captioner_{model}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20  # the image-to-text chain first; the synthetic track fills the other core
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=0,
    script:
        "../../scripts/crel/train_captioner.py"


rule generate_captions:
    """One sampled caption per val image of one image-id shard."""
    input:
        captions=coco_captions("val"),
        model=captioner_inputs,
    output:
        GENERATED_CAPTIONS.format(name="{model}", shard="{shard}"),
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        sampling=captioner_sampling,
        shards=COCO["shards"],
        seed=I2T["seed"],
        batch_size=ENCODERS["batch_size"],
        chunk_size=chunk_items(ENCODERS["batch_size"]),
        dtype=captioner_dtype,
        image_size=I2T.get("image_size"),
    log:
        "logs/crel_i2t/generate_{model}_shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        **gpu_resources(captioning_work),
        gpu=0,
    script:
        "../../scripts/crel/generate_captions.py"


rule i2t_fit:
    """The VAE on Y of the VAE fold, then the latent DQR on the DQR fold (no alpha here)."""
    input:
        unpack(i2t_feature_inputs),
    output:
        lgm="results/crel_i2t/{model}/{metric}/lgm.ckpt",
        dqr="results/crel_i2t/{model}/{metric}/dqr.ckpt",
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        vae=canonical(I2T["vae"]),
        dqr=canonical({**I2T["dqr"], "quantile_level": CREL["dqr"]["quantile_level"]}),
        condition=I2T["condition"],
        seed=I2T["seed"],
    log:
        "logs/crel_i2t/fit_{model}_{metric}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        **gpu_resources(i2t_fit_work),
        gpu=0,
    script:
        "../../scripts/crel/i2t_fit.py"


rule i2t_evaluate:
    """Calibrate at alpha; rho and CReL-rho (PGD, num_z0 starts) of every test image, the worst cases'
    distance to real captions."""
    input:
        unpack(i2t_feature_inputs),
        unpack(i2t_evaluate_inputs),
        lgm="results/crel_i2t/{model}/{metric}/lgm.ckpt",
        dqr="results/crel_i2t/{model}/{metric}/dqr.ckpt",
    output:
        scores="results/crel_i2t/{model}/{metric}/scores_alpha{alpha}.parquet",
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        reliability=canonical(I2T["reliability"]),
        condition=I2T["condition"],
        seed=I2T["seed"],
    log:
        "logs/crel_i2t/evaluate_{model}_{metric}_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        **gpu_resources(i2t_evaluate_work),
        gpu=0,
    script:
        "../../scripts/crel/i2t_evaluate.py"


rule i2t_num_z0:
    """The num_z0 curve (Fig. 6, Appendix C.8): Table 2's search at every num_z0 of
    crel.image_to_text.num_z0_curve; the point at reliability.num_z0 is read from Table 2's scores."""
    input:
        unpack(i2t_feature_inputs),
        scores="results/crel_i2t/{model}/{metric}/scores_alpha{alpha}.parquet",
        lgm="results/crel_i2t/{model}/{metric}/lgm.ckpt",
        dqr="results/crel_i2t/{model}/{metric}/dqr.ckpt",
    output:
        num_z0="results/crel_i2t/{model}/{metric}/num_z0_alpha{alpha}.parquet",
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        reliability=canonical(I2T["reliability"]),
        condition=I2T["condition"],
        num_z0s=I2T["num_z0_curve"],
        seed=I2T["seed"],
    log:
        "logs/crel_i2t/num_z0_{model}_{metric}_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(i2t_num_z0_work),
        gpu=0,
    script:
        "../../scripts/crel/i2t_num_z0.py"
