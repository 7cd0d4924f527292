"""Snakemake adapter: the miniature face world, written as CelebA under the dataset's root."""

from pathlib import Path

from condeval.core.logs import log_to_file
from condeval.datasets.faceworld import write_face_world

log = log_to_file(snakemake.log[0])
world = dict(snakemake.params.world)
root = Path(snakemake.output.attributes).parent
write_face_world(root, world["images"], seed=world["seed"], side=world["side"])
log.info("face world: %d faces at %d px written as CelebA under %s", world["images"], world["side"], root)
