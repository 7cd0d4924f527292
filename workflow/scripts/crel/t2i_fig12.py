"""Snakemake adapter: Fig. 12, each model's image and the real image nearest its worst case."""

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.image_to_text import crels_from_files
from condeval.crel.reports.examples import fig12_examples
from condeval.crel.reports.text_to_image import plot_t2i_examples
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions
from condeval.encoders.shards import read_feature_shards
from condeval.generators.images import read_image_manifest

log = log_to_file(snakemake.log[0])
p, i = snakemake.params, snakemake.input
files = p.files  # named: {"models": {model: {metric: {"lgm", "dqr"}}}, "generated": {model: [manifests]}}
crels = crels_from_files(files["models"])
generated = {}
for model, manifests in files["generated"].items():
    for manifest in manifests:
        ids, paths = read_image_manifest(manifest)
        generated.update({(model, int(k)): path for k, path in zip(ids, paths)})
examples = fig12_examples(
    scores=pl.concat([pl.read_parquet(path) for path in i.scores]),
    crels=crels,
    generated=generated,
    references=evaluation_pairs(load_captions(i.captions, image_dir(i.captions))),
    galleries={metric: read_feature_shards(i[f"real_{metric}"])[:2] for metric in p.metrics},
    n_examples=p.examples,
)
with atomic_path(snakemake.output[0]) as tmp:
    plot_t2i_examples(examples, float(snakemake.wildcards.alpha), tmp)
log.info("examples: %s", [(e["metric"], e["reference"]) for e in examples])
