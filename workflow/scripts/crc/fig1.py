"""Snakemake adapter: Fig. 1, violins of masked-CLIPScore distributions on the interval calibration set."""

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import read_sampled
from condeval.crc.report import plot_violins

log = log_to_file(snakemake.log[0])
p = snakemake.params
pairs = read_sampled(snakemake.input.captions, snakemake.input.samples)
figure = plot_violins(
    pairs, p.seed, f"CLIPScore distributions by attention-mask sampling ({p.dataset}, {snakemake.wildcards.model})"
)
with atomic_path(snakemake.output[0], suffix=".png") as tmp:
    figure.savefig(tmp, dpi=150)
log.info("Fig. 1 from %d %s pairs", len(pairs), p.dataset)
