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
    ablations = cfg["ablations"]
    for key, alphas in [
        ("calibration.alphas", cfg["calibration"]["alphas"]),
        ("ablations.alpha", [ablations["alpha"]]),
        ("ablations.lgm_alphas", ablations["lgm_alphas"]),
        ("ablations.mae_alphas", ablations["mae_alphas"]),
    ]:
        for alpha in alphas:
            if math.ceil(round((n_cal + 1) * (1 - alpha), 9)) > n_cal:
                raise ValueError(
                    f"config key '{key}' holds {alpha}, but the calibration fold has only "
                    f"{n_cal} points: at least {math.ceil(1 / alpha) - 1} are needed"
                )
    late = [e for e in ablations["checkpoint_epochs"] if e > ablations["long_max_epochs"]]
    if late:
        raise ValueError(f"config key 'ablations.checkpoint_epochs' holds {late}, past ablations.long_max_epochs")
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


# ---------------------------------------------------------------- latent generative models
# An LGM id names the model behind every results/crel/{dataset}/{lgm}/ folder:
#   vae, cvae                 the configured VAE / CVAE (Appendix A.1)
#   vae-beta<b>, vae-r<k>,    the VAE with one hyperparameter changed (ablations C.1, C.7, C.3)
#   vae-mae
#   vae-long-epoch<N>,        snapshots of one long VAE run (C.5)
#   vae-long-best
#   sd-cond-T<T>,             latent diffusion in the VAE latent space, T DDIM steps (A.2, C.2)
#   sd-uncond-T<T>
LGM_ID = r"vae|cvae|vae-beta[0-9.e+-]+|vae-r\d+|vae-mae|vae-long-(epoch\d+|best)|sd-(cond|uncond)-T\d+"
DDPM_NAME = r"ddpm-(cond|uncond)"


def main_lgm():
    """The LGM id of Table 1, from ``lgm.kind``."""
    kind = config["lgm"]["kind"]
    if kind == "latent_diffusion":
        diffusion = config["diffusion"]
        return sd_lgm(diffusion["conditional"], diffusion["inference_steps"])
    return kind


def sd_lgm(conditional, steps):
    return f"sd-{'cond' if conditional else 'uncond'}-T{steps}"


MAIN_LGM = main_lgm()


def vae_variant(name, value=None):
    """The LGM id of the VAE with one setting changed; the configured value maps back to ``vae``."""
    if value is None or config["lgm"][name] == value:
        return "vae"
    if name == "beta":
        return f"vae-beta{value:g}"
    return {"latent_dim": f"vae-r{value}", "metric": f"vae-{value}"}[name]


def vae_hyperparameters(name="vae"):
    """VAE hyperparameters of the LGM file ``name`` (vae, vae-beta<b>, vae-r<k>, vae-mae)."""
    model = {k: v for k, v in config["lgm"].items() if k not in ("kind", "max_epochs", "patience")}
    if name.startswith("vae-beta"):
        model["beta"] = float(name.removeprefix("vae-beta"))
    elif name.startswith("vae-r"):
        model["latent_dim"] = int(name.removeprefix("vae-r"))
    elif name == "vae-mae":
        model["metric"] = "mae"
    return canonical(model)


def vae_model_params(wildcards):
    return vae_hyperparameters(wildcards.model)


def lgm_file(dataset, lgm):
    """Checkpoint file of an LGM id: a latent-diffusion id reads its DDPM, every other id its own file."""
    if lgm.startswith("sd-"):
        return f"results/crel/{dataset}/lgm/ddpm-{lgm.split('-')[1]}.ckpt"
    return f"results/crel/{dataset}/lgm/{lgm}.ckpt"


def lgm_checkpoint(wildcards):
    return lgm_file(wildcards.dataset, wildcards.lgm)


def lgm_loading_options(lgm):
    """Loading options of an LGM id (the DDIM step count T of a latent-diffusion id)."""
    if lgm.startswith("sd-"):
        return {"inference_steps": int(lgm.rsplit("-T", 1)[1])}
    return {}


def lgm_options(wildcards):
    return lgm_loading_options(wildcards.lgm)


def lgm_latent_dim(lgm):
    return int(lgm.removeprefix("vae-r")) if lgm.startswith("vae-r") else config["lgm"]["latent_dim"]


def region_test_points(wildcards):
    """Test points whose regions are decoded: all configured ones for Table 1's LGM, fewer for ablations."""
    if wildcards.lgm == main_lgm():
        return config["evaluation"]["region_test_points"]
    return min(config["evaluation"]["region_test_points"], config["ablations"]["region_test_points"])


def sweep_test_points(wildcards):
    """Test points of the num_z0 / seed sweeps (ablation-sized, whatever the LGM)."""
    return min(config["evaluation"]["region_test_points"], config["ablations"]["region_test_points"])


def latent_points(wildcards):
    """Latent grid points per region: at least 4 per axis, so high-r ablations are not a single cell."""
    return max(config["grid"]["latent_points"], 4 ** lgm_latent_dim(wildcards.lgm))


def ddpm_is_conditional(wildcards):
    return wildcards.conditioning == "cond"


def dqr_training_params():
    """DQR hyperparameters that key a training job; tau comes from the {tau} wildcard."""
    return canonical({k: v for k, v in config["dqr"].items() if k != "quantile_level"})


def summary_path(dataset, method, alpha, lgm=None, seed=None):
    """Per-alpha summary of a method: PCP is keyed by its sampling seed, the others by their LGM."""
    if method == "pcp":
        return f"results/crel/{dataset}/pcp/seed{config['seed'] if seed is None else seed}/alpha{alpha}/summary.json"
    return f"results/crel/{dataset}/{lgm or main_lgm()}/{method}/alpha{alpha}/summary.json"


def method_summaries(wildcards):
    """Every per-alpha summary that the Table 1 / coverage figure rule aggregates."""
    return [
        summary_path(wildcards.dataset, method, alpha)
        for method in ("crel", "feldman", "dqr", "pcp")
        for alpha in ALPHAS
    ]


def baseline_dqr_checkpoints(wildcards):
    """The DQR-alone models of an LGM (Table 1's LGM for rules without an {lgm} wildcard)."""
    lgm = getattr(wildcards, "lgm", MAIN_LGM)
    return expand("results/crel/{dataset}/{lgm}/dqr/tau{tau}.ckpt", dataset=wildcards.dataset, lgm=lgm, tau=BASELINE_TAUS)


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


# ---------------------------------------------------------------- Appendix C ablations
ABLATIONS = config["ablations"]
ABLATION_ALPHA = f"{ABLATIONS['alpha']:g}"
ABLATION_TABLES = {
    "table4_beta": "Table 4",
    "table5_sd_cond": "Table 5",
    "table6_sd_uncond": "Table 6",
    "table7_vae_vs_sd": "Table 7",
    "table8_mae": "Table 8",
    "table9_pcp": "Table 9",
    "table10_checkpoints": "Table 10",
    "table12_latent_dim": "Table 12 analogue",
}


def _row(setting, lgm, alpha=ABLATION_ALPHA, method="crel", seed=None):
    return {"setting": str(setting), "lgm": lgm, "alpha": alpha, "method": method, "seed": seed}


def ablation_rows(table):
    """The rows of one Appendix C table: which LGM, method, alpha (and PCP seed) each one reads."""
    if table == "table4_beta":
        return [_row(f"{b:g}", vae_variant("beta", b)) for b in ABLATIONS["betas"]]
    if table in ("table5_sd_cond", "table6_sd_uncond"):
        return [_row(f"T={t}", sd_lgm(table == "table5_sd_cond", t)) for t in ABLATIONS["inference_steps"]]
    if table == "table7_vae_vs_sd":
        sd = sd_lgm(config["diffusion"]["conditional"], config["diffusion"]["inference_steps"])
        return [_row(name, lgm, f"{a:g}") for a in ABLATIONS["lgm_alphas"] for name, lgm in (("VAE", "vae"), ("SD", sd))]
    if table == "table8_mae":
        return [_row(f"{a:g}", vae_variant("metric", "mae"), f"{a:g}") for a in ABLATIONS["mae_alphas"]]
    if table == "table9_pcp":
        runs = [_row("PCP", None, method="pcp", seed=config["seed"] + i) for i in range(ABLATIONS["pcp_runs"])]
        return [_row("CReL (VAE)", "vae")] + runs
    if table == "table10_checkpoints":
        return [_row(f"epoch {e}", f"vae-long-epoch{e}") for e in ABLATIONS["checkpoint_epochs"]] + [
            _row("best", "vae-long-best")
        ]
    if table == "table12_latent_dim":
        return [_row(f"r={r}", vae_variant("latent_dim", r)) for r in ABLATIONS["latent_dims"]]
    raise ValueError(f"unknown ablation table {table!r}")


def ablation_settings(wildcards):
    return ablation_rows(wildcards.table)


def ablation_labels(wildcards):
    return {"table": ABLATION_TABLES[wildcards.table], "format": "CSV"}


def ablation_table_inputs(wildcards):
    """Named inputs of an ablation table: per-row summaries, R_Z/R_Y coverage and training summaries."""
    rows = ablation_rows(wildcards.table)
    ds = wildcards.dataset
    inputs = {"summaries": [summary_path(ds, r["method"], r["alpha"], r["lgm"], r["seed"]) for r in rows]}
    if wildcards.table in ("table4_beta", "table5_sd_cond", "table6_sd_uncond"):
        inputs["uncalibrated"] = [f"results/crel/{ds}/{r['lgm']}/crel/uncalibrated.json" for r in rows]
    if wildcards.table == "table10_checkpoints":
        inputs["training"] = [f"results/crel/{ds}/lgm/vae-long-best_summary.json"]
    if wildcards.table == "table12_latent_dim":
        inputs["training"] = [f"results/crel/{ds}/lgm/{r['lgm']}_summary.json" for r in rows]
    return inputs


def sweep_reliability_params(wildcards):
    return canonical(config["reliability"] | {"num_z0": int(wildcards.num_z0)})


def sweep_seed(wildcards):
    return int(wildcards.rseed)


def _sweep_path(dataset, num_z0, seed):
    return f"results/crel/{dataset}/{MAIN_LGM}/crel/alpha{ABLATION_ALPHA}/reliability_z{num_z0}_seed{seed}.parquet"


def num_z0_curve_inputs(wildcards):
    return [_sweep_path(wildcards.dataset, z, config["seed"]) for z in ABLATIONS["num_z0"]]


def num_z0_seed_inputs(wildcards):
    z = config["reliability"]["num_z0"]
    return [_sweep_path(wildcards.dataset, z, config["seed"] + i) for i in range(ABLATIONS["seed_runs"])]


def ablation_lgm_cost_inputs(wildcards):
    """Training summaries of every LGM the ablations train, named as Table 11's rows."""
    lgm_dir = f"results/crel/{wildcards.dataset}/lgm"
    return {
        "vae": f"{lgm_dir}/vae_summary.json",
        "cvae": f"{lgm_dir}/cvae_summary.json",
        "vae_long": f"{lgm_dir}/vae-long-best_summary.json",
        "ddpm_cond": f"{lgm_dir}/ddpm-cond_summary.json",
        "ddpm_uncond": f"{lgm_dir}/ddpm-uncond_summary.json",
    }


def crel_ablation_targets():
    report_dir = f"reports/crel/{DATASET}/ablations"
    return [f"{report_dir}/{table}.csv" for table in ABLATION_TABLES] + [
        f"{report_dir}/fig6_num_z0.png",
        f"{report_dir}/table13_seeds.csv",
        f"{report_dir}/table11_lgm_cost.csv",
    ]
