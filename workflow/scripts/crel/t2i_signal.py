"""Snakemake adapter: the text-to-image generators' signal (CLIP retrieval, requested colour and
shape) and DINO-SIM's same-scene AUC, on the items' val images."""

from pathlib import Path

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import read_json, saved_folder, write_json
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions
from condeval.encoders.dino import DinoEncoder, dino_signal
from condeval.encoders.features import ClipEncoder
from condeval.generators.images import read_image_manifest
from condeval.generators.signal import AttributeProbe, at_size, generation_signal, single_objects

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i = snakemake.params, snakemake.input
pairs = evaluation_pairs(load_captions(i.captions, image_dir(i.captions))).sort("image_id")
scenes_file = Path(i.captions).parent / "scenes_val2014.json"
scenes = read_json(scenes_file) if scenes_file.exists() else None
device = device_for_gpus(snakemake.resources.get("gpu", 0))
clip = ClipEncoder(saved_folder(i.clip), device=device, dtype=p.dtypes["clip"])


probe = None
train_scenes_file = Path(i.train_captions).parent / "scenes_train2014.json"
if train_scenes_file.exists():  # the probe: single-object train images of the mini-world
    train_scenes = read_json(train_scenes_file)
    train = load_captions(i.train_captions, image_dir(i.train_captions)).unique("image_id").sort("image_id")
    train_objects = [train_scenes[str(k)] for k in train["image_id"]]
    lone = single_objects(train_objects)[: p.probe_images]
    probe = AttributeProbe(clip).fit(
        [at_size(train["path"][k], p.image_size) for k in lone], [train_objects[k][0] for k in lone]
    )
    log.info("attribute probe trained on %d single-object train images", len(lone))
out = {"models": {}}
manifests = [list(i.generated)[k * p.shards : (k + 1) * p.shards] for k in range(len(p.models))]
for model, shards in zip(p.models, manifests, strict=True):
    ids, paths = [], []
    for manifest in shards:
        shard_ids, shard_paths = read_image_manifest(manifest)
        ids += shard_ids.tolist()
        paths += shard_paths
    rows = pairs.filter(pairs["image_id"].is_in(ids)).sort("image_id")
    order = sorted(range(len(ids)), key=ids.__getitem__)
    generated = [paths[k] for k in order]
    # The same reader on the real images at the generated size (the ceiling a generator at this size can reach),
    # each read when its batch is: memory holds a batch, not 40,504 images at 512 px
    real = [at_size(path, p.image_size) for path in rows["path"]]
    item_scenes = [scenes[str(k)] for k in rows["image_id"]] if scenes else [[] for _ in range(rows.height)]
    out["models"][model] = generation_signal(
        clip, generated, real, rows["caption"].to_list(), item_scenes, gallery=p.gallery, probe=probe
    )
    log.info("%s: %s", model, out["models"][model])
if scenes:
    dino = DinoEncoder(saved_folder(i.dino), device=device, dtype=p.dtypes["dino"])
    head = pairs.head(1000)
    out["dino"] = dino_signal(
        dino, head["path"].to_list(), [scenes[str(k)] for k in head["image_id"]], head["image_id"].to_list()
    )
    log.info("DINO: %s", out["dino"])
write_json(out, snakemake.output[0])
