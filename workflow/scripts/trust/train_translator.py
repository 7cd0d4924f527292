"""Snakemake adapter: the translator of one generator, trained on noised real support images (their pairs
computed a chunk of images at a time into a cache beside the run, read back a batch at a time), and the
translated features of real images outside the support (the report scores them against their true ones)."""

import numpy as np
import torch

from condeval.core.devices import accelerator_for_gpus, device_for_gpus
from condeval.core.io import fingerprint, read_parquet, saved_folder, write_folder_manifest, write_json
from condeval.core.logs import log_to_file
from condeval.encoders.shards import model_identity, read_feature_shards, write_feature_shard
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import ReleaseImages, attributes_of, training_support
from condeval.trust.translator import ChunkPlan, FeatureReadout, Translator, TranslatorLoss, translator_pair_rows

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
run_dir = f"{snakemake.output.model}_run"  # no output, so a failed job's cleanup keeps its cache and last.ckpt


def pairs(rows, cache):
    images = ReleaseImages(w.dataset, p.root, table.filter(rows), p.image_size)
    return translator_pair_rows(
        pipe,
        images,
        attributes[rows],
        siglip[rows],
        t_values,
        FeatureReadout(layer, path=settings["noise_path"]),
        f"{run_dir}/{cache}",
        ChunkPlan(
            chunk_size=p.chunk_size,
            seed=p.seed,
            fingerprint=fingerprint([i.table, i.siglip], {"root": p.root, "size": p.image_size}),
        ),
    )


cache, rows, images = pairs(support, "support")
log.info(
    "%d pairs (%d support images x %d noise levels), block %d", len(rows), int(support.sum()), len(t_values), layer
)
translator = Translator(
    hidden=settings["hidden"],
    loss=TranslatorLoss(settings["loss"], weights=dict(settings["weights"]), whitened=dict(settings["whitened"])),
    lr=settings["lr"],
    weight_decay=settings["weight_decay"],
    epochs=settings["epochs"],
    batch_size=settings["batch_size"],
    seed=p.seed,
)
translator.fit_rows(rows, images, run_dir=run_dir, accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)))
translator.save(snakemake.output.model)  # validation held out whole images (groups: each pair's image)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
cache.clear()
# the check, on real images outside the support: their translated features (scored against their true
# SigLIP features by trust_during_generation_report, with the configured scorer) and the translation error
# at most HELD_OUT_CHECK of them (seeded): the check's translated features are kept whole in one shard
held = ~support
outside = np.flatnonzero(held)
if len(outside) > p.held_out_check:
    held = np.zeros_like(support)
    held[np.sort(np.random.default_rng(p.seed).choice(outside, p.held_out_check, replace=False))] = True
held_cache, held_rows, _ = pairs(held, "held_out")
internal, target, image, t_index = (np.stack(column) for column in zip(*(held_rows[k] for k in range(len(held_rows)))))
order = np.lexsort((image, t_index))  # t-major over the whole set, as the report reads it
internal, target, image, t_index = internal[order], target[order], image[order], t_index[order]
translated = translator.transform(internal)
write_feature_shard(
    snakemake.output.held_out,
    np.flatnonzero(held)[image],
    translated,
    {"encoder": model_identity(snakemake.output.model), "layer": layer, "t": [float(t) for t in t_values]},
)
signal = {
    "pairs": len(rows),
    "held_out_images": int(held.sum()),
    "by_t": [
        {"t": float(t), "mse": float(np.mean((translated[t_index == k] - target[t_index == k]) ** 2))}
        for k, t in enumerate(t_values)
    ],
}
write_json(signal, snakemake.output.signal)
held_cache.clear()
log.info("translated held-out real features against their true SigLIP features: %s", signal["by_t"])
