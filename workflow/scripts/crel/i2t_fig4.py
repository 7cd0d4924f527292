"""Snakemake adapter: Fig. 4, each model's caption and the real caption nearest its worst case."""
import numpy as np
import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.image_to_text import nearest_captions
from condeval.crel.reports.image_to_text import example_images, plot_examples
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions
from condeval.encoders.features import read_feature_shards

log = log_to_file(snakemake.log[0])
p, i = snakemake.params, snakemake.input
pairs = evaluation_pairs(load_captions(i.captions, image_dir(i.captions)))
reference = dict(zip(pairs["image_id"].to_list(), pairs["caption"].to_list()))
paths = dict(zip(pairs["image_id"].to_list(), pairs["path"].to_list()))
generated = pl.concat([pl.read_parquet(path).with_columns(pl.lit(path.split("/")[-2]).alias("model")) for path in i.generated])
scores = pl.concat([pl.read_parquet(path) for path in i.scores]).with_columns(
    pl.col("rho").rank("min", descending=True).over("metric", "image_id").cast(pl.Int64).alias("rank_rho"),
    pl.col("crel_rho").rank("min", descending=True).over("metric", "image_id").cast(pl.Int64).alias("rank_crel"),
)
# one CReL per (model, metric), loaded once: the examples loop reuses them
crels = {
    (model, metric): CReL.from_checkpoints(i.lgms[k * len(p.metrics) + j], i.dqrs[k * len(p.metrics) + j], metric="cosine")
    for k, model in enumerate(p.models)
    for j, metric in enumerate(p.metrics)
}
examples = []
for metric in p.metrics:
    gallery_ids, gallery, _ = read_feature_shards(i[f"reference_{metric}"])
    texts = [reference[k] for k in gallery_ids.tolist()]
    for image_id in example_images(scores, metric, p.examples):
        models = []
        for model in p.models:
            row = scores.filter((pl.col("metric") == metric) & (pl.col("model") == model) & (pl.col("image_id") == image_id)).row(0, named=True)
            worst = nearest_captions(crels[model, metric], np.array([row["z_worst"]]), gallery, texts)[0]
            caption = generated.filter((pl.col("model") == model) & (pl.col("image_id") == image_id))["caption"][0]
            models.append({**{key: row[key] for key in ("rho", "rank_rho", "crel_rho", "rank_crel")}, "model": model, "caption": caption, "worst_caption": worst})
        examples.append({"metric": metric, "image_path": paths[image_id], "reference": reference[image_id], "models": models})
with atomic_path(snakemake.output[0]) as tmp:
    plot_examples(examples, float(snakemake.wildcards.alpha), tmp)
log.info("examples: %s", [(e["metric"], e["reference"]) for e in examples])
