"""Snakemake adapter: fetch one source of the catalogue into the paths the config holds for it."""

from condeval.core.fetch import fetch_source, read_catalog, resolve_sources
from condeval.core.logs import log_to_file

log = log_to_file(snakemake.log[0])
settings = snakemake.config["fetch"]
catalog = snakemake.params.catalog
source = next(
    s for s in resolve_sources(read_catalog(catalog), snakemake.config, catalog) if s.name == snakemake.params.source
)
fetch_source(source, mirror=settings.get("mirror") or None, lock_dir=snakemake.params.lock, log=log.info)
