# L2-normalised features of the val split, one safetensors shard per image-id range
# (coco.shards): a failed or edited shard reruns alone. Each shard's metadata records the
# encoder's name, revision and weights hash and the preprocessing.


rule image_features:
    """Image features (CLIP, and DINOv2 where a track reads it) of one shard of the val images or of a
    registered source of generated images."""
    input:
        unpack(image_source_inputs),
        encoders=feature_encoder_inputs("image"),
    output:
        feature_outputs("image"),
    wildcard_constraints:
        **SHARED_WILDCARDS,
        source=image_source_constraint(),
    params:
        encoders=FEATURE_ENCODERS["image"],
        dtypes={encoder: ENCODERS[encoder].get("dtype", "auto") for encoder in FEATURE_ENCODERS["image"]},
        shards=COCO["shards"],
        batch_size=ENCODERS["batch_size"],
        chunk_size=chunk_items(ENCODERS["batch_size"]),
    log:
        "logs/shared/features/images/{source}/shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        **gpu_resources(image_feature_work),
        gpu=0,
    script:
        "../../scripts/shared/image_features.py"


rule text_features:
    """CLIP-text features (and BERT's where a track reads them) of one shard of the val reference captions
    or of a registered source of generated captions."""
    input:
        unpack(text_source_inputs),
        encoders=feature_encoder_inputs("text"),
    output:
        feature_outputs("text"),
    wildcard_constraints:
        **SHARED_WILDCARDS,
        source=text_source_constraint(),
    params:
        encoders=FEATURE_ENCODERS["text"],
        max_length={encoder: ENCODERS[encoder].get("max_length") for encoder in FEATURE_ENCODERS["text"]},
        dtypes={encoder: ENCODERS[encoder].get("dtype", "auto") for encoder in FEATURE_ENCODERS["text"]},
        shards=COCO["shards"],
        batch_size=ENCODERS["batch_size"],
        chunk_size=chunk_items(ENCODERS["batch_size"]),
    log:
        "logs/shared/features/texts/{source}/shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        **gpu_resources(text_feature_work),
        gpu=0,
    script:
        "../../scripts/shared/text_features.py"
