# L2-normalised features of the val split, one safetensors shard per image-id range
# (coco.shards): a failed or edited shard reruns alone. Each shard's metadata records the
# encoder's name, revision and weights hash and the preprocessing.


rule image_features:
    """Image features (CLIP or DINOv2) of the val images or of a registered source of generated images."""
    input:
        unpack(image_source_inputs),
        encoder=wildcard_encoder_inputs,
    output:
        "results/features/{encoder}/{source}/shard-{shard}.safetensors",
    wildcard_constraints:
        **{**SHARED_WILDCARDS, "encoder": "clip|dino"},
        source=image_source_constraint(),
    params:
        shards=COCO["shards"],
        batch_size=ENCODERS["batch_size"],
    log:
        "logs/shared/features/{encoder}/{source}/shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/shared/image_features.py"


rule text_features:
    input:
        unpack(text_source_inputs),
        encoder=wildcard_encoder_inputs,
    output:
        "results/features/{encoder}/{source}/shard-{shard}.safetensors",
    wildcard_constraints:
        **{**SHARED_WILDCARDS, "encoder": "clip|bert"},
        source=text_source_constraint(),
    params:
        max_length=wildcard_encoder_max_length,
        shards=COCO["shards"],
        batch_size=ENCODERS["batch_size"],
    log:
        "logs/shared/features/{encoder}/{source}/shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/shared/text_features.py"
