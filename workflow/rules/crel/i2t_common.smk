# Helpers of the image-to-text rules (i2t.smk, i2t_report.smk): the config section
# crel.image_to_text, wildcard constraints and input functions.
if "coco" not in config or "encoders" not in config:
    raise ValueError("config key 'crel.image_to_text' needs the 'coco' and 'encoders' sections (the data and encoders it reads)")
I2T = CREL["image_to_text"]
I2T_MODELS = list(I2T["models"])
I2T_METRICS = ["clip", "bert"]
I2T_ALPHA = f"{I2T['alpha']:g}"

I2T_WILDCARDS = {
    "model": "|".join(I2T_MODELS),
    "metric": "clip|bert",
    "shard": r"\d+",
    "alpha": r"0\.\d+|\de-\d+",
}

# The captions each model samples (rule generate_captions); the shared text_features rule extracts
# their features as source "captions-<model>".
GENERATED_CAPTIONS = "results/crel_i2t/captions/{name}/shard-{shard}.parquet"
register_caption_source("captions", GENERATED_CAPTIONS)


def captioner_inputs(wildcards):
    """A captioner as an input: the manifest of the folder train_captioner saves, or the configured folder."""
    section = I2T["models"][wildcards.model]
    return section["path"] if "path" in section else saved_manifest(f"results/crel_i2t/captioners/{wildcards.model}")


def captioner_train_inputs(wildcards):
    train = I2T["models"][wildcards.model]["train"]
    inputs = {"captions": coco_world(), "tokenizer": saved_manifest("results/encoders/tokenizer")}
    if train.get("vision_from_clip"):
        inputs["clip"] = trained_encoder_inputs("clip")
    return inputs


def captioner_train_params(wildcards):
    return canonical(I2T["models"][wildcards.model]["train"])


def captioner_sampling(wildcards):
    section = I2T["models"][wildcards.model]
    return canonical({**I2T["sampling"], "temperature": section.get("temperature", 1.0)})


def i2t_feature_inputs(wildcards):
    """Every shard CReL needs for one model: image and reference features, the model's caption features."""
    return {
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
        f"reports/crel_i2t/fig6_num_z0_alpha{I2T_ALPHA}.png",
        *expand("reports/crel_i2t/card_{model}_alpha{alpha}.png", model=I2T_MODELS, alpha=I2T_ALPHA),
    ]


def i2t_scores(wildcards):
    return expand("results/crel_i2t/{model}/{metric}/scores_alpha{alpha}.parquet", model=I2T_MODELS, metric=I2T_METRICS, alpha=wildcards.alpha)


def i2t_example_inputs(wildcards):
    return {
        "scores": i2t_scores(wildcards),
        "lgms": expand("results/crel_i2t/{model}/{metric}/lgm.ckpt", model=I2T_MODELS, metric=I2T_METRICS),
        "dqrs": expand("results/crel_i2t/{model}/{metric}/dqr.ckpt", model=I2T_MODELS, metric=I2T_METRICS),
        "reference_clip": feature_shards("clip", REFERENCE_SOURCE),
        "reference_bert": feature_shards("bert", REFERENCE_SOURCE),
        "generated": expand(GENERATED_CAPTIONS, name=I2T_MODELS, shard=SHARDS),
        "captions": coco_captions("val"),
    }
