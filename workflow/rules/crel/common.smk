# Helpers of the CReL track: its config section, wildcard constraints, paths and input functions.
# The LGM-id grammar and the Appendix C design live in condeval.crel.design (unit-tested there).
#
# GPU-capable rules (training, CReL-rho) declare `gpu=0`: the CPU is the default. A site asks for
# a GPU with `--set-resources train_vae:gpu=1` (profiles/slurm does for its GPU partition) and the
# job then runs on CUDA, its script reading the device from snakemake.resources.gpu.
import math

from condeval.crel import design
from condeval.crel.paper import paper_numbers

CREL = track_config("crel")
design.check_config(CREL)
PAPER = paper_numbers()  # the paper's numbers, for report captions (condeval/crel/paper.yaml)

DATASET = CREL["synthetic"]["kind"]
ALPHAS = alpha_labels(CREL["calibration"]["alphas"], "crel.calibration.alphas")
DQR_TAU = f"{CREL['dqr']['quantile_level']:g}"
BASELINE_TAUS = [f"{t:g}" for t in CREL["dqr_baseline"]["quantile_levels"]]
MAIN_LGM = design.main_lgm(CREL)
ABLATIONS = CREL["ablations"]
ABLATION_ALPHA = f"{ABLATIONS['alpha']:g}"
ABLATION_TABLES = design.ABLATION_TABLES

# Scoped to this track's rules (each lists `**CREL_WILDCARDS` under wildcard_constraints), so
# the next tracks may use {dataset} or {method} with their own values.
CREL_WILDCARDS = {
    "dataset": "linear|nonlinear",
    "alpha": r"0\.\d+|\de-\d+",
    "tau": r"0\.\d+|\de-\d+",
    "method": "crel|feldman|dqr|pcp",
    "lgm": design.LGM_ID,
    "seed": r"\d+",
    "rseed": r"\d+",
    "num_z0": r"\d+",
    "table": "|".join(ABLATION_TABLES),
    "r": r"\d+",
}


def vae_model_params(wildcards):
    return design.vae_hyperparameters(CREL, wildcards.model)


def lgm_file(dataset, lgm):
    """Checkpoint file of an LGM id: a latent-diffusion id reads its DDPM, every other id its own file."""
    return f"results/crel/{dataset}/lgm/{design.lgm_checkpoint_name(lgm)}.ckpt"


def lgm_checkpoint(wildcards):
    return lgm_file(wildcards.dataset, wildcards.lgm)


def lgm_options(wildcards):
    return design.lgm_loading_options(wildcards.lgm)


def region_test_points(wildcards):
    """Test points whose regions are decoded: all configured ones for Table 1's LGM, fewer for ablations."""
    if wildcards.lgm == MAIN_LGM:
        return CREL["evaluation"]["region_test_points"]
    return sweep_test_points(wildcards)


def sweep_test_points(wildcards):
    """Test points of the ablations and of the num_z0 / seed sweeps."""
    return min(CREL["evaluation"]["region_test_points"], ABLATIONS["region_test_points"])


def latent_points(wildcards):
    """Latent grid points per region: at least 4 per axis, so high-r ablations are not a single cell."""
    return max(CREL["grid"]["latent_points"], 4 ** design.lgm_latent_dim(CREL, wildcards.lgm))


def ddpm_is_conditional(wildcards):
    return wildcards.conditioning == "cond"


def ddpm_model_params():
    excluded = ("conditional", "inference_steps", "max_epochs", "patience")
    return canonical({k: v for k, v in CREL["diffusion"].items() if k not in excluded})


def dqr_training_params():
    """DQR hyperparameters that key a training job; tau comes from the {tau} wildcard."""
    return canonical({k: v for k, v in CREL["dqr"].items() if k != "quantile_level"})


def crel_vae_work(wildcards):
    """One train_vae job's GPU work (condeval.crel.design.lgm_training_work)."""
    vae = design.vae_hyperparameters(CREL, wildcards.model)
    return design.lgm_training_work(
        CREL["synthetic"], CREL["lgm"] | vae, epochs=CREL["lgm"]["max_epochs"], latent_dim=vae["latent_dim"]
    )


def crel_cvae_work(wildcards):
    """The train_cvae job's GPU work."""
    return design.lgm_training_work(
        CREL["synthetic"],
        CREL["lgm"],
        epochs=CREL["cvae"]["max_epochs"],
        latent_dim=CREL["lgm"]["latent_dim"],
        conditional=True,
    )


def crel_vae_long_work(wildcards):
    """The train_vae_long job's GPU work: every epoch of the long run."""
    return design.lgm_training_work(
        CREL["synthetic"], CREL["lgm"], epochs=ABLATIONS["long_max_epochs"], latent_dim=CREL["lgm"]["latent_dim"]
    )


def crel_ddpm_work(wildcards):
    """One train_ddpm job's GPU work."""
    diffusion = CREL["diffusion"] | {"conditional": ddpm_is_conditional(wildcards)}
    return design.diffusion_training_work(CREL["synthetic"], diffusion, CREL["lgm"]["latent_dim"])


def crel_dqr_work(wildcards):
    """One train_dqr job's GPU work, in its LGM's latent space."""
    return design.dqr_training_work(CREL["synthetic"], CREL["dqr"], design.lgm_latent_dim(CREL, wildcards.lgm))


def crel_reliability_work(wildcards):
    """One crel_reliability job's GPU work: PGD over its test points through its LGM."""
    return design.reliability_work(
        region_test_points(wildcards), CREL["reliability"], design.lgm_parameters(CREL, wildcards.lgm)
    )


def crel_sweep_work(wildcards):
    """One crel_reliability_sweep job's GPU work: PGD at its num_z0."""
    return design.reliability_work(
        sweep_test_points(wildcards), sweep_reliability_params(wildcards), design.lgm_parameters(CREL, wildcards.lgm)
    )


def summary_path(dataset, method, alpha, lgm=None, seed=None):
    """Per-alpha summary of a method: PCP is keyed by its sampling seed, the others by their LGM."""
    if method == "pcp":
        return f"results/crel/{dataset}/pcp/seed{CREL['seed'] if seed is None else seed}/alpha{alpha}/summary.json"
    return f"results/crel/{dataset}/{lgm or MAIN_LGM}/{method}/alpha{alpha}/summary.json"


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
    return expand(
        "results/crel/{dataset}/{lgm}/dqr/tau{tau}.ckpt", dataset=wildcards.dataset, lgm=lgm, tau=BASELINE_TAUS
    )


def figure_alpha():
    """The alpha shown in Fig. 2: 0.1 as in the paper when listed, else the first."""
    return "0.1" if "0.1" in ALPHAS else ALPHAS[0]


def crel_synthetic_targets():
    report_dir = f"reports/crel/{DATASET}"
    names = [
        "table1.csv",
        "table1.md",
        "table1.png",
        "coverage_vs_alpha.png",
        "fig2_regions.png",
        "fig5_vae_vs_cvae.png",
        "reliability.csv",
        "lgm_cost.csv",
    ]
    return [f"{report_dir}/{name}" for name in names]


# ---------------------------------------------------------------- Appendix C ablations
def ablation_settings(wildcards):
    return design.ablation_rows(CREL, wildcards.table)


def ablation_labels(wildcards):
    return {"table": ABLATION_TABLES[wildcards.table], "format": "CSV"}


def ablation_table_inputs(wildcards):
    """Named inputs of an ablation table: per-row summaries, R_Z/R_Y coverage and training summaries."""
    rows = design.ablation_rows(CREL, wildcards.table)
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
    return canonical(CREL["reliability"] | {"num_z0": int(wildcards.num_z0)})


def sweep_seed(wildcards):
    return int(wildcards.rseed)


def _sweep_path(dataset, num_z0, seed):
    return f"results/crel/{dataset}/{MAIN_LGM}/crel/alpha{ABLATION_ALPHA}/reliability_z{num_z0}_seed{seed}.parquet"


def num_z0_curve_inputs(wildcards):
    return [_sweep_path(wildcards.dataset, z, CREL["seed"]) for z in ABLATIONS["num_z0"]]


def num_z0_seed_inputs(wildcards):
    z = CREL["reliability"]["num_z0"]
    return [_sweep_path(wildcards.dataset, z, CREL["seed"] + i) for i in range(ABLATIONS["seed_runs"])]


def ablation_lgm_cost_inputs(wildcards):
    """Training summaries of every LGM the ablations train, named as Table 11's rows."""
    lgm_dir = f"results/crel/{wildcards.dataset}/lgm"
    names = {
        "vae": "vae",
        "cvae": "cvae",
        "vae_long": "vae-long-best",
        "ddpm_cond": "ddpm-cond",
        "ddpm_uncond": "ddpm-uncond",
    }
    return {row: f"{lgm_dir}/{name}_summary.json" for row, name in names.items()}


def crel_ablation_targets():
    report_dir = f"reports/crel/{DATASET}/ablations"
    extra = ["fig6_num_z0.png", "table13_seeds.csv", "table11_lgm_cost.csv"]
    return [f"{report_dir}/{table}.csv" for table in ABLATION_TABLES] + [f"{report_dir}/{name}" for name in extra]


# ---------------------------------------------------------------- Appendix E scaling
SCALING = CREL.get("scaling", {})


def crel_scaling_targets():
    """Fig. 8 (PNG and SVG) and its table. Fixed paths, so a target rule may list them under any
    config; building them needs `crel.scaling`."""
    report_dir = "reports/crel/scaling"
    names = ["fig8_calibration_runtime.png", "fig8_calibration_runtime.svg", "calibration_runtime.csv"]
    return [f"{report_dir}/{name}" for name in names]


def scaling_vae_params(wildcards):
    """The configured VAE with the track's beta and latent dimension r."""
    return canonical(design.vae_hyperparameters(CREL) | {"beta": SCALING["beta"], "latent_dim": int(wildcards.r)})


def scaling_dqr_params():
    """The configured DQR with the track's epoch cap; tau comes from the {tau} wildcard."""
    return canonical(
        dqr_training_params() | {"max_epochs": SCALING.get("dqr_epochs"), "patience": SCALING.get("dqr_patience")}
    )


def scaling_vae_work(wildcards):
    """One scaling_train_vae job's GPU work at latent dimension r."""
    return design.lgm_training_work(SCALING, CREL["lgm"], epochs=SCALING["vae_epochs"], latent_dim=int(wildcards.r))


def scaling_dqr_work(wildcards):
    """One scaling_train_dqr job's GPU work at latent dimension r."""
    return design.dqr_training_work(SCALING, CREL["dqr"], int(wildcards.r), epochs=SCALING["dqr_epochs"])


def scaling_timings(wildcards):
    """One timing per configured r; the first input function run when Fig. 8 is requested."""
    if not SCALING:
        raise ValueError("config key 'crel.scaling' is missing: the Appendix E (Fig. 8) targets need it")
    return expand("results/crel_scaling/{dataset}/r{r}/timing.json", dataset=SCALING["kind"], r=SCALING["latent_dims"])


def scaling_other_models(wildcards):
    """Every other r's DQR: timings start once the whole track is trained, so no training job runs
    beside one (ancient: retraining another r does not re-time this one)."""
    return [
        ancient(f"results/crel_scaling/{wildcards.dataset}/r{r}/dqr/tau{DQR_TAU}.ckpt")
        for r in SCALING["latent_dims"]
        if str(r) != wildcards.r
    ]


def scaling_timing_runtime(wildcards):
    """Minutes: the grid scheme's budget, its probe, CReL and loading, with margin."""
    return 30 + math.ceil(2 * (SCALING["grid_budget_s"] + SCALING["probe_budget_s"]) / 60)
