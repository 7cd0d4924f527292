"""Snakemake adapter: measure the encoders' signal on held-out val images (README, tests)."""
import torch

from condeval.core.io import saved_folder, write_json
from condeval.core.logs import log_to_file
from condeval.core.devices import device_for_gpus
from condeval.datasets.coco import coco_root
from condeval.encoders.features import BertEncoder, ClipEncoder
from condeval.encoders.signal import bert_signal, clip_signal
from condeval.encoders.train import coco_split

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
device = device_for_gpus(snakemake.resources.get("gpu", 0))
frame, captions = coco_split(coco_root(snakemake.input.captions[0]), "val", p.gallery)
clip = ClipEncoder(saved_folder(snakemake.input.clip), device=device)
bert = BertEncoder(saved_folder(snakemake.input.bert), device=device, max_length=p.bert_max_length)
signal = {
    "clip": {**clip.identity, **clip_signal(clip, frame["path"].to_list(), [c[0] for c in captions])},
    "bert": {**bert.identity, **bert_signal(bert, captions)},
}
write_json(signal, snakemake.output[0])
log.info("encoder signal: %s", signal)
