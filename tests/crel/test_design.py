"""The CReL design: LGM ids, Appendix C rows, fold sizes and the config checks the DAG relies on."""

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from condeval.crel import design, paper
from condeval.crel.synthetic import assign_folds, fold_sizes

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cfg():
    return yaml.safe_load((REPO / "config/config.yaml").read_text())["crel"]


@pytest.mark.parametrize(
    "lgm, parts",
    [
        ("vae", {"family": "vae"}),
        ("cvae", {"family": "cvae"}),
        ("vae-beta1e-05", {"family": "vae", "beta": 1e-5}),
        ("vae-r8", {"family": "vae", "latent_dim": 8}),
        ("vae-mae", {"family": "vae", "metric": "mae"}),
        ("vae-long-epoch100", {"family": "vae-long", "epoch": 100}),
        ("vae-long-best", {"family": "vae-long", "epoch": "best"}),
        ("sd-cond-T30", {"family": "sd", "conditional": True, "inference_steps": 30}),
        ("sd-uncond-T10", {"family": "sd", "conditional": False, "inference_steps": 10}),
    ],
)
def test_lgm_ids_parse(lgm, parts):
    assert design.parse_lgm_id(lgm) == parts


@pytest.mark.parametrize("bad", ["gan", "vae-beta", "sd-cond", "vae-r", "vae-long-epoch", "VAE"])
def test_malformed_lgm_id_is_refused(bad):
    with pytest.raises(ValueError, match="not an LGM id"):
        design.parse_lgm_id(bad)


def test_variants_map_the_configured_value_back_to_vae(cfg):
    assert design.vae_variant(cfg, "beta", cfg["lgm"]["beta"]) == "vae"
    assert design.vae_variant(cfg, "beta", 0.1) == "vae-beta0.1"
    assert design.vae_variant(cfg, "latent_dim", 8) == "vae-r8"
    assert design.vae_hyperparameters(cfg, "vae-r8")["latent_dim"] == 8
    assert design.vae_hyperparameters(cfg, "vae-beta0.1")["beta"] == 0.1
    assert "max_epochs" not in design.vae_hyperparameters(cfg)


def test_latent_diffusion_ids_load_their_ddpm_with_t_steps(cfg):
    assert design.lgm_checkpoint_name("sd-uncond-T40") == "ddpm-uncond"
    assert design.lgm_loading_options("sd-cond-T20") == {"inference_steps": 20}
    assert design.lgm_loading_options("vae-r3") == {}
    assert design.lgm_latent_dim(cfg, "vae-r3") == 3
    diffusion = copy.deepcopy(cfg)
    diffusion["lgm"]["kind"] = "latent_diffusion"
    assert design.main_lgm(diffusion) == f"sd-cond-T{cfg['diffusion']['inference_steps']}"


@pytest.mark.parametrize("table", list(design.ABLATION_TABLES))
def test_ablation_rows_name_valid_lgms_and_match_the_paper_settings(cfg, table):
    rows = design.ablation_rows(cfg, table)
    assert rows
    for row in rows:
        if row["lgm"] is not None:
            design.parse_lgm_id(row["lgm"])
    reported = {setting for setting, _ in paper.ablation_table(table)}
    assert reported <= {row["setting"] for row in rows}, table


@pytest.mark.parametrize("n", [1000, 1006, 3001, 50000, 77])
@pytest.mark.parametrize(
    "fractions",
    [{"lgm": 0.5, "dqr": 0.3, "cal": 0.1, "test": 0.1}, {"lgm": 0.6, "dqr": 0.24, "cal": 0.08, "test": 0.08}],
)
def test_fold_sizes_are_the_split_that_assign_folds_makes(n, fractions):
    labels = assign_folds(n, fractions, seed=3)
    assert fold_sizes(n, fractions) == {fold: int(np.sum(labels == fold)) for fold in fractions}


def test_config_check_uses_the_real_calibration_fold_size(cfg):
    small = copy.deepcopy(cfg)
    small["synthetic"].update(n=1006, splits={"lgm": 0.5, "dqr": 0.3, "cal": 0.1, "test": 0.1})
    small["calibration"]["alphas"] = [0.1, 0.0099]
    with pytest.raises(ValueError, match=r"crel\.calibration\.alphas.*only 100 points"):
        design.check_config(small)
    small["calibration"]["alphas"] = [0.1, 0.01]
    design.check_config(small)


def test_config_check_accepts_exactly_the_alphas_the_conformal_core_can_calibrate(cfg):
    from condeval.core.conformal import conformal_rank

    small = copy.deepcopy(cfg)
    small["synthetic"]["n"] = 1000
    n_cal = fold_sizes(1000, small["synthetic"]["splits"])["cal"]
    for alpha in (1 / (n_cal + 1), 1 / n_cal, 0.0099, 0.01, 0.0101, 0.05):
        small["calibration"]["alphas"] = [alpha]
        try:
            conformal_rank(n_cal, alpha)
        except ValueError:
            with pytest.raises(ValueError, match="crel.calibration.alphas"):
                design.check_config(small)
        else:
            design.check_config(small)


def test_config_check_refuses_alphas_that_name_one_job(cfg):
    clash = copy.deepcopy(cfg)
    clash["calibration"]["alphas"] = [0.1, 0.1000001]
    with pytest.raises(ValueError, match=r"crel\.calibration\.alphas.*same job"):
        design.check_config(clash)


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("ablations", "betas", [0.1, 0.1000001], r"crel\.ablations\.betas' holds 0\.1 and 0\.1000001.*same job"),
        ("dqr_baseline", "quantile_levels", [0.01, 0.0100000001], r"crel\.dqr_baseline\.quantile_levels.*same job"),
        ("grid", "quantiles", [0.99, 0.01], r"crel\.grid\.quantiles' must be \[lower, upper\] with lower < upper"),
    ],
)
def test_config_check_refuses_lists_that_would_misname_or_shrink(cfg, section, key, value, message):
    wrong = copy.deepcopy(cfg)
    wrong[section][key] = value
    with pytest.raises(ValueError, match=message):
        design.check_config(wrong)


def test_output_grid_refuses_reversed_quantiles():
    from condeval.crel.grid import OutputGrid

    outputs = np.random.default_rng(0).normal(size=(500, 2))
    grid = OutputGrid.from_samples(outputs, quantiles=(0.01, 0.99))
    assert (np.asarray(grid.lower) < np.asarray(grid.upper)).all()
    with pytest.raises(ValueError, match="quantiles must be \\[lower, upper\\]"):
        OutputGrid.from_samples(outputs, quantiles=(0.99, 0.01))


def test_the_shipped_configs_pass(cfg):
    design.check_config(cfg)
    design.check_config(yaml.safe_load((REPO / ".test/config/config.yaml").read_text())["crel"])
