"""Snakemake adapter: attention-mask sampling of one benchmark shard with one CLIP model, chunk by chunk (a
killed job resumes)."""

import polars as pl
import torch

from condeval.core.chunks import ChunkedWork, source_signature
from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder, write_parquet
from condeval.core.logs import log_to_file
from condeval.crc.pos import LexiconTagger, StanzaTagger
from condeval.crc.sampling import AttentionMaskSampler, sample_captions
from condeval.datasets.coco import shard_image_ids
from condeval.encoders.features import ClipEncoder

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
shard = int(snakemake.wildcards.shard)
captions = pl.read_parquet(snakemake.input.captions)
captions = captions.filter(pl.col("key").is_in(shard_image_ids(captions["key"].to_numpy(), p.shards, shard)))
device = device_for_gpus(snakemake.resources.get("gpu", 0))
tagger_config = dict(p.tagger)
tagger = (
    LexiconTagger.from_token_files(snakemake.input.tagger)
    if tagger_config["kind"] == "lexicon"
    else StanzaTagger(tagger_config["model_dir"], use_gpu=device == "cuda")
)
sampling = dict(p.sampling)
weight = sampling.pop("weight")
encoder = ClipEncoder(saved_folder(snakemake.input.model), device=device, **dict(p.loading))
sampler = AttentionMaskSampler(encoder, tagger, weight=weight, **sampling)
paths, words, keys = captions["path"].to_list(), captions["words"].to_list(), captions["key"].to_list()


def samples_of(items):
    return sample_captions(
        sampler, paths[items], words[items], keys[items], seed=p.seed, keep_distribution=p.keep_distribution
    )


fingerprint = {
    "model": source_signature(snakemake.input.model),
    "captions": source_signature(snakemake.input.captions),
    "shard": [shard, p.shards],
    "sampling": dict(p.sampling),
    "loading": dict(p.loading),
    "seed": p.seed,
    "tagger": dict(p.tagger),
    "keep_distribution": p.keep_distribution,
}
work = ChunkedWork(snakemake.output[0], fingerprint, len(keys), p.chunk_size)
samples = work.run_tables(samples_of)
write_parquet(samples, snakemake.output[0])
work.clear()
no_valid = int((~samples["has_valid_words"]).sum())
# The paper scores such a caption by its unmasked CLIPScore alone: every f_v is 0, nothing is flagged.
log.info(
    "%s shard %d: %d pairs sampled; %d captions have no maskable word (NOUN/PROPN/NUM/VERB/ADJ/ADV)",
    snakemake.wildcards.benchmark,
    shard,
    len(samples),
    no_valid,
)
log.info("CLIPScore mean %.4f, masked std mean %.4f", samples["clipscore"].mean(), samples["std"].mean())
