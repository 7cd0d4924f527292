# The COCO-format data and the encoders that every image-text track shares (config sections
# `coco:` and `encoders:`). Offline both are generated here: the miniature COCO world and tiny
# CLIP / BERT trained on its train split. On a cluster, `coco.source: files` reads the real
# MS-COCO 2014 folder and `encoders.<name>.path` loads saved checkpoints with from_pretrained.
#
# Feature rules and training rules declare `gpu=0` (the CPU is the default); a site raises it
# with --set-resources (profiles/slurm does) and the job runs on CUDA.
import re

from condeval.datasets.coco import VAL2014_IMAGES  # noqa: E402
from condeval.datasets.miniworld import SHAPES  # noqa: E402

COCO = track_config("coco")
ENCODERS = track_config("encoders")
COCO_ROOT = COCO["root"]
ENCODER_NAMES = ("clip", "bert")
#: What each trained encoder's `train.model` keywords reach, and what the workflow passes it itself.
ENCODER_MODEL_FACTORIES = {
    "clip": ("condeval.encoders.clip:ClipSizes", ()),
    "bert": ("condeval.encoders.bert:tiny_bert_config", ("tokenizer", "max_length")),
    "dino": ("condeval.encoders.dino:tiny_dinov2_config", ("image_size",)),
}
for _name, (_factory, _fixed) in ENCODER_MODEL_FACTORIES.items():
    if "train" in ENCODERS.get(_name, {}):
        check_keywords(f"encoders.{_name}.train.model", ENCODERS[_name]["train"]["model"], _factory, _fixed)

SHARED_WILDCARDS = {
    "split": "train|val",
    "encoder": "clip|bert|dino",
    "shard": r"\d+",
}


def coco_captions(split):
    return f"{COCO_ROOT}/annotations/captions_{split}2014.json"


def coco_world():
    """Inputs that stand for the whole COCO folder (captions files; with the mini-world, its rule's outputs)."""
    return [coco_captions("train"), coco_captions("val")]


def trained_encoder_inputs(name):
    """An encoder as an input: the manifest of results/encoders/<name> (trained here) or the configured folder."""
    section = ENCODERS[name]
    return section["path"] if "path" in section else saved_manifest(f"results/encoders/{name}")


def novel_shapes():
    """The mini-world shapes no encoder trains on (FOIL-nocaps' novel classes); none for real COCO."""
    if COCO["source"] != "miniworld":
        return []
    shapes = list(COCO["miniworld"].get("novel_shapes", []))
    unknown = [shape for shape in shapes if shape not in SHAPES]
    if unknown:
        raise ValueError(
            f"config key 'coco.miniworld.novel_shapes': {unknown} are not mini-world shapes {list(SHAPES)}"
        )
    if len(shapes) >= len(SHAPES) - 1:
        raise ValueError("config key 'coco.miniworld.novel_shapes': at least two shapes must stay seen")
    return shapes


NOVEL_SHAPES = novel_shapes()


def word_tokenizer_needed():
    return COCO["source"] == "miniworld"


SHARDS = list(range(COCO["shards"]))


def feature_shards(encoder, source):
    return expand(
        "results/features/{encoder}/{source}/shard-{shard}.safetensors", encoder=encoder, source=source, shard=SHARDS
    )


# Generated texts whose features the shared text_features rule extracts, declared by the tracks
# that generate them (shared rules know no track's outputs): feature source "<prefix>-<name>"
# reads the shard that CAPTION_SOURCES[prefix] names. A track registers its prefix in its helpers,
# which the Snakefile includes before the shared rules.
CAPTION_SOURCES = {}
REFERENCE_SOURCE = "val-reference"


def register_caption_source(prefix, pattern):
    """Declare that feature source ``<prefix>-<name>`` reads the parquet shard ``pattern`` (with {name}, {shard})."""
    if not re.fullmatch(r"[a-z][a-z0-9]*", prefix) or REFERENCE_SOURCE.startswith(f"{prefix}-"):
        raise ValueError(f"caption source prefix {prefix!r} must be lower-case letters and digits, and not 'val'")
    missing = [field for field in ("{name}", "{shard}") if field not in pattern]
    if missing:
        raise ValueError(f"caption source {prefix!r}: pattern {pattern!r} lacks {missing}")
    if CAPTION_SOURCES.get(prefix, pattern) != pattern:
        raise ValueError(
            f"caption source {prefix!r} is registered twice, as {CAPTION_SOURCES[prefix]!r} and {pattern!r}"
        )
    CAPTION_SOURCES[prefix] = pattern


def text_source_constraint():
    """Wildcard constraint of {source} in text features: the references or a registered caption source."""
    return "|".join([REFERENCE_SOURCE, *(rf"{prefix}-[a-z0-9-]+" for prefix in CAPTION_SOURCES)])


def text_source_inputs(wildcards):
    """Texts of a feature source: the val evaluation captions, or a registered source's generated shard."""
    if wildcards.source == REFERENCE_SOURCE:
        return {"captions": coco_captions("val")}
    prefix, name = wildcards.source.split("-", 1)
    generated = CAPTION_SOURCES[prefix].format(name=name, shard=wildcards.shard)
    return {"captions": coco_captions("val"), "generated": generated}


# Generated images whose features the shared image_features rule extracts, declared like caption
# sources: feature source "<prefix>-<name>" reads the images that the manifest (a parquet of
# image_id and file) IMAGE_SOURCES[prefix] names. The val images themselves are source "val-images".
IMAGE_SOURCES = {}
VAL_IMAGES_SOURCE = "val-images"


def register_image_source(prefix, pattern):
    """Declare that image feature source ``<prefix>-<name>`` reads the image manifest ``pattern`` (with {name}, {shard})."""
    if not re.fullmatch(r"[a-z][a-z0-9]*", prefix) or prefix == "val" or prefix in CAPTION_SOURCES:
        raise ValueError(
            f"image source prefix {prefix!r} must be lower-case letters and digits, not 'val' nor a caption source"
        )
    missing = [field for field in ("{name}", "{shard}") if field not in pattern]
    if missing:
        raise ValueError(f"image source {prefix!r}: pattern {pattern!r} lacks {missing}")
    if IMAGE_SOURCES.get(prefix, pattern) != pattern:
        raise ValueError(f"image source {prefix!r} is registered twice, as {IMAGE_SOURCES[prefix]!r} and {pattern!r}")
    IMAGE_SOURCES[prefix] = pattern


def image_source_constraint():
    """Wildcard constraint of {source} in image features: the val images or a registered image source."""
    return "|".join([VAL_IMAGES_SOURCE, *(rf"{prefix}-[a-z0-9-]+" for prefix in IMAGE_SOURCES)])


def image_source_inputs(wildcards):
    """Images of a feature source: the val split, or a registered source's manifest of generated images."""
    if wildcards.source == VAL_IMAGES_SOURCE:
        return {"captions": coco_captions("val")}
    prefix, name = wildcards.source.split("-", 1)
    return {
        "captions": coco_captions("val"),
        "generated": IMAGE_SOURCES[prefix].format(name=name, shard=wildcards.shard),
    }


# The encoders each kind of feature source is embedded with, in one job per source shard (a job's
# imports and model loading cost more than a tiny shard's encoding). CLIP always; a track that reads
# another encoder's features requires it in its helpers (image-to-text: BERT of texts; text-to-image:
# DINOv2 of images), which the Snakefile includes before the shared rules.
FEATURE_ENCODERS = {"image": ["clip"], "text": ["clip"]}


def require_feature_encoder(kind, encoder):
    """Declare that every ``kind`` (``image`` or ``text``) feature source is also embedded with ``encoder``."""
    allowed = {"image": ("clip", "dino"), "text": ("clip", "bert")}[kind]
    if encoder not in allowed:
        raise ValueError(f"{kind} features come from {list(allowed)}, not {encoder!r}")
    if encoder not in FEATURE_ENCODERS[kind]:
        FEATURE_ENCODERS[kind].append(encoder)


def feature_outputs(kind):
    """The feature shards one job writes for a source shard: one per encoder of ``kind``, in that order."""
    return expand("results/features/{encoder}/{{source}}/shard-{{shard}}.safetensors", encoder=FEATURE_ENCODERS[kind])


def feature_encoder_inputs(kind):
    """The encoders of ``kind`` as inputs, in :func:`feature_outputs`' order."""
    return [trained_encoder_inputs(encoder) for encoder in FEATURE_ENCODERS[kind]]


def feature_tokens(name, kind):
    """Tokens per item encoder ``name`` reads for ``kind``: ViT/14s at 224 px 257, CLIP text 77, BERT its max_length."""
    if name == "bert":
        return ENCODERS["bert"].get("max_length", 512)
    return 257 if kind == "image" else 77


def encoder_parameters(name):
    """An encoder's catalogued or measured parameters; None for one this run trains."""
    return model_size(f"encoders.{name}.path", ENCODERS[name]["path"]) if "path" in ENCODERS[name] else None


def feature_work(kind, wildcards):
    """One image_features / text_features job's GPU work: a shard of val's images or evaluation captions
    (one per image; at most COCO 2014's val) through each encoder of ``kind``."""
    encoders = [(encoder_parameters(name), kind, feature_tokens(name, kind)) for name in FEATURE_ENCODERS[kind]]
    return encoding_work(encoders, -(-VAL2014_IMAGES // COCO["shards"]), ENCODERS["batch_size"])


#: Images of encoder_signal's retrieval gallery.
SIGNAL_GALLERY = 1000


def encoder_signal_work(wildcards):
    """The encoder_signal job's GPU work: the gallery's images and five captions each through CLIP and BERT."""
    encoders = [
        (encoder_parameters("clip"), "image", 257),
        (encoder_parameters("clip"), "text", 77),
        (encoder_parameters("bert"), "text", feature_tokens("bert", "text")),
    ]
    return encoding_work(encoders, 5 * SIGNAL_GALLERY, ENCODERS["batch_size"])


def image_feature_work(wildcards):
    return feature_work("image", wildcards)


def text_feature_work(wildcards):
    return feature_work("text", wildcards)
