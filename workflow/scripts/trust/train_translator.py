"""Snakemake adapter: the translator of one generator, trained on noised real support images, and how well
translated features of held-out real images score like their true SigLIP features."""

import numpy as np
import torch
from scipy.stats import spearmanr

from condeval.core.devices import device_for_gpus
from condeval.core.io import read_parquet, saved_folder, write_folder_manifest, write_json
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, read_images, training_support
from condeval.trust.evaluate import fit_and_score
from condeval.trust.translator import Translator, translator_pairs

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
settings = dict(p.translator)
names = list(ATTRIBUTE_NAMES[w.dataset])
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
translator.fit(internal, target, run_dir=f"{snakemake.output.model}_run")
translator.save(snakemake.output.model)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
# the check: real images outside the support, translated, scored like their true SigLIP features
held = ~support
held_internal, held_target = pairs(held)
scorer, true_scores = fit_and_score(siglip[support], attributes[support], siglip[held], attributes[held], names,
                                    seed=p.seed, **dict(p.scorer))  # fmt: skip
rows = int(held.sum())
signal = {"pairs": len(internal), "held_out_images": rows, "by_t": []}
for k, t in enumerate(t_values):
    translated = translator.transform(held_internal[k * rows : (k + 1) * rows])
    scores = scorer.score(translated, attributes[held])["trust"].to_numpy()
    signal["by_t"].append({
        "t": float(t), "spearman": float(spearmanr(scores, true_scores["trust"]).statistic),
        "mse": float(np.mean((translated - held_target[k * rows : (k + 1) * rows]) ** 2)),
    })  # fmt: skip
write_json(signal, snakemake.output.signal)
log.info("translated held-out real features against their true SigLIP features: %s", signal["by_t"])
