"""Snakemake adapter: the real support images on the samples' path at each scoring step: noised to the
step's level, the denoiser's block tokens (``step-<s>``) and/or a REPA generator's aligned features
(``aligned-step-<s>``) kept, one feature shard per step (ids: the real table's rows). The images are read and
noised a chunk at a time (a killed job resumes)."""

import numpy as np
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import (
    atomic_directory,
    files_sha256,
    fingerprint,
    read_parquet,
    saved_folder,
    write_folder_manifest,
)
from condeval.core.logs import log_to_file
from condeval.encoders.shards import write_feature_shard
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import ReleaseImages, attributes_of, training_support
from condeval.trust.translator import ChunkPlan, step_noise_levels, trajectory_features

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
settings, steps = dict(p.translator), sorted(p.translator["steps"])
table = read_parquet(i.table)
support = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
folder = saved_folder(i.model)
pipe = AttributeDiffusionPipeline.from_pretrained(str(folder))
pipe.to(device_for_gpus(snakemake.resources.get("gpu", 0)) or "cpu")
images = ReleaseImages(w.dataset, p.root, table.filter(support), p.image_size)
attributes = attributes_of(w.dataset, table)[support]
levels = step_noise_levels(pipe.scheduler, p.num_inference_steps, steps)
paths = {}  # file prefix -> (block, projector)
if p.keep["translator"]:
    paths["step"] = (settings["layer"], None)
if p.keep["aligned"]:
    paths["aligned-step"] = (pipe.repa_projector.config.depth, pipe.repa_projector)
ids = np.flatnonzero(support)
encoder = {"name": str(folder), "weights_sha256": files_sha256([i.model])}
kept = trajectory_features(
    pipe,
    images,
    attributes,
    levels,
    paths,
    snakemake.output.features,
    ChunkPlan(
        chunk_size=p.chunk_size,
        seed=p.seed,
        fingerprint=fingerprint([i.table], {"root": p.root, "size": p.image_size}),
    ),
)
with atomic_directory(snakemake.output.features) as out:
    for prefix, (layer, _) in paths.items():
        for k, (step, t) in enumerate(zip(steps, levels, strict=True)):
            write_feature_shard(
                out / f"{prefix}-{step}.safetensors",
                ids,
                kept[prefix, k],
                {"encoder": encoder, "layer": layer, "step": step, "t": t},
            )
        log.info(
            "%s: %d support images at steps %s (t %s), block %d",
            prefix,
            len(ids),
            steps,
            [round(t, 4) for t in levels],
            layer,
        )
write_folder_manifest(snakemake.output.features, snakemake.output.manifest)
