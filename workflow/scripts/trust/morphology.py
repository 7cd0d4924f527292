"""Snakemake adapter: one generator's Section 5.1.3 readouts in CellProfiler's morphology space."""

from condeval.core.io import read_parquet, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.trust.data import ATTRIBUTE_NAMES
from condeval.trust.morphology import CentroidSettings, MorphologyDeciles, morphology_readouts

log = log_to_file(snakemake.log[0])
p, i, o = snakemake.params, snakemake.input, snakemake.output
names = list(ATTRIBUTE_NAMES["rxrx1"])
settings = dict(p.morphology)
queried = read_parquet(i.conditions)
scores = read_parquet(i.scores).select("sample_id", "trust", "accepted")
generated = read_parquet(i.generated).join(scores, on="sample_id", how="inner", validate="1:1", maintain_order="left")
if generated.height != read_parquet(i.generated, columns=["sample_id"]).height:
    raise ValueError(f"{i.generated}: some measured samples have no trust score in {i.scores}")
readouts = morphology_readouts(
    read_parquet(i.real),
    generated,
    names,
    queried.select(names).to_numpy(),
    queried["seen"].to_numpy(),
    centroid=CentroidSettings.from_config(settings),
    deciles=MorphologyDeciles.from_config(settings),
)
write_json(readouts["counts"], o.summary)
write_parquet(readouts["contrast"], o.contrast)
write_parquet(readouts["correlations"], o.correlations)
write_parquet(readouts["deciles"], o.deciles)
log.info("features: %s", readouts["counts"])
log.info("trust-selected against random, centroid z:\n%s", readouts["contrast"])
log.info("CP-space deciles:\n%s", readouts["deciles"])
