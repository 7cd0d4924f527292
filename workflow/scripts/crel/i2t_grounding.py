"""Snakemake adapter: the captioners' colour and shape mentions against the val scenes and shuffled scenes."""

import polars as pl

from condeval.core.io import atomic_path, read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.reports.grounding import grounding_markdown, grounding_table
from condeval.datasets.coco import coco_root, evaluation_pairs, load_captions
from condeval.datasets.scene_mentions import read_scenes

log = log_to_file(snakemake.log[0])
p, i = snakemake.params, snakemake.input
generated = {
    model: pl.concat([read_parquet(path, ("image_id", "caption")) for path in shards])
    for model, shards in p.generated.items()
}
table = grounding_table(
    generated,
    references=evaluation_pairs(load_captions(i.captions)),
    scenes=read_scenes(coco_root(i.scenes), "val"),
    seed=p.seed,
)
write_parquet(table, snakemake.output.table)
markdown = grounding_markdown(table)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown + "\n")
log.info("grounding against %s:\n%s", i.scenes, markdown)
