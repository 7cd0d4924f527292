"""Snakemake adapter: coverage against alpha with the conformal band."""

from condeval.core.io import atomic_path, read_json
from condeval.core.logs import log_to_file
from condeval.crel.reports.synthetic import plot_coverage_vs_alpha

log = log_to_file(snakemake.log[0])
summaries = [read_json(path, required=["method", "alpha", "coverage_y"]) for path in snakemake.input.summaries]
n_cal = next(s["n_cal"] for s in summaries if s["method"] == "crel")
with atomic_path(snakemake.output.png) as tmp:
    plot_coverage_vs_alpha(summaries, n_cal, tmp)
log.info("coverage against alpha for %d summaries (n_cal = %d) -> %s", len(summaries), n_cal, snakemake.output.png)
