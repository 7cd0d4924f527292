"""Snakemake adapter: fetch one source of the catalogue into the paths the config holds for it.

The catalogue and the lock folder are the config's values, relative to the repository (an absolute path
survives the join), resolved here so that the rule's params do not depend on where the clone is."""

from pathlib import Path

from condeval.core.fetch import fetch_source, read_catalog, resolve_sources
from condeval.core.logs import log_to_file

REPO = Path(__file__).resolve().parents[3]
log = log_to_file(snakemake.log[0])
settings = snakemake.config["fetch"]
catalog = str(REPO / snakemake.params.catalog)
source = next(
    s for s in resolve_sources(read_catalog(catalog), snakemake.config, catalog) if s.name == snakemake.params.source
)
fetch_source(source, mirror=settings.get("mirror") or None, lock_dir=REPO / snakemake.params.lock, log=log.info)
