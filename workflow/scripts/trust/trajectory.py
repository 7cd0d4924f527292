"""Snakemake adapter: one shard of trust_generate's samples drawn again (same seeds; latents only), the
denoiser's block tokens (``step-<s>``, the translator's input) and/or a REPA generator's aligned features
(``aligned-step-<s>``) kept at each scoring step (one feature shard per step, ids: sample_id)."""

import numpy as np
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import atomic_directory, files_sha256, read_parquet, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.encoders.shards import write_feature_shard
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import ATTRIBUTE_NAMES
from condeval.trust.samples import SamplingSettings, generate_samples, shard_conditions
from condeval.trust.translator import TrajectoryTap

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w = snakemake.params, snakemake.wildcards
sampling, settings = dict(p.sampling), dict(p.translator)
steps = sorted(settings["steps"])
if steps[-1] >= sampling["num_inference_steps"]:
    raise ValueError(
        f"trust.translator.steps {steps} must lie below sampling.num_inference_steps "
        f"({sampling['num_inference_steps']})"
    )
conditions = read_parquet(snakemake.input.conditions).select(list(ATTRIBUTE_NAMES[w.dataset])).to_numpy()
shard, per_condition = int(w.shard), sampling["per_condition"]
folder = saved_folder(snakemake.input.model)
pipe = AttributeDiffusionPipeline.from_pretrained(str(folder))
pipe.to(device_for_gpus(snakemake.resources.get("gpu", 0)) or "cpu")
pipe.set_progress_bar_config(disable=True)
taps = {}  # file prefix -> tap
if p.keep["translator"]:
    taps["step"] = TrajectoryTap(pipe.transformer, settings["layer"], steps)
if p.keep["aligned"]:
    taps["aligned-step"] = TrajectoryTap.aligned(pipe, steps)


def tap(*args) -> dict:
    for each in taps.values():
        each(*args)
    return {}


drawing = SamplingSettings(
    per_condition=per_condition,
    num_inference_steps=sampling["num_inference_steps"],
    seed=p.seed,
    batch_size=sampling["batch_size"],
)
ids = []
for k, condition in zip(
    range(shard, len(conditions), sampling["shards"]),
    shard_conditions(conditions, shard, sampling["shards"]),
    strict=True,
):
    *_, part_ids = generate_samples(
        pipe,
        [condition],
        drawing,
        first_id=k * per_condition,
        callback=tap,
        output_type="latent",
    )
    ids.append(part_ids)
for each in taps.values():
    each.close()
ids = np.concatenate(ids)
encoder = {"name": str(folder), "weights_sha256": files_sha256([snakemake.input.model])}
layers = {"step": settings["layer"]}
if "aligned-step" in taps:
    layers["aligned-step"] = pipe.repa_projector.config.depth
with atomic_directory(snakemake.output.features) as out:
    for prefix, kept in taps.items():
        for step in steps:
            write_feature_shard(
                out / f"{prefix}-{step}.safetensors",
                ids,
                kept.features(step),
                {"encoder": encoder, "layer": layers[prefix], "step": step},
            )
write_folder_manifest(snakemake.output.features, snakemake.output.manifest)
log.info(
    "%d samples, %s kept at steps %s of %d",
    len(ids),
    {k: layers[k] for k in taps},
    steps,
    sampling["num_inference_steps"],
)
