# Helpers of the image-to-text rules (i2t.smk, i2t_report.smk): the config section
# crel.image_to_text, wildcard constraints and input functions.
if "coco" not in config or "encoders" not in config:
    raise ValueError(
        "config key 'crel.image_to_text' needs the 'coco' and 'encoders' sections (the data and encoders it reads)"
    )
I2T = CREL["image_to_text"]
I2T_MODELS = list(I2T["models"])
I2T_METRICS = ["clip", "bert"]
I2T_ALPHA = f"{I2T['alpha']:g}"
design.check_embedding_alpha(
    "crel.image_to_text.alpha",
    I2T["alpha"],
    COCO["miniworld"]["val_images"] if COCO["source"] == "miniworld" else VAL2014_IMAGES,
)
if I2T["reliability"]["num_z0"] not in I2T["num_z0_curve"]:
    raise ValueError(
        f"crel.image_to_text.num_z0_curve {I2T['num_z0_curve']} must hold reliability.num_z0 = {I2T['reliability']['num_z0']} (Fig. 6's point there is Table 2's CReL-rho)"
    )


def temperature_variant(model, temperature):
    """The name of ``model`` sampled at ``temperature`` (the temperature ablation): ``<model>-temp<100·T>``."""
    return f"{model}-temp{round(100 * temperature):03d}"


def temperature_variants():
    """{variant name: (model, temperature)} of crel.image_to_text.temperature_sweep (empty without one)."""
    sweep = I2T.get("temperature_sweep")
    if sweep is None:
        return {}
    if sweep["model"] not in I2T["models"]:
        raise ValueError(
            f"crel.image_to_text.temperature_sweep.model {sweep['model']!r} is not one of crel.image_to_text.models {I2T_MODELS}"
        )
    variants = {temperature_variant(sweep["model"], t): (sweep["model"], t) for t in sweep["temperatures"]}
    if len(variants) != len(sweep["temperatures"]):
        raise ValueError(f"crel.image_to_text.temperature_sweep.temperatures {sweep['temperatures']} collide at 0.01")
    return variants


# A variant runs the per-model rules (generation, features, fit, evaluate) like a model of its own.
I2T_VARIANTS = temperature_variants()

I2T_WILDCARDS = {
    "model": "|".join([*I2T_MODELS, *I2T_VARIANTS]),
    "metric": "clip|bert",
    "shard": r"\d+",
    "alpha": r"0\.\d+|\de-\d+",
}

# The captions each model samples (rule generate_captions); the shared text_features rule extracts
# their features as source "captions-<model>".
GENERATED_CAPTIONS = "results/crel_i2t/captions/{name}/shard-{shard}.parquet"
register_caption_source("captions", GENERATED_CAPTIONS)
require_feature_encoder("text", "bert")  # BERT-SIM of references and captions


def captioner_inputs(wildcards):
    """A captioner as an input: the manifest of the folder train_captioner saves, or the configured folder."""
    model = I2T_VARIANTS.get(wildcards.model, (wildcards.model,))[0]
    section = I2T["models"][model]
    return section["path"] if "path" in section else saved_manifest(f"results/crel_i2t/captioners/{model}")


def captioner_dtype(wildcards):
    """The precision a captioner samples in (crel.image_to_text.models.<model>.dtype; auto: bfloat16 on a GPU)."""
    model = I2T_VARIANTS.get(wildcards.model, (wildcards.model,))[0]
    return I2T["models"][model].get("dtype", "auto")


def captioning_work(wildcards):
    """One generate_captions job's GPU work (condeval.crel.design.captioning_work): a shard of val's images."""
    model = I2T_VARIANTS.get(wildcards.model, (wildcards.model,))[0]
    section = I2T["models"][model]
    key = f"crel.image_to_text.models.{model}.path"
    parameters = model_size(key, section["path"]) if "path" in section else None
    images = -(-VAL2014_IMAGES // COCO["shards"])  # at most: a miniature's val is smaller
    return design.captioning_work(
        parameters, captioner_sampling(wildcards), captioner_dtype(wildcards), ENCODERS["batch_size"], images
    )


def i2t_fit_work(wildcards):
    """One i2t_fit job's GPU work: the VAE and DQR on at most COCO 2014 val's images."""
    return design.embedding_fit_work(VAL2014_IMAGES, I2T["vae"], I2T["dqr"])


def i2t_evaluate_work(wildcards):
    """One i2t_evaluate job's GPU work: PGD over the test fold's images."""
    return design.embedding_reliability_work(VAL2014_IMAGES, I2T["vae"], I2T["reliability"])


def i2t_num_z0_work(wildcards):
    """One i2t_num_z0 job's GPU work: the test fold's PGD at every num_z0 of the curve."""
    return design.embedding_reliability_work(VAL2014_IMAGES, I2T["vae"], I2T["reliability"], sum(I2T["num_z0_curve"]))


def captioner_train_inputs(wildcards):
    train = I2T["models"][wildcards.model]["train"]
    inputs = {"captions": coco_world(), "tokenizer": saved_manifest("results/encoders/tokenizer")}
    if train.get("vision_from_clip"):
        inputs["clip"] = trained_encoder_inputs("clip")
    return inputs


def captioner_train_params(wildcards):
    return canonical(I2T["models"][wildcards.model]["train"])


def captioner_sampling(wildcards):
    """generate()'s keywords: the shared crel.image_to_text.sampling, a model's own temperature if it
    sets one (the default config sets none), a variant's sweep temperature."""
    if wildcards.model in I2T_VARIANTS:
        return canonical({**I2T["sampling"], "temperature": I2T_VARIANTS[wildcards.model][1]})
    section = I2T["models"][wildcards.model]
    return canonical(
        {**I2T["sampling"], **({"temperature": section["temperature"]} if "temperature" in section else {})}
    )


def i2t_evaluate_inputs(wildcards):
    """What i2t_evaluate reads beyond :func:`i2t_feature_inputs`: the real captions' features in the
    metric's space (the manifold check's gallery)."""
    return {"gallery": feature_shards(wildcards.metric, REFERENCE_SOURCE)}


def i2t_temperature_scores(wildcards):
    return expand(
        "results/crel_i2t/{model}/{metric}/scores_alpha{alpha}.parquet",
        model=I2T_VARIANTS,
        metric=I2T_METRICS,
        alpha=wildcards.alpha,
    )


def i2t_temperature_targets(wildcards):
    if not I2T_VARIANTS:
        raise ValueError(
            "target 'crel_i2t_temperature' needs the config key crel.image_to_text.temperature_sweep (model, temperatures)"
        )
    return [f"reports/crel_i2t/temperature_alpha{I2T_ALPHA}.md"]


def i2t_feature_inputs(wildcards):
    """Every shard CReL needs for one model (image and reference features, the model's caption
    features) and the encoders that must have made them."""
    return {
        "clip_encoder": trained_encoder_inputs("clip"),
        "bert_encoder": trained_encoder_inputs("bert"),
        "image": feature_shards("clip", "val-images"),
        "reference_bert": feature_shards("bert", REFERENCE_SOURCE),
        "caption_clip": feature_shards("clip", f"captions-{wildcards.model}"),
        "caption_bert": feature_shards("bert", f"captions-{wildcards.model}"),
    }


def i2t_targets():
    return [
        "results/encoders/signal.json",
        f"reports/crel_i2t/table2_alpha{I2T_ALPHA}.md",
        f"reports/crel_i2t/fig3_violins_alpha{I2T_ALPHA}.png",
        f"reports/crel_i2t/fig4_examples_alpha{I2T_ALPHA}.png",
        *expand("reports/crel_i2t/card_{model}_alpha{alpha}.png", model=I2T_MODELS, alpha=I2T_ALPHA),
        *(["reports/crel_i2t/grounding.md"] if COCO["source"] == "miniworld" else []),  # needs the scenes
    ]


def i2t_num_z0_targets():
    """Fig. 6 (Appendix C.8), opt-in like the synthetic ablations: it repeats Table 2's search at each num_z0."""
    return [f"reports/crel_i2t/fig6_num_z0_alpha{I2T_ALPHA}.png"]


def i2t_scores(wildcards):
    return expand(
        "results/crel_i2t/{model}/{metric}/scores_alpha{alpha}.parquet",
        model=I2T_MODELS,
        metric=I2T_METRICS,
        alpha=wildcards.alpha,
    )


def i2t_example_files(wildcards):
    """Fig. 4's per-model files by name (the script's params): {"models": {model: {metric: {"lgm", "dqr"}}},
    "generated": {model: [caption shards]}}."""
    return {
        "models": {
            model: {
                metric: {kind: f"results/crel_i2t/{model}/{metric}/{kind}.ckpt" for kind in ("lgm", "dqr")}
                for metric in I2T_METRICS
            }
            for model in I2T_MODELS
        },
        "generated": i2t_generated_captions(wildcards),
    }


def i2t_generated_captions(wildcards):
    """{model: its generated caption shards}, for every model of crel.image_to_text.models."""
    return {model: expand(GENERATED_CAPTIONS, name=model, shard=SHARDS) for model in I2T_MODELS}


def i2t_grounding_inputs(wildcards):
    """The grounding report's inputs: every model's caption shards, the val captions and the mini-world's scenes."""
    return {
        "generated": [path for shards in i2t_generated_captions(wildcards).values() for path in shards],
        "captions": coco_captions("val"),
        "scenes": f"{COCO_ROOT}/annotations/scenes_val2014.json",
    }


def i2t_example_inputs(wildcards):
    """Fig. 4's inputs: the files of :func:`i2t_example_files`, the scores, the references' features and captions."""
    files = i2t_example_files(wildcards)
    return {
        "scores": i2t_scores(wildcards),
        "checkpoints": [
            path for metrics in files["models"].values() for kinds in metrics.values() for path in kinds.values()
        ],
        "generated": [path for shards in files["generated"].values() for path in shards],
        "reference_clip": feature_shards("clip", REFERENCE_SOURCE),
        "reference_bert": feature_shards("bert", REFERENCE_SOURCE),
        "captions": coco_captions("val"),
    }
