# Helpers of translator.smk (config `trust.translator`): the section, its checks and input functions.
TRANSLATOR = TRUST.get("translator", {})
_unknown = sorted(set(TRANSLATOR.get("variants", [])) - set(TRUST_VARIANTS))
if _unknown:
    raise ValueError(
        f"config key 'trust.translator.variants' names {_unknown}, not in 'trust.generators' {TRUST_VARIANTS}"
    )
if TRANSLATOR and max(TRANSLATOR["steps"]) >= TRUST["sampling"]["num_inference_steps"]:
    raise ValueError(
        f"config key 'trust.translator.steps' {TRANSLATOR['steps']}: scoring steps are 0-based and must lie below "
        f"trust.sampling.num_inference_steps ({TRUST['sampling']['num_inference_steps']})"
    )


def translator_variants(dataset, regime):
    return [v for v in trust_variants(dataset, regime) if v in TRANSLATOR.get("variants", [])]


def translator_settings(*keys):
    """The section's values a rule reads (so editing the scoring steps retrains nothing)."""
    return canonical({k: TRANSLATOR[k] for k in keys if k in TRANSLATOR})


TRANSLATOR_TRAINING = ("layer", "t", "noise_path", "hidden", "epochs", "batch_size", "lr", "weight_decay", "weights")


TRANSLATOR_FOLDER = "results/trust/{dataset}/{regime}/translators/{variant}"
TRAJECTORY = "results/trust/{dataset}/{regime}/trajectory/{variant}-shard-{shard}"
