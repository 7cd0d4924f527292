"""Snakemake adapter: each extractor's per-attribute linear-probe accuracy on real rows outside training."""

from condeval.core.io import atomic_path, read_parquet, write_json
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, calibration_units
from condeval.trust.signal import attribute_probes, probe_markdown

log = log_to_file(snakemake.log[0])
dataset, p = snakemake.wildcards.dataset, snakemake.params
table = read_parquet(snakemake.input.table)
outside = (table["split"] != "train").to_numpy()  # never in a training support, nor in the scorer's fit
names = list(ATTRIBUTE_NAMES[dataset])
units = calibration_units(dataset, table)  # RxRx1's wells: a well's sites are one unit in the interval
report = {}
for extractor, path in zip(p.extractors, snakemake.input.features, strict=True):
    ids, features, _ = read_feature_shards([path])
    rows = ids[outside[ids]]
    groups = None if units is None else units[rows]
    report[extractor] = attribute_probes(
        features[outside[ids]], attributes_of(dataset, table)[rows], names, groups=groups, seed=p.seed, **dict(p.probe)
    )
write_json(report, snakemake.output.signal)
markdown = probe_markdown(report, dataset)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown)
log.info("linear probes on %d real rows outside training:\n%s", int(outside.sum()), markdown)
