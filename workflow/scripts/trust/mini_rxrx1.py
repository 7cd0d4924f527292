"""Snakemake adapter: the miniature cell world, written as RxRx1 under the dataset's root."""

from pathlib import Path

from condeval.core.logs import log_to_file
from condeval.datasets.cellworld import write_cell_world

log = log_to_file(snakemake.log[0])
world = dict(snakemake.params.world)
root = Path(snakemake.output.metadata).parent
metadata = write_cell_world(
    root, list(world["sirna_ids"]), world["sites_per_pair"], seed=world["seed"], side=world["side"]
)
log.info(
    "cell world: %d sites of %d siRNAs x 4 cell types at %d px written as RxRx1 under %s",
    metadata.height,
    len(world["sirna_ids"]),
    world["side"],
    root,
)
