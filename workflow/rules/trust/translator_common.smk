# Helpers of translator.smk (config `trust.translator`): the section, its checks and input functions.
TRANSLATOR = TRUST.get("translator", {})
_unknown = sorted(set(TRANSLATOR.get("variants", [])) - set(TRUST_VARIANTS))
if _unknown:
    raise ValueError(
        f"config key 'trust.translator.variants' names {_unknown}, not in 'trust.generators' {TRUST_VARIANTS}"
    )
_not_repa = [v for v in TRANSLATOR.get("aligned", []) if "repa" not in TRUST.get("generators", {}).get(v, {})]
if _not_repa:
    raise ValueError(
        f"config key 'trust.translator.aligned' names {_not_repa}: only a generator with a `repa` section "
        "(in 'trust.generators') has aligned features"
    )
if TRANSLATOR and max(TRANSLATOR["steps"]) >= TRUST["sampling"]["num_inference_steps"]:
    raise ValueError(
        f"config key 'trust.translator.steps' {TRANSLATOR['steps']}: scoring steps are 0-based and must lie below "
        f"trust.sampling.num_inference_steps ({TRUST['sampling']['num_inference_steps']})"
    )


def translator_variants(dataset, regime):
    return [v for v in trust_variants(dataset, regime) if v in TRANSLATOR.get("variants", [])]


def trajectory_manifests(wildcards):
    """The job's generator's trajectory shards (their manifests)."""
    return [saved_manifest(TRAJECTORY.format(**wildcards, shard=shard)) for shard in range(TRUST_SHARDS)]


def trust_translator_variants(wildcards):
    """The job's :func:`translator_variants`."""
    return translator_variants(wildcards.dataset, wildcards.regime)


def trust_during_generation_variants(wildcards):
    """The job's :func:`during_generation_variants`."""
    return during_generation_variants(wildcards.dataset, wildcards.regime)


def during_generation_variants(dataset, regime):
    return trust_design.during_generation_variants(TRUST, dataset, regime)


def trajectory_paths(wildcards):
    """What a trajectory keeps: the translator's block tokens, the REPA-aligned features, or both."""
    keep = {"translator": wildcards.variant in TRANSLATOR.get("variants", [])}
    return keep | {"aligned": wildcards.variant in TRANSLATOR.get("aligned", [])}


def during_generation_inputs(wildcards):
    """The translator (for a translator variant), the real features of the aligned space (for an aligned one)
    and, under per-step thresholds, the real support images' features at each step."""
    d, r, v = wildcards.dataset, wildcards.regime, wildcards.variant
    inputs = {}
    if TRANSLATOR.get("thresholds") == "per_step":
        inputs["real_trajectory"] = saved_manifest(REAL_TRAJECTORY.format(dataset=d, regime=r, variant=v))
    if v in TRANSLATOR.get("variants", []):
        inputs["translator"] = saved_manifest(TRANSLATOR_FOLDER.format(dataset=d, regime=r, variant=v))
    if v in TRANSLATOR.get("aligned", []):
        inputs["real_aligned"] = trust_real_features(d, TRUST["generators"][v]["repa"]["extractor"])
    return inputs


def translator_settings(*keys):
    """The section's values a rule reads (so editing the scoring steps retrains nothing)."""
    return canonical({k: TRANSLATOR[k] for k in keys if k in TRANSLATOR})


TRANSLATOR_TRAINING = (
    "layer",
    "t",
    "noise_path",
    "hidden",
    "epochs",
    "batch_size",
    "lr",
    "weight_decay",
    "weights",
    "loss",
    "whitened",
)


TRANSLATOR_FOLDER = "results/trust/{dataset}/{regime}/translators/{variant}"
TRAJECTORY = "results/trust/{dataset}/{regime}/trajectory/{variant}-shard-{shard}"
REAL_TRAJECTORY = "results/trust/{dataset}/{regime}/trajectory/{variant}-real"
