# Helpers of the text-to-image rules (t2i.smk, t2i_report.smk): the config section
# crel.text_to_image, wildcard constraints and input functions.
if "coco" not in config or "encoders" not in config or "dino" not in config["encoders"]:
    raise ValueError(
        "config key 'crel.text_to_image' needs the 'coco' and 'encoders' sections, with encoders.dino (DINO-SIM's encoder)"
    )
T2I = CREL["text_to_image"]
T2I_MODELS = list(T2I["models"])
T2I_METRICS = ["clip", "dino"]
T2I_ALPHA = f"{T2I['alpha']:g}"
design.check_embedding_alpha("crel.text_to_image.alpha", T2I["alpha"], T2I["items"])
for _metric, _starts in T2I["num_z0"].items():
    if _starts not in T2I["num_z0_curve"]:
        raise ValueError(
            f"crel.text_to_image.num_z0_curve {T2I['num_z0_curve']} must hold num_z0.{_metric} = {_starts} (Fig. 7's point there is Table 3's CReL-rho)"
        )
if COCO["source"] == "miniworld" and T2I["items"] > COCO["miniworld"]["val_images"]:
    raise ValueError(
        f"config key 'crel.text_to_image.items' asks {T2I['items']} val images; the mini-world has "
        f"coco.miniworld.val_images = {COCO['miniworld']['val_images']}"
    )

_TRAINED_FAMILIES = {T2I["models"][m]["family"] for m in T2I_MODELS if "train" in T2I["models"][m]}
for _family in _TRAINED_FAMILIES:
    _needs = ["autoencoders." + ("vq" if _family == "kandinsky" else "kl"), *(["t5"] if _family != "kandinsky" else [])]
    for _key in _needs:
        _section, _, _kind = _key.partition(".")
        if _section not in T2I or (_kind and _kind not in T2I[_section]):
            raise ValueError(
                f"config key 'crel.text_to_image.{_key}' is missing: a trained {_family} generator needs it"
            )

T2I_WILDCARDS = {
    "model": "|".join(T2I_MODELS),
    "metric": "clip|dino",
    "shard": r"\d+",
    "alpha": r"0\.\d+|\de-\d+",
    "kind": "kl|vq",
}

# The images each model draws (generate_images): a folder of PNGs and its manifest per shard;
# the shared image_features rule extracts their features as source "generated-<model>".
GENERATED_IMAGES = "results/crel_t2i/images/{name}/shard-{shard}.parquet"
register_image_source("generated", GENERATED_IMAGES)
require_feature_encoder("image", "dino")  # DINO-SIM of val and generated images
# Which autoencoder each family's pipeline holds.
FAMILY_AUTOENCODER = {"sd3": "kl", "flux": "kl", "kandinsky": "vq"}


def t2i_trained(model):
    return "train" in T2I["models"][model]


def generator_inputs(wildcards):
    """A generator as inputs: ``model``, the manifest of the folder train_t2i_generator saves or the
    configured folder, and for a configured Kandinsky with ``prior_path``, ``prior``."""
    section = T2I["models"][wildcards.model]
    if "path" not in section:
        return {"model": saved_manifest(f"results/crel_t2i/generators/{wildcards.model}")}
    return {"model": section["path"], **({"prior": section["prior_path"]} if "prior_path" in section else {})}


def generator_dtype(wildcards):
    """The precision a generator samples in (crel.text_to_image.models.<model>.dtype; auto: bfloat16 on a GPU)."""
    return T2I["models"][wildcards.model].get("dtype", "auto")


def generation_work(wildcards):
    """One generate_images job's GPU work (condeval.crel.design.generation_work): a shard of the items."""
    section = T2I["models"][wildcards.model]
    key = f"crel.text_to_image.models.{wildcards.model}"
    parameters = model_size(f"{key}.path", section["path"]) if "path" in section else None
    prior = model_size(f"{key}.prior_path", section["prior_path"]) if "prior_path" in section else None
    images = -(-T2I["items"] // COCO["shards"])
    return design.generation_work(
        section, parameters, prior, T2I["image_size"], T2I["max_length"], T2I["batch_size"], images
    )


def generator_train_inputs(wildcards):
    """What training one generator reads: the world, tokenizer, CLIP, its family's autoencoder (and T5)."""
    family = T2I["models"][wildcards.model]["family"]
    inputs = {
        "captions": coco_world(),
        "tokenizer": saved_manifest("results/encoders/tokenizer"),
        "clip": trained_encoder_inputs("clip"),
        "autoencoder": saved_manifest(f"results/crel_t2i/autoencoders/{FAMILY_AUTOENCODER[family]}"),
    }
    if family != "kandinsky":
        inputs["t5"] = saved_manifest("results/crel_t2i/t5")
    return inputs


def generator_train_params(wildcards):
    section = T2I["models"][wildcards.model]
    return canonical({"family": section["family"], **section["train"]})


#: Generated images per model t2i_signal probes for colour and shape.
T2I_PROBE_IMAGES = 3000


def t2i_signal_work(wildcards):
    """The t2i_signal job's GPU work: each model's probe images and the real gallery through CLIP and DINO."""
    images = len(T2I_MODELS) * T2I_PROBE_IMAGES + SIGNAL_GALLERY
    encoders = [
        (encoder_parameters("clip"), "image", 257),
        (encoder_parameters("dino"), "image", 257),
        (encoder_parameters("clip"), "text", 77),
    ]
    return encoding_work(encoders, images, ENCODERS["batch_size"])


def t2i_fit_work(wildcards):
    """One t2i_fit job's GPU work: the VAE and DQR on the generated items."""
    return design.embedding_fit_work(T2I["items"], T2I["vae"], T2I["dqr"])


def t2i_evaluate_work(wildcards):
    """One t2i_evaluate job's GPU work: PGD over the test fold at the metric's num_z0."""
    return design.embedding_reliability_work(T2I["items"], T2I["vae"], t2i_reliability_params(wildcards))


def t2i_feature_inputs(wildcards):
    """Every shard CReL needs for one model, by :data:`condeval.crel.text_to_image.FEATURE_SOURCES`
    name, and the encoders that must have made them."""
    return {
        "clip_encoder": trained_encoder_inputs("clip"),
        "dino_encoder": trained_encoder_inputs("dino"),
        "generated_clip": feature_shards("clip", f"generated-{wildcards.model}"),
        "caption_clip": feature_shards("clip", REFERENCE_SOURCE),
        "real_dino": feature_shards("dino", VAL_IMAGES_SOURCE),
        "generated_dino": feature_shards("dino", f"generated-{wildcards.model}"),
    }


def t2i_scores(wildcards):
    return expand(
        "results/crel_t2i/{model}/{metric}/scores_alpha{alpha}.parquet",
        model=T2I_MODELS,
        metric=T2I_METRICS,
        alpha=wildcards.alpha,
    )


def t2i_autoencoder_params(wildcards):
    """The job's autoencoder kind's training settings."""
    return canonical(T2I["autoencoders"][wildcards.kind])


def t2i_sampling_params(wildcards):
    """The job's generator's sampling settings."""
    return canonical(T2I["models"][wildcards.model]["sampling"])


def t2i_family(wildcards):
    """The job's generator's family (sd3, flux, kandinsky)."""
    return T2I["models"][wildcards.model]["family"]


def t2i_reliability_params(wildcards):
    """The worst-case search's settings at the job's metric's num_z0."""
    return canonical({**T2I["reliability"], "num_z0": T2I["num_z0"][wildcards.metric]})


def t2i_generated(wildcards=None):
    """Every model's image manifests."""
    return expand(GENERATED_IMAGES, name=T2I_MODELS, shard=SHARDS)


def t2i_example_files(wildcards):
    """Fig. 12's per-model files by name (the script's params): {"models": {model: {metric: {"lgm", "dqr"}}},
    "generated": {model: [image manifests]}}."""
    return {
        "models": {
            model: {
                metric: {kind: f"results/crel_t2i/{model}/{metric}/{kind}.ckpt" for kind in ("lgm", "dqr")}
                for metric in T2I_METRICS
            }
            for model in T2I_MODELS
        },
        "generated": {model: expand(GENERATED_IMAGES, name=model, shard=SHARDS) for model in T2I_MODELS},
    }


def t2i_example_inputs(wildcards):
    """Fig. 12's inputs: the files of :func:`t2i_example_files`, the scores, the real images' features
    in each metric's space and the captions."""
    files = t2i_example_files(wildcards)
    return {
        "scores": t2i_scores(wildcards),
        "checkpoints": [
            path for metrics in files["models"].values() for kinds in metrics.values() for path in kinds.values()
        ],
        "generated": [path for manifests in files["generated"].values() for path in manifests],
        "real_clip": feature_shards("clip", VAL_IMAGES_SOURCE),
        "real_dino": feature_shards("dino", VAL_IMAGES_SOURCE),
        "captions": coco_captions("val"),
    }


def t2i_targets():
    return [
        "results/crel_t2i/signal.json",
        f"reports/crel_t2i/table3_alpha{T2I_ALPHA}.md",
        f"reports/crel_t2i/fig11_violins_alpha{T2I_ALPHA}.png",
        f"reports/crel_t2i/fig12_examples_alpha{T2I_ALPHA}.png",
        *expand("reports/crel_t2i/card_{model}_alpha{alpha}.png", model=T2I_MODELS, alpha=T2I_ALPHA),
    ]


def t2i_num_z0_targets():
    """Fig. 7 (Appendix C.8), opt-in as Fig. 6: it repeats Table 3's search at each num_z0."""
    return [f"reports/crel_t2i/fig7_num_z0_alpha{T2I_ALPHA}.png"]
