"""Snakemake adapter: PCP at one alpha — union of balls of radius sqrt(q) around the samples."""

from condeval.core.io import read_json, read_npz, read_parquet, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.baselines.pcp import pcp_members, pcp_scores, pcp_threshold
from condeval.crel.evaluation import grid_set_metrics, summarize
from condeval.crel.folds import load_fold
from condeval.crel.grid import OutputGrid

log = log_to_file(snakemake.log[0])
alpha = float(snakemake.wildcards.alpha)
cal_scores = read_parquet(snakemake.input.cal_scores, columns=["score"])["score"].to_numpy()
threshold = pcp_threshold(cal_scores, alpha)
grid = OutputGrid.from_dict(read_json(snakemake.input.grid, required=["lower", "upper", "points_per_axis"]))
samples = read_npz(snakemake.input.test_samples, required=["rows", "samples"])["samples"]
test = load_fold(snakemake.input.processed, "test").head(samples.shape[0])
inside = pcp_scores(samples, test.Y) <= threshold
members = ((i, pcp_members(grid, samples[i], threshold), inside[i]) for i in range(samples.shape[0]))
per_point = grid_set_metrics(grid, members, test.Y)
summary = summarize("pcp", alpha, per_point, threshold=threshold, n_cal=int(cal_scores.size))
write_parquet(per_point, snakemake.output.per_point)
write_json(summary, snakemake.output.summary)
log.info("%s", summary)
