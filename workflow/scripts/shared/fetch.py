"""Snakemake adapter: fetch one source of the catalogue into the paths the config holds for it.

The source comes whole in the rule's params (condeval.core.fetch.Source.as_params) and the lock folder is
the config's value, relative to the working directory like every path of the config."""

from condeval.core.fetch import Source, fetch_source
from condeval.core.logs import log_to_file

log = log_to_file(snakemake.log[0])
settings = snakemake.config["fetch"]
source = Source.from_params(snakemake.params.source)
fetch_source(source, mirror=settings.get("mirror") or None, lock_dir=snakemake.params.lock, log=log.info)
