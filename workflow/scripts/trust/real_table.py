"""Snakemake adapter: a release's real rows (key, split, attributes) and the queried conditions."""

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.trust.data import queried_conditions, real_table, training_support

log = log_to_file(snakemake.log[0])
dataset, subset = snakemake.wildcards.dataset, dict(snakemake.params.subset)
table = real_table(dataset, snakemake.params.root)
conditions = queried_conditions(dataset, table, **subset)
write_parquet(table, snakemake.output.table)
write_parquet(conditions, snakemake.output.conditions)
held = subset.get("held_out_pairs", 100)
log.info("%s: %d real rows by split %s", dataset, table.height, dict(table.group_by("split").len().iter_rows()))
log.info(
    "%s: %d rows in the held-out regime's training support, %d in the full one",
    dataset,
    training_support(dataset, table, "held_out", held).sum(),
    training_support(dataset, table, "full").sum(),
)
log.info("%s: %d queried conditions, %d seen in training", dataset, conditions.height, conditions["seen"].sum())
