"""Snakemake adapter: samples of one shard of the queried conditions, seeded per (condition, sample)."""

import numpy as np
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import read_parquet, saved_folder
from condeval.core.logs import log_to_file
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import ATTRIBUTE_NAMES
from condeval.trust.samples import generate_samples, shard_conditions, write_samples

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w = snakemake.params, snakemake.wildcards
sampling = dict(p.sampling)
names = list(ATTRIBUTE_NAMES[w.dataset])
conditions = read_parquet(snakemake.input.conditions).select(names).to_numpy()
shard = int(w.shard)
mine = shard_conditions(conditions, shard, sampling["shards"])
pipe = AttributeDiffusionPipeline.from_pretrained(str(saved_folder(snakemake.input.model)))
pipe.to(device_for_gpus(snakemake.resources.get("gpu", 0)) or "cpu")
pipe.set_progress_bar_config(disable=True)
per_condition = sampling["per_condition"]
# ids: the condition's row in conditions.parquet times per_condition, plus the sample's index
first_ids = [int(k) * per_condition for k in range(shard, len(conditions), sampling["shards"])]
parts = [
    generate_samples(pipe, [condition], per_condition, seed=p.seed, num_inference_steps=sampling["num_inference_steps"],
                     batch_size=sampling["batch_size"], first_id=first)
    for condition, first in zip(mine, first_ids, strict=True)
]  # fmt: skip
images, attributes, seeds, ids = (np.concatenate([part[i] for part in parts]) for i in range(4))
write_samples(images, attributes, names, seeds, ids, snakemake.output.images, snakemake.output.manifest)
log.info("%d samples of %d conditions (shard %d of %d) at %d steps", len(images), len(mine), shard,
         sampling["shards"], sampling["num_inference_steps"])  # fmt: skip
