"""Snakemake adapter: the translator of one generator, trained on noised real support images, and the
translated features of real images outside the support (the report scores them against their true ones)."""

import numpy as np
import torch

from condeval.core.devices import accelerator_for_gpus, device_for_gpus
from condeval.core.io import read_parquet, saved_folder, write_folder_manifest, write_json
from condeval.core.logs import log_to_file
from condeval.encoders.shards import model_identity, read_feature_shards, write_feature_shard
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import attributes_of, read_images, training_support
from condeval.trust.translator import Translator, translator_pairs

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
settings = dict(p.translator)
table = read_parquet(i.table)
support = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
ids, siglip, _ = read_feature_shards([i.siglip])
if not np.array_equal(ids, np.arange(table.height)):
    raise ValueError(f"{i.siglip}: its ids are not the rows of {i.table}")
pipe = AttributeDiffusionPipeline.from_pretrained(str(saved_folder(i.model)))
pipe.to(device_for_gpus(snakemake.resources.get("gpu", 0)) or "cpu")
attributes = attributes_of(w.dataset, table)
t_values, layer = list(settings["t"]), settings["layer"]


def pairs(rows):
    images = read_images(w.dataset, p.root, table.filter(rows).iter_rows(named=True), p.image_size)
    internal = translator_pairs(pipe, images, attributes[rows], t_values, layer, seed=p.seed,
                                path=settings["noise_path"])  # fmt: skip
    return internal, np.tile(siglip[rows], (len(t_values), 1))


internal, target = pairs(support)
log.info("%d pairs (%d support images x %d noise levels), block %d: %d -> %d", len(internal), int(support.sum()),
         len(t_values), layer, internal.shape[1], target.shape[1])  # fmt: skip
translator = Translator(hidden=settings["hidden"], weights=dict(settings["weights"]), lr=settings["lr"],
                        weight_decay=settings["weight_decay"], epochs=settings["epochs"],
                        batch_size=settings["batch_size"], seed=p.seed, loss=settings["loss"],
                        whitened=dict(settings["whitened"]))  # fmt: skip
# the run folder is no output, so a failed job's cleanup keeps its last.ckpt (docs/workflow.md, "A killed run")
translator.fit(
    internal,
    target,
    run_dir=f"{snakemake.output.model}_run",
    groups=np.tile(np.flatnonzero(support), len(t_values)),
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
)  # validation holds out whole images
translator.save(snakemake.output.model)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
# the check, on real images outside the support: their translated features (scored against their true
# SigLIP features by trust_during_generation_report, with the configured scorer) and the translation error
held = ~support
held_internal, held_target = pairs(held)
rows = int(held.sum())
translated = [translator.transform(held_internal[k * rows : (k + 1) * rows]) for k in range(len(t_values))]
write_feature_shard(snakemake.output.held_out, np.tile(np.flatnonzero(held), len(t_values)), np.concatenate(translated),
                    {"encoder": model_identity(snakemake.output.model), "layer": layer,
                     "t": [float(t) for t in t_values]})  # fmt: skip
signal = {"pairs": len(internal), "held_out_images": rows, "by_t": [
    {"t": float(t), "mse": float(np.mean((block - held_target[k * rows : (k + 1) * rows]) ** 2))}
    for k, (t, block) in enumerate(zip(t_values, translated, strict=True))
]}  # fmt: skip
write_json(signal, snakemake.output.signal)
log.info("translated held-out real features against their true SigLIP features: %s", signal["by_t"])
