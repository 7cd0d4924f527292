"""Snakemake adapter: Fig. 4, each model's caption and the real caption nearest its worst case."""

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.image_to_text import crels_from_files
from condeval.crel.reports.examples import fig4_examples
from condeval.crel.reports.image_to_text import plot_examples
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions
from condeval.encoders.shards import read_feature_shards

log = log_to_file(snakemake.log[0])
p, i = snakemake.params, snakemake.input
files = p.files  # named: {"models": {model: {metric: {"lgm", "dqr"}}}, "generated": {model: [shards]}}
crels = crels_from_files(files["models"])
generated = pl.concat(
    [
        pl.read_parquet(path).with_columns(model=pl.lit(model))
        for model, shards in files["generated"].items()
        for path in shards
    ]
)
examples = fig4_examples(
    scores=pl.concat([pl.read_parquet(path) for path in i.scores]),
    crels=crels,
    generated=generated,
    references=evaluation_pairs(load_captions(i.captions, image_dir(i.captions))),
    galleries={metric: read_feature_shards(i[f"reference_{metric}"])[:2] for metric in p.metrics},
    n_examples=p.examples,
)
with atomic_path(snakemake.output[0]) as tmp:
    plot_examples(examples, float(snakemake.wildcards.alpha), tmp)
log.info("examples: %s", [(e["metric"], e["reference"]) for e in examples])
