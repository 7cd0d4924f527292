# CReL on text-to-image (Section 4.3): four generators draw one image per val caption, CLIP and
# DINOv2 embed everything, and CReL runs per model and metric on the features.
#
#   t2i_autoencoder (kl, vq), t2i_t5  ->  train_t2i_generator (a `train:` model)
#   -> generate_images (per image-id shard)  ->  image_features (shared rules, clip and dino)
#   -> t2i_fit (VAE + DQR; no alpha)  ->  t2i_evaluate (alpha)  ->  Table 3, Fig. 11
#
# Nothing before t2i_evaluate depends on crel.text_to_image.alpha, so an alpha edit reruns no
# training and no generation.


rule t2i_autoencoder:
    """The latent autoencoder of SD3 and FLUX (kl: AutoencoderKL) or of Kandinsky (vq: MoVQ VQModel)."""
    input:
        captions=coco_world(),
    output:
        model=directory("results/crel_t2i/autoencoders/{kind}"),
        manifest=saved_manifest("results/crel_t2i/autoencoders/{kind}"),
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        train=t2i_autoencoder_params,
        image_size=T2I["image_size"],
        seed=T2I["seed"],
    log:
        "logs/crel_t2i/autoencoder_{kind}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 15
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/crel/t2i_autoencoder.py"


if "t5" in T2I:

    rule t2i_t5:
        """The tiny T5EncoderModel of SD3 and FLUX, distilled from the CLIP's text tower."""
        input:
            captions=coco_world(),
            tokenizer=saved_manifest("results/encoders/tokenizer"),
            clip=trained_encoder_inputs("clip"),
        output:
            model=directory("results/crel_t2i/t5"),
            manifest=saved_manifest("results/crel_t2i/t5"),
        params:
            train=canonical(T2I["t5"]),
            max_length=T2I["max_length"],
            seed=T2I["seed"],
        log:
            "logs/crel_t2i/t5.log",
        conda:
            "../../../envs/torch.yaml"
        threads: 1
        priority: 15
        resources:
            mem_mb=4000,
            runtime=60,
            gpu=0,
        script:
            "../../scripts/crel/t2i_t5.py"


rule train_t2i_generator:
    input:
        unpack(generator_train_inputs),
    output:
        model=directory("results/crel_t2i/generators/{model}"),
        manifest=saved_manifest("results/crel_t2i/generators/{model}"),
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        train=generator_train_params,
        image_size=T2I["image_size"],
        clip_image_size=ENCODERS["image_size"],
        max_length=T2I["max_length"],
        seed=T2I["seed"],
    log:
        "logs/crel_t2i/train_generator_{model}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 15
    resources:
        mem_mb=6000,
        runtime=120,
        gpu=0,
    script:
        "../../scripts/crel/train_t2i_generator.py"


rule generate_images:
    """One image per evaluation caption of one image-id shard of the items, through the pipeline's __call__."""
    input:
        unpack(generator_inputs),
        captions=coco_captions("val"),
    output:
        images=directory("results/crel_t2i/images/{model}/shard-{shard}"),
        manifest=GENERATED_IMAGES.format(name="{model}", shard="{shard}"),
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        sampling=t2i_sampling_params,
        family=t2i_family,
        n_items=T2I["items"],
        shards=COCO["shards"],
        image_size=T2I["image_size"],
        max_length=T2I["max_length"],
        batch_size=T2I["batch_size"],
        chunk_size=chunk_items(T2I["batch_size"]),
        dtype=generator_dtype,
        seed=T2I["seed"],
    log:
        "logs/crel_t2i/generate_{model}_shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 15
    resources:
        **gpu_resources(generation_work),
        gpu=0,
    script:
        "../../scripts/crel/generate_images.py"


rule t2i_signal:
    """Do the generators carry signal? CLIP retrieval and requested colour/shape against real images
    and a shuffled-caption baseline; DINO-SIM's same-scene AUC."""
    input:
        captions=coco_captions("val"),
        train_captions=coco_captions("train"),
        clip=trained_encoder_inputs("clip"),
        dino=trained_encoder_inputs("dino"),
        generated=t2i_generated,
    output:
        report(
            "results/crel_t2i/signal.json",
            caption="../../report/crel/t2i_signal.rst",
            category="CReL text-to-image",
            subcategory="Generator signal",
            labels={"table": "generator signal"},
        ),
    params:
        models=T2I_MODELS,
        shards=len(SHARDS),
        image_size=T2I["image_size"],
        gallery=SIGNAL_GALLERY,
        probe_images=T2I_PROBE_IMAGES,
        dtypes={encoder: ENCODERS[encoder].get("dtype", "auto") for encoder in ("clip", "dino")},
    log:
        "logs/crel_t2i/signal.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(t2i_signal_work),
        gpu=0,
    script:
        "../../scripts/crel/t2i_signal.py"


rule t2i_fit:
    """The VAE on Y of the VAE fold, then the latent DQR on the DQR fold (no alpha here)."""
    input:
        unpack(t2i_feature_inputs),
    output:
        lgm="results/crel_t2i/{model}/{metric}/lgm.ckpt",
        dqr="results/crel_t2i/{model}/{metric}/dqr.ckpt",
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        vae=canonical(T2I["vae"]),
        dqr=canonical({**T2I["dqr"], "quantile_level": CREL["dqr"]["quantile_level"]}),
        seed=T2I["seed"],
    log:
        "logs/crel_t2i/fit_{model}_{metric}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 15
    resources:
        **gpu_resources(t2i_fit_work),
        gpu=0,
    script:
        "../../scripts/crel/t2i_fit.py"


rule t2i_evaluate:
    """Calibrate at alpha; rho and CReL-rho (PGD from the metric's num_z0 starts) of every test item."""
    input:
        unpack(t2i_feature_inputs),
        lgm="results/crel_t2i/{model}/{metric}/lgm.ckpt",
        dqr="results/crel_t2i/{model}/{metric}/dqr.ckpt",
    output:
        scores="results/crel_t2i/{model}/{metric}/scores_alpha{alpha}.parquet",
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        reliability=t2i_reliability_params,
        seed=T2I["seed"],
    log:
        "logs/crel_t2i/evaluate_{model}_{metric}_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 15
    resources:
        **gpu_resources(t2i_evaluate_work),
        gpu=0,
    script:
        "../../scripts/crel/t2i_evaluate.py"


rule t2i_table3:
    input:
        t2i_scores,
    output:
        table="results/crel_t2i/table3_alpha{alpha}.parquet",
        markdown=report(
            "reports/crel_t2i/table3_alpha{alpha}.md",
            caption="../../report/crel/t2i_table3.rst",
            category="CReL text-to-image",
            subcategory="Table 3",
            labels={"table": "Table 3"},
        ),
    wildcard_constraints:
        **T2I_WILDCARDS,
    log:
        "logs/crel_t2i/table3_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/t2i_table3.py"


rule t2i_fig11:
    input:
        scores=t2i_scores,
        table="results/crel_t2i/table3_alpha{alpha}.parquet",
    output:
        report(
            "reports/crel_t2i/fig11_violins_alpha{alpha}.png",
            caption="../../report/crel/t2i_fig11.rst",
            category="CReL text-to-image",
            subcategory="Fig. 11",
            labels={"figure": "Fig. 11"},
        ),
    wildcard_constraints:
        **T2I_WILDCARDS,
    log:
        "logs/crel_t2i/fig11_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_fig3.py"


rule t2i_num_z0:
    """The num_z0 curve (Fig. 7, Appendix C.8): Table 3's search at every num_z0 of
    crel.text_to_image.num_z0_curve; the point at the metric's num_z0 is read from Table 3's scores."""
    input:
        unpack(t2i_feature_inputs),
        scores="results/crel_t2i/{model}/{metric}/scores_alpha{alpha}.parquet",
        lgm="results/crel_t2i/{model}/{metric}/lgm.ckpt",
        dqr="results/crel_t2i/{model}/{metric}/dqr.ckpt",
    output:
        num_z0="results/crel_t2i/{model}/{metric}/num_z0_alpha{alpha}.parquet",
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        reliability=t2i_reliability_params,
        num_z0s=T2I["num_z0_curve"],
        seed=T2I["seed"],
    log:
        "logs/crel_t2i/num_z0_{model}_{metric}_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/crel/t2i_num_z0.py"


rule t2i_fig7:
    input:
        expand("results/crel_t2i/{model}/{metric}/num_z0_alpha{{alpha}}.parquet", model=T2I_MODELS, metric=T2I_METRICS),
    output:
        report(
            "reports/crel_t2i/fig7_num_z0_alpha{alpha}.png",
            caption="../../report/crel/t2i_fig7.rst",
            category="CReL text-to-image",
            subcategory="Fig. 7",
            labels={"figure": "Fig. 7"},
        ),
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        num_z0=dict(T2I["num_z0"]),
    log:
        "logs/crel_t2i/fig7_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_fig6.py"


rule t2i_card:
    input:
        scores=t2i_scores,
        table="results/crel_t2i/table3_alpha{alpha}.parquet",
    output:
        report(
            "reports/crel_t2i/card_{model}_alpha{alpha}.png",
            caption="../../report/crel/t2i_card.rst",
            category="CReL text-to-image",
            subcategory="Reliability cards",
            labels={"model": "{model}"},
        ),
    wildcard_constraints:
        **T2I_WILDCARDS,
    log:
        "logs/crel_t2i/card_{model}_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_card.py"


rule t2i_fig12:
    input:
        unpack(t2i_example_inputs),
    output:
        report(
            "reports/crel_t2i/fig12_examples_alpha{alpha}.png",
            caption="../../report/crel/t2i_fig12.rst",
            category="CReL text-to-image",
            subcategory="Fig. 12",
            labels={"figure": "Fig. 12"},
        ),
    wildcard_constraints:
        **T2I_WILDCARDS,
    params:
        files=t2i_example_files,
        metrics=T2I_METRICS,
        examples=T2I["examples"],
    log:
        "logs/crel_t2i/fig12_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    script:
        "../../scripts/crel/t2i_fig12.py"
