"""Snakemake adapter: the trust score fitted on real support features, the samples scored, P95-real selection."""

import numpy as np

from condeval.core.io import read_parquet, saved_folder, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, calibration_units, training_support
from condeval.trust.evaluate import KidReference, ScorerOptions, fit_and_score, scorer_ablation, select
from condeval.trust.filtering import SelectionProtocol
from condeval.trust.samples import sample_feature_files
from condeval.trust.scorers import clip_alignment_scores

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
names = list(ATTRIBUTE_NAMES[w.dataset])
table = read_parquet(i.table)
real_attributes = attributes_of(w.dataset, table)
support = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))


def real(path):
    ids, features, _ = read_feature_shards([path])
    if not np.array_equal(ids, np.arange(table.height)):
        raise ValueError(f"{path}: its ids are not the rows of {i.table}")
    return features


def samples(space):
    """(sample ids, features) of every shard in ``space``'s extractor (``clip``, or a key of ``params.spaces``)."""
    ids, features, _ = read_feature_shards(sample_feature_files(i.sample_features, p.spaces.get(space, space)))
    order = np.argsort(ids, kind="stable")
    return ids[order], features[order]


sample_ids, scoring = samples("scoring")
kid_ids, kid_features = samples("kid")
if not np.array_equal(sample_ids, kid_ids):
    raise ValueError(f"the samples' scoring and KID features hold different sample ids ({i.sample_features[0]})")
# a sample's requested condition: its id // per_condition indexes conditions.parquet (trust_generate)
conditions = read_parquet(i.conditions).select(names).to_numpy()
sample_attributes = conditions[sample_ids // p.per_condition]
real_scoring = real(i.real_scoring)[support]
scorer, scores = fit_and_score(
    real_scoring,
    real_attributes[support],
    scoring,
    sample_attributes,
    names,
    options=ScorerOptions(**dict(p.scorer), seed=p.seed),
    groups=calibration_units(w.dataset, table, support),
)
scores = scores.with_columns(sample_id=sample_ids)
protocol = SelectionProtocol.from_config(dict(p.selection), seed=p.seed)
reference = KidReference(real(i.real_kid)[~support], real_attributes[~support], conditions, names)
selected = select(scores, kid_features, scorer.thresholds(protocol.quantile), reference, protocol)
scores = scores.with_columns(accepted=selected.accepted)
precomputed = {}
if "clip" in i.keys():  # Appendix J's CLIP alignment: each image against its condition's prompt
    from condeval.encoders.features import ClipEncoder  # torch, for this branch alone

    clip_ids, clip_features = samples("clip")
    if not np.array_equal(clip_ids, sample_ids):
        raise ValueError(f"the samples' CLIP and scoring features hold different sample ids ({i.sample_features[0]})")
    precomputed["clip_alignment"] = clip_alignment_scores(
        ClipEncoder(saved_folder(i.clip), **dict(p.clip_loading)),
        (real(i.real_clip)[support], real_attributes[support]),
        (clip_features, sample_attributes),
    )
ablation = scorer_ablation(
    scorer,
    (real_scoring, real_attributes[support]),
    (scoring, scores),
    kid_features,
    reference,
    protocol,
    trusted=selected.per_condition,
    precomputed=precomputed,
)
write_parquet(ablation, snakemake.output.ablation)
write_parquet(scores, snakemake.output.scores)
write_parquet(selected.per_condition, snakemake.output.conditions)
write_json(selected.summary, snakemake.output.summary)
log.info("scorer fitted on %d real support rows; %d samples scored", int(support.sum()), scores.height)
log.info("per condition:\n%s", selected.per_condition)
log.info("summary: %s", selected.summary)
log.info("Appendix J scorers under the same protocol:\n%s", ablation)
