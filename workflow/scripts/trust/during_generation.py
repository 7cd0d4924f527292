"""Snakemake adapter: the trust score during generation, per path (translator, REPA-aligned) and scoring
step, beside post generation."""

import numpy as np
import polars as pl

from condeval.core.io import read_parquet, saved_folder, write_parquet
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, calibration_units, training_support
from condeval.trust.evaluate import (
    KidReference,
    ScorerOptions,
    fit_and_score,
    score_agreement,
    select,
    step_thresholds,
)
from condeval.trust.filtering import SelectionProtocol
from condeval.trust.samples import sample_feature_files
from condeval.trust.translator import Translator, compute_saved

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
settings, sampling = dict(p.translator), dict(p.sampling)
names = list(ATTRIBUTE_NAMES[w.dataset])
table = read_parquet(i.table)
real_attributes = attributes_of(w.dataset, table)
support = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
units = calibration_units(w.dataset, table, support)  # the scorer's calibration holds out whole wells
conditions = read_parquet(i.conditions).select(names).to_numpy()


def features(paths):
    ids, values, _ = read_feature_shards(list(paths))
    order = np.argsort(ids, kind="stable")
    return ids[order], values[order]


_, real_siglip = features([i.real_siglip])
_, real_kid = features([i.real_kid])
_, real_scoring = features([i.real_scoring])
sample_ids, kid_features = features(sample_feature_files(i.sample_features, p.spaces["kid"]))
sample_attributes = conditions[sample_ids // p.per_condition]
selection = SelectionProtocol.from_config(dict(p.selection), seed=p.seed)
reference = KidReference(real_kid[~support], real_attributes[~support], conditions, names)


def protocol(real, scored, real_at_step=None) -> dict:
    """Fit on real support features, score, select by P95-real, KID in DINOv3's space (Section 5.1.1);
    with ``real_at_step`` (the support rows' features on the samples' path at the step), per-step thresholds."""
    scorer, scores = fit_and_score(
        real[support],
        real_attributes[support],
        scored,
        sample_attributes,
        names,
        options=ScorerOptions(**dict(p.scorer), seed=p.seed),
        groups=units,
    )
    if real_at_step is None:
        thresholds = scorer.thresholds(selection.quantile)
    else:
        thresholds = step_thresholds(scorer, real_at_step, real_attributes[support], selection.quantile)
    selected = select(scores, kid_features, thresholds, reference, selection)
    return selected.summary | {"accepted": selected.accepted, "scores": scores}


# the post-generation oracle: the decoded samples in the variant's scoring space, the same protocol
steps_total = sampling["num_inference_steps"]
_, post_features = features(sample_feature_files(i.sample_features, p.spaces["scoring"]))
oracle = protocol(real_scoring, post_features)
oracle.pop("accepted")
post_scores = oracle.pop("scores")
trajectory = [saved_folder(manifest) for manifest in i.trajectory]
paths = {}  # path -> (file prefix, real features of its space, map of the kept features into that space)
if p.keep["translator"]:
    paths["translator"] = ("step", real_siglip, Translator.load(saved_folder(i.translator)).transform)
if p.keep["aligned"]:
    paths["aligned"] = ("aligned-step", features([i.real_aligned])[1], lambda kept: kept)
rows = []
for path, (prefix, real, into_space) in paths.items():
    for step in sorted(settings["steps"]):
        ids, kept = features([f"{folder}/{prefix}-{step}.safetensors" for folder in trajectory])
        if not np.array_equal(ids, sample_ids):
            raise ValueError(f"{trajectory[0]}: {prefix} {step} holds other sample ids than the samples' features")
        real_at_step = None
        if settings["thresholds"] == "per_step":
            real_ids, real_kept = features([f"{saved_folder(i.real_trajectory)}/{prefix}-{step}.safetensors"])
            if not np.array_equal(real_ids, np.flatnonzero(support)):
                raise ValueError(f"{i.real_trajectory}: {prefix} {step} holds other rows than the real support")
            real_at_step = into_space(real_kept)
        result = protocol(real, into_space(kept), real_at_step)
        saved = compute_saved(~result.pop("accepted"), step, steps_total)
        agreement = score_agreement(result.pop("scores"), post_scores)
        rows.append({"path": path, "scoring": "during", "step": step + 1} | result | saved | agreement)
        log.info("%s, step %d of %d: %s", path, step + 1, steps_total, rows[-1])
rows.append(
    {"path": "post", "scoring": "post", "step": steps_total}
    | oracle
    | compute_saved(np.zeros(1, bool), steps_total - 1, steps_total)
)
write_parquet(pl.DataFrame(rows, infer_schema_length=None), snakemake.output.steps)
log.info("post generation: %s", rows[-1])
