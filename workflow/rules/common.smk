# Helpers shared by every rule file; input functions live here, never lambdas inside rules.
import math

from snakemake.utils import min_version, validate

min_version("9.0")


validate(config, schema="../schemas/config.schema.yaml")


def _check_config_semantics(cfg):
    """Checks the schema cannot express; each error names the key."""
    splits = cfg["synthetic"]["splits"]
    total = sum(splits.values())
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ValueError(f"config key 'synthetic.splits' must sum to 1; got {total}")
    if cfg["lgm"]["latent_dim"] < 1:
        raise ValueError("config key 'lgm.latent_dim' must be at least 1")
    n_cal = round(cfg["synthetic"]["n"] * splits["cal"])
    for alpha in cfg["calibration"]["alphas"]:
        if math.ceil(round((n_cal + 1) * (1 - alpha), 9)) > n_cal:
            raise ValueError(
                f"config key 'calibration.alphas' holds {alpha}, but the calibration fold has only "
                f"{n_cal} points: at least {math.ceil(1 / alpha) - 1} are needed"
            )
    if len(cfg["lgm"]["hidden_dims"]) % 2:
        raise ValueError("config key 'lgm.hidden_dims' must list encoder then decoder widths (even length)")


_check_config_semantics(config)

DATASET = config["synthetic"]["kind"]
ALPHAS = [f"{a:g}" for a in config["calibration"]["alphas"]]
DQR_TAU = f"{config['dqr']['quantile_level']:g}"
BASELINE_TAUS = [f"{t:g}" for t in config["dqr_baseline"]["quantile_levels"]]
GPU = 1 if config["resources"]["accelerator"] == "gpu" else 0
THREADS = config["resources"]["threads"]


def canonical(mapping):
    """A dict with sorted keys: rerun-on-params compares text, so key order must not matter."""
    return {key: mapping[key] for key in sorted(mapping)}


def dqr_training_params():
    """DQR hyperparameters that key a training job; tau comes from the {tau} wildcard."""
    return canonical({k: v for k, v in config["dqr"].items() if k != "quantile_level"})


def method_summaries(wildcards):
    """Every per-alpha summary that the Table 1 / coverage figure rule aggregates."""
    return expand(
        "results/crel/{dataset}/{method}/alpha{alpha}/summary.json",
        dataset=wildcards.dataset,
        method=["crel", "feldman", "dqr", "pcp"],
        alpha=ALPHAS,
    )


def baseline_dqr_checkpoints(wildcards):
    return expand("results/crel/{dataset}/dqr/tau{tau}.ckpt", dataset=wildcards.dataset, tau=BASELINE_TAUS)


def figure_alpha():
    """The alpha shown in Fig. 2: 0.1 as in the paper when listed, else the first."""
    return "0.1" if "0.1" in ALPHAS else ALPHAS[0]


def crel_synthetic_targets():
    report_dir = f"reports/crel/{DATASET}"
    return [
        f"{report_dir}/table1.csv",
        f"{report_dir}/table1.md",
        f"{report_dir}/table1.png",
        f"{report_dir}/coverage_vs_alpha.png",
        f"{report_dir}/fig2_regions.png",
        f"{report_dir}/fig5_vae_vs_cvae.png",
        f"{report_dir}/reliability.csv",
        f"{report_dir}/lgm_cost.csv",
    ]
