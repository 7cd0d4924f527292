# Helpers of the Appendix E (Fig. 8) track, included by scaling.smk: config checks, the target list
# and input/params functions (kept apart from the rules, as common.smk is for the main track).
import math


SCALING = config.get("scaling", {})
SCALING_TAU = f"{config['dqr']['quantile_level']:g}"


def _check_scaling_config(cfg):
    """Checks the schema cannot express; each error names the key."""
    total = sum(cfg["splits"].values())
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ValueError(f"config key 'scaling.splits' must sum to 1; got {total}")
    n_cal = round(cfg["n"] * cfg["splits"]["cal"])
    if math.ceil(round((n_cal + 1) * (1 - cfg["alpha"]), 9)) > n_cal:
        raise ValueError(f"config key 'scaling.alpha' is {cfg['alpha']}, too small for {n_cal} calibration points")


if SCALING:
    _check_scaling_config(SCALING)


def crel_scaling_targets():
    """Fig. 8 (PNG and SVG) and its table: what `snakemake <targets>` builds for this track.

    Fixed paths, so a target rule may list them under any config; building them needs `scaling`.
    """
    report_dir = "reports/crel/scaling"
    return [
        f"{report_dir}/fig8_calibration_runtime.png",
        f"{report_dir}/fig8_calibration_runtime.svg",
        f"{report_dir}/calibration_runtime.csv",
    ]


def scaling_vae_params(wildcards):
    """The configured VAE with the track's beta and latent dimension r."""
    model = {k: v for k, v in config["lgm"].items() if k not in ("kind", "max_epochs", "patience")}
    model.update(beta=SCALING["beta"], latent_dim=int(wildcards.r))
    return canonical(model)


def scaling_dqr_params():
    """The configured DQR with the track's epoch cap; tau comes from the {tau} wildcard."""
    model = {k: v for k, v in config["dqr"].items() if k != "quantile_level"}
    model.update(max_epochs=SCALING.get("dqr_epochs"), patience=SCALING.get("dqr_patience"))
    return canonical(model)


def scaling_timings(wildcards):
    """One timing per configured r; the first input function run when Fig. 8 is requested."""
    if not SCALING:
        raise ValueError("config key 'scaling' is missing: the Appendix E (Fig. 8) targets need it")
    return expand(
        "results/crel_scaling/{dataset}/r{r}/timing.json", dataset=SCALING["kind"], r=SCALING["latent_dims"]
    )


def scaling_other_models(wildcards):
    """Every other r's DQR: timings start once the whole track is trained, so no training job runs
    beside one (ancient: retraining another r does not re-time this one)."""
    return [
        ancient(f"results/crel_scaling/{wildcards.dataset}/r{r}/dqr/tau{SCALING_TAU}.ckpt")
        for r in SCALING["latent_dims"]
        if str(r) != wildcards.r
    ]


def scaling_timing_runtime(wildcards):
    """Minutes: the grid scheme's budget, its probe, CReL and loading, with margin."""
    return 30 + math.ceil(2 * (SCALING["grid_budget_s"] + SCALING["probe_budget_s"]) / 60)
