"""Snakemake adapter: the share of CLIPScores clipped at 0, per crc benchmark and model."""

from condeval.core.io import atomic_path, write_parquet
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import clipped_table, read_clipped_samples
from condeval.crc.report import clipped_markdown

log = log_to_file(snakemake.log[0])
captions = dict(zip(snakemake.params.benchmarks, snakemake.input.captions, strict=True))
table = clipped_table(read_clipped_samples(dict(snakemake.params.shards), captions))
write_parquet(table, snakemake.output.table)
markdown = clipped_markdown(table, dict(snakemake.params.labels))
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown)
log.info("CLIPScores clipped at 0:\n%s", markdown)
