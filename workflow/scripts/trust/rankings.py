"""Snakemake adapter: deciles of trust, realism and faithfulness, judged by KID and a condition classifier."""

import numpy as np

from condeval.core.io import read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, training_support
from condeval.trust.deciles import DecileSettings
from condeval.trust.evaluate import rankings
from condeval.trust.filtering import KidSettings
from condeval.trust.samples import sample_feature_files

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
names = list(ATTRIBUTE_NAMES[w.dataset])
table = read_parquet(i.table)
outside = ~training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
_, real, _ = read_feature_shards([i.real_kid])
ids, features, _ = read_feature_shards(sample_feature_files(i.sample_features, p.spaces["kid"]))
scores = read_parquet(i.scores)
by_id = dict(zip(ids.tolist(), range(len(ids)), strict=True))
kid_features = features[[by_id[s] for s in scores["sample_id"].to_list()]]
result = rankings(
    scores,
    kid_features,
    real[outside],
    attributes_of(w.dataset, table)[outside],
    names,
    kid_settings=KidSettings.from_config(dict(p.selection), seed=p.seed),
    deciles=DecileSettings.from_config(dict(p.rankings)),
)
write_parquet(result.with_columns(variant=np.array([w.variant] * result.height)), snakemake.output.rankings)
log.info("deciles of %d samples:\n%s", scores.height, result)
