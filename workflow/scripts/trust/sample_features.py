"""Snakemake adapter: one shard of samples in every space it is scored in (ids: sample_id), a chunk of samples
at a time (a killed job resumes)."""

from functools import partial

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.encoders.features import image_feature_encoder
from condeval.trust.samples import encode_sample_shard

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
device = device_for_gpus(snakemake.resources.get("gpu", 0))
encoders = {
    extractor: partial(
        image_feature_encoder, saved_folder(snakemake.input[extractor]), device=device, **dict(p.loading[extractor])
    )
    for extractor in p.extractors
}
shapes = encode_sample_shard(
    snakemake.input.samples,
    p.names,
    encoders,
    snakemake.output.features,
    batch_size=p.batch_size,
    chunk_size=p.chunk_size,
)
write_folder_manifest(snakemake.output.features, snakemake.output.manifest)
for extractor, shape in shapes.items():
    log.info("%s: %d x %d features of %s", extractor, *shape, snakemake.input.samples)
