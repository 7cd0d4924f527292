"""Snakemake adapter: measure the encoders' signal on held-out val images (README, tests)."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder, write_json
from condeval.core.logs import log_to_file
from condeval.datasets import read_json
from condeval.datasets.coco import coco_root
from condeval.datasets.miniworld import SHAPES
from condeval.encoders.features import BertEncoder, ClipEncoder
from condeval.encoders.signal import bert_signal, clip_signal, shape_naming
from condeval.encoders.train import coco_split

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
device = device_for_gpus(snakemake.resources.get("gpu", 0))
root = coco_root(snakemake.input.captions[0])
frame, captions = coco_split(root, "val", p.gallery)
clip = ClipEncoder(saved_folder(snakemake.input.clip), device=device, dtype=p.dtypes["clip"])
bert = BertEncoder(
    saved_folder(snakemake.input.bert), device=device, max_length=p.bert_max_length, dtype=p.dtypes["bert"]
)
signal = {
    "clip": {**clip.identity, **clip_signal(clip, frame["path"].to_list(), [c[0] for c in captions])},
    "bert": {**bert.identity, **bert_signal(bert, captions)},
}
scenes_path = root / "annotations" / "scenes_val2014.json"
if scenes_path.exists():  # the mini-world's scene truth: shape naming on every val image holding one object
    everything, _ = coco_split(root, "val")
    scenes = read_json(scenes_path, dict)
    paths, objects = everything["path"].to_list(), [scenes[str(i)] for i in everything["image_id"].to_list()]
    seen = [shape for shape in SHAPES if shape not in set(p.novel_shapes)]
    signal["clip"].update(shape_naming(clip, paths, objects, seen))
    signal["clip"]["naming_all_shapes"] = shape_naming(clip, paths, objects)
write_json(signal, snakemake.output[0])
log.info("encoder signal: %s", signal)
