"""Snakemake adapter: samples of one shard of the queried conditions, seeded per (condition, sample), written
chunk by chunk (a killed job resumes)."""

import torch

from condeval.core.chunks import source_signature
from condeval.core.devices import device_for_gpus
from condeval.core.io import read_parquet, saved_folder
from condeval.core.logs import log_to_file
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import ATTRIBUTE_NAMES
from condeval.trust.samples import SampleShard, SamplingSettings, generate_sample_shard, shard_conditions

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
frame = generate_sample_shard(
    pipe,
    SampleShard(mine, first_ids, names),
    snakemake.output.images,
    snakemake.output.manifest,
    SamplingSettings(
        per_condition=per_condition,
        num_inference_steps=sampling["num_inference_steps"],
        seed=p.seed,
        batch_size=sampling["batch_size"],
    ),
    chunk_size=p.chunk_size,
    fingerprint={"model": source_signature(snakemake.input.model)},
)
log.info(
    "%d samples of %d conditions (shard %d of %d) at %d steps",
    frame.height,
    len(mine),
    shard,
    sampling["shards"],
    sampling["num_inference_steps"],
)
