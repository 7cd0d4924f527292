"""The CReL experiment design: LGM ids, the Appendix C tables and config checks.

The workflow (``workflow/rules/crel/``) builds paths and jobs from these functions; they
take the ``crel:`` section of the config as a plain dict, so they are unit-tested here.

An LGM id names the model behind every ``results/crel/<dataset>/<id>/`` folder:

========================  ==============================================================
``vae``, ``cvae``         the configured VAE / CVAE (Appendix A.1)
``vae-beta<b>``           the VAE with one hyperparameter changed (C.1, C.7, C.3)
``vae-r<k>``, ``vae-mae``
``vae-long-epoch<N>``     snapshots of one long VAE run (C.5)
``vae-long-best``
``sd-cond-T<T>``          latent diffusion in the VAE latent space, T DDIM steps (A.2, C.2)
``sd-uncond-T<T>``
========================  ==============================================================
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from condeval.core.config import alpha_label, alpha_labels, canonical
from condeval.core.conformal import conformal_rank
from condeval.core.resources import (
    INFERENCE_BYTES_PER_TOKEN,
    GpuWork,
    forward_flops,
    image_bytes,
    mlp_parameters,
    mlp_training_work,
    pgd_work,
    unet_forward_flops,
    vae_decode_flops,
)
from condeval.crel.image_to_text import FOLD_FRACTIONS
from condeval.crel.synthetic import FOLDS, fold_sizes

__all__ = [
    "LGM_ID",
    "ABLATION_TABLES",
    "parse_lgm_id",
    "main_lgm",
    "sd_lgm",
    "vae_variant",
    "vae_hyperparameters",
    "lgm_checkpoint_name",
    "lgm_loading_options",
    "lgm_latent_dim",
    "ablation_rows",
    "check_config",
    "check_embedding_alpha",
    "generation_work",
    "captioning_work",
    "EMBEDDING_WIDTH",
    "vae_parameters",
    "lgm_training_work",
    "diffusion_training_work",
    "dqr_training_work",
    "reliability_work",
    "embedding_fit_work",
    "lgm_parameters",
    "embedding_reliability_work",
]

LGM_ID = r"vae|cvae|vae-beta[0-9.e+-]+|vae-r\d+|vae-mae|vae-long-(epoch\d+|best)|sd-(cond|uncond)-T\d+"

#: Appendix C tables built by the ablation target, with the paper's name of each.
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

_TRAINING_KEYS = ("kind", "max_epochs", "patience")


def parse_lgm_id(lgm: str) -> dict:
    """The parts of an LGM id.

    Returns
    -------
    dict
        ``{"family": "vae" | "cvae" | "vae-long" | "sd", ...}`` with ``beta``, ``latent_dim``,
        ``metric``, ``epoch`` (an int or ``"best"``), ``conditional`` and ``inference_steps`` where
        the id sets them.

    Raises
    ------
    ValueError
        When ``lgm`` is not an LGM id.
    """
    if not re.fullmatch(LGM_ID, lgm):
        raise ValueError(f"{lgm!r} is not an LGM id (expected one of the forms {LGM_ID})")
    if lgm.startswith("sd-"):
        conditioning, steps = lgm.removeprefix("sd-").split("-T")
        return {"family": "sd", "conditional": conditioning == "cond", "inference_steps": int(steps)}
    if lgm.startswith("vae-long-"):
        snapshot = lgm.removeprefix("vae-long-")
        return {"family": "vae-long", "epoch": "best" if snapshot == "best" else int(snapshot.removeprefix("epoch"))}
    if lgm.startswith("vae-beta"):
        return {"family": "vae", "beta": float(lgm.removeprefix("vae-beta"))}
    if lgm.startswith("vae-r"):
        return {"family": "vae", "latent_dim": int(lgm.removeprefix("vae-r"))}
    if lgm == "vae-mae":
        return {"family": "vae", "metric": "mae"}
    return {"family": lgm}


def sd_lgm(conditional: bool, steps: int) -> str:
    """The LGM id of latent diffusion with T = ``steps`` DDIM steps."""
    return f"sd-{'cond' if conditional else 'uncond'}-T{steps}"


def main_lgm(cfg: dict) -> str:
    """The LGM id behind Table 1, from ``lgm.kind``."""
    kind = cfg["lgm"]["kind"]
    if kind == "latent_diffusion":
        return sd_lgm(cfg["diffusion"]["conditional"], cfg["diffusion"]["inference_steps"])
    return kind


def vae_variant(cfg: dict, name: str, value=None) -> str:
    """The LGM id of the VAE with ``lgm.<name>`` set to ``value``; the configured value is ``vae``."""
    if value is None or cfg["lgm"][name] == value:
        return "vae"
    if name == "beta":
        return f"vae-beta{value:g}"
    if name == "latent_dim":
        return f"vae-r{value}"
    if name == "metric":
        return f"vae-{value}"
    raise ValueError(f"no LGM id varies lgm.{name}")


def vae_hyperparameters(cfg: dict, lgm: str = "vae") -> dict:
    """Hyperparameters of the VAE behind ``lgm`` (``vae``, ``vae-beta<b>``, ``vae-r<k>``, ``vae-mae``)."""
    model = {k: v for k, v in cfg["lgm"].items() if k not in _TRAINING_KEYS}
    parts = parse_lgm_id(lgm)
    if parts["family"] != "vae":
        raise ValueError(f"LGM id {lgm!r} is not a VAE variant")
    model.update({k: v for k, v in parts.items() if k != "family"})
    return canonical(model)


def lgm_checkpoint_name(lgm: str) -> str:
    """Stem of the checkpoint an LGM id loads: a latent-diffusion id reads its DDPM."""
    parts = parse_lgm_id(lgm)
    if parts["family"] == "sd":
        return f"ddpm-{'cond' if parts['conditional'] else 'uncond'}"
    return lgm


def lgm_loading_options(lgm: str) -> dict:
    """Loading options of an LGM id (the DDIM step count T of a latent-diffusion id)."""
    parts = parse_lgm_id(lgm)
    return {"inference_steps": parts["inference_steps"]} if parts["family"] == "sd" else {}


def lgm_latent_dim(cfg: dict, lgm: str) -> int:
    """Latent dimension r of an LGM id."""
    return parse_lgm_id(lgm).get("latent_dim", cfg["lgm"]["latent_dim"])


def _row(setting, lgm, alpha, method="crel", seed=None) -> dict:
    return {"setting": str(setting), "lgm": lgm, "alpha": alpha, "method": method, "seed": seed}


def ablation_rows(cfg: dict, table: str) -> list[dict]:
    """The rows of one Appendix C table: which LGM, method, alpha label (and PCP seed) each reads.

    Setting labels match the ``setting`` of ``condeval/crel/paper.yaml``.
    """
    ablations = cfg["ablations"]
    alpha = alpha_label(ablations["alpha"])
    if table == "table4_beta":
        return [_row(f"{b:g}", vae_variant(cfg, "beta", b), alpha) for b in ablations["betas"]]
    if table in ("table5_sd_cond", "table6_sd_uncond"):
        conditional = table == "table5_sd_cond"
        return [_row(f"T={t}", sd_lgm(conditional, t), alpha) for t in ablations["inference_steps"]]
    if table == "table7_vae_vs_sd":
        sd = sd_lgm(cfg["diffusion"]["conditional"], cfg["diffusion"]["inference_steps"])
        return [
            _row(name, lgm, alpha_label(a))
            for a in ablations["lgm_alphas"]
            for name, lgm in (("VAE", "vae"), ("SD", sd))
        ]
    if table == "table8_mae":
        mae = vae_variant(cfg, "metric", "mae")
        return [_row(alpha_label(a), mae, alpha_label(a)) for a in ablations["mae_alphas"]]
    if table == "table9_pcp":
        runs = [_row("PCP", None, alpha, method="pcp", seed=cfg["seed"] + i) for i in range(ablations["pcp_runs"])]
        return [_row("CReL (VAE)", "vae", alpha)] + runs
    if table == "table10_checkpoints":
        snapshots = [_row(f"epoch {e}", f"vae-long-epoch{e}", alpha) for e in ablations["checkpoint_epochs"]]
        return snapshots + [_row("best", "vae-long-best", alpha)]
    if table == "table12_latent_dim":
        return [_row(f"r={r}", vae_variant(cfg, "latent_dim", r), alpha) for r in ablations["latent_dims"]]
    raise ValueError(f"unknown ablation table {table!r}; expected one of {sorted(ABLATION_TABLES)}")


def _check_alphas(key: str, alphas: list[float], n_cal: int) -> None:
    """Every alpha has a conformal rank within the calibration fold (:func:`conformal_rank`)."""
    alpha_labels(alphas, key)
    for alpha in alphas:
        try:
            conformal_rank(n_cal, alpha)
        except ValueError as error:
            raise ValueError(
                f"config key '{key}' holds {alpha}, but the calibration fold has only {n_cal} points: {error}"
            ) from None


def _check_splits(key: str, splits: dict) -> None:
    total = sum(splits.values())
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ValueError(f"config key '{key}' must sum to 1; got {total}")


def check_config(cfg: dict, prefix: str = "crel.") -> None:
    """Checks of the ``crel:`` section that a JSON schema cannot express.

    Raises
    ------
    ValueError
        Naming the key (with ``prefix``) and what is wrong.
    """
    _check_splits(f"{prefix}synthetic.splits", cfg["synthetic"]["splits"])
    n_cal = fold_sizes(cfg["synthetic"]["n"], cfg["synthetic"]["splits"])["cal"]
    ablations = cfg["ablations"]
    for key, alphas in [
        ("calibration.alphas", cfg["calibration"]["alphas"]),
        ("ablations.alpha", [ablations["alpha"]]),
        ("ablations.lgm_alphas", ablations["lgm_alphas"]),
        ("ablations.mae_alphas", ablations["mae_alphas"]),
    ]:
        _check_alphas(prefix + key, alphas, n_cal)
    late = [e for e in ablations["checkpoint_epochs"] if e > ablations["long_max_epochs"]]
    if late:
        raise ValueError(
            f"config key '{prefix}ablations.checkpoint_epochs' holds {late}, past ablations.long_max_epochs"
        )
    if len(cfg["lgm"]["hidden_dims"]) % 2:
        raise ValueError(f"config key '{prefix}lgm.hidden_dims' must list encoder then decoder widths (even length)")
    # each value names one model (vae-beta0.1, tau0.01): two that print alike would be one model in two rows
    alpha_labels(ablations["betas"], prefix + "ablations.betas")
    alpha_labels(cfg["dqr_baseline"]["quantile_levels"], prefix + "dqr_baseline.quantile_levels")
    low, high = cfg["grid"]["quantiles"]
    if not low < high:
        raise ValueError(
            f"config key '{prefix}grid.quantiles' must be [lower, upper] with lower < upper; got {[low, high]}"
        )
    scaling = cfg.get("scaling")
    if scaling:
        _check_splits(f"{prefix}scaling.splits", scaling["splits"])
        n_cal = fold_sizes(scaling["n"], scaling["splits"])["cal"]
        _check_alphas(f"{prefix}scaling.alpha", [scaling["alpha"]], n_cal)


def check_embedding_alpha(key: str, alpha: float, items: int) -> None:
    """Image-to-text's or text-to-image's ``alpha`` (config ``key``) against its calibration fold: the
    :data:`~condeval.crel.image_to_text.FOLD_FRACTIONS` share of its ``items`` images, cut as
    :func:`~condeval.crel.image_to_text.assign_folds` cuts it (at most that many: fewer if fewer exist).

    Raises
    ------
    ValueError
        Naming ``key`` when the fold holds too few units for a conformal rank at ``alpha``.
    """
    _check_alphas(key, [alpha], int(items * FOLD_FRACTIONS[2]))


assert set(FOLDS) == {"lgm", "dqr", "cal", "test"}


#: CLIP's text tokens (SD3's two CLIP encoders, Kandinsky's prior).
CLIP_TOKENS = 77
#: Denoising steps of Kandinsky 2.2's prior (its pipeline's default).
KANDINSKY_PRIOR_STEPS = 25
#: Tokens a captioner writes per image (COCO captions run 10-20 words) and the image tokens it reads (ViT at 224, patch 16).
CAPTION_TOKENS, CAPTIONER_IMAGE_TOKENS = 30, 197


def _denoiser_forward_flops(family: str, denoiser: float, image_size: int, max_length: int) -> float:
    latent_side = image_size // 8
    if family == "kandinsky":
        return unet_forward_flops(denoiser, latent_side)
    text = max_length + (2 * CLIP_TOKENS if family == "sd3" else 0)
    return forward_flops(denoiser, (latent_side // 2) ** 2 + text)  # MMDiT: 2 x 2 patches and text tokens jointly


def generation_work(
    model: dict,
    parameters: dict | None,
    prior: dict | None,
    image_size: int,
    max_length: int,
    batch_size: int,
    images: int,
) -> GpuWork:
    """One ``generate_images`` job's GPU work.

    Parameters
    ----------
    model : dict
        The generator's section (``crel.text_to_image.models.<model>``: ``family``, ``sampling``, ``dtype``).
    parameters, prior : dict or None
        The pipeline's (and Kandinsky's prior's) ``loaded`` and ``denoiser`` parameter counts; None when
        unknown (a generator this run trains), giving a work of no weight.
    image_size, max_length, batch_size : int
        The track's image side, T5 tokens and prompts per call.
    images : int
        The images the job draws.
    """
    if not parameters:
        return GpuWork(
            0.0,
            0.0,
            model.get("dtype", "auto"),
            basis="a generator trained by this run",
            written_bytes=images * image_bytes(image_size),
        )
    sampling, family = model["sampling"], model["family"]
    forwards = 1 if family == "flux" or sampling.get("guidance_scale", 1.0) <= 1.0 else 2  # FLUX: distilled guidance
    denoiser = parameters.get("denoiser", parameters["loaded"])
    step = forwards * _denoiser_forward_flops(family, denoiser, image_size, max_length)
    per_image = sampling["num_inference_steps"] * step + vae_decode_flops(image_size)
    per_image += forward_flops(parameters["loaded"] - denoiser, max_length)  # text encoders, once per prompt
    loaded = parameters["loaded"]
    if prior:
        per_image += KANDINSKY_PRIOR_STEPS * 2 * forward_flops(prior.get("denoiser", prior["loaded"]), CLIP_TOKENS)
        loaded += prior["loaded"]
    tokens = forwards * batch_size * ((image_size // 16) ** 2 + max_length)
    return GpuWork(
        loaded,
        images * per_image,
        model.get("dtype", "auto"),
        activation_bytes=tokens * INFERENCE_BYTES_PER_TOKEN,
        written_bytes=images * image_bytes(image_size),
        basis=f"{images:,} images x {sampling['num_inference_steps']} steps x {forwards} forward(s)",
    )


def captioning_work(parameters: dict | None, sampling: dict, dtype: str, batch_size: int, images: int) -> GpuWork:
    """One ``generate_captions`` job's GPU work: ``images`` captions from a captioner of ``parameters``
    (None: one this run trains) sampled with generate()'s ``sampling`` keywords."""
    if not parameters:
        return GpuWork(0.0, 0.0, dtype, basis="a captioner trained by this run")
    beams = sampling.get("num_beams", 1)
    per_image = forward_flops(parameters["loaded"], CAPTIONER_IMAGE_TOKENS + beams * CAPTION_TOKENS)
    tokens = batch_size * beams * (CAPTIONER_IMAGE_TOKENS + CAPTION_TOKENS)
    return GpuWork(
        parameters["loaded"],
        images * per_image,
        dtype,
        activation_bytes=tokens * INFERENCE_BYTES_PER_TOKEN,
        basis=f"{images:,} captions",
    )


# ------------------------------------------------------------------ the small models' GPU work
#: The widest embedding CReL's image-to-text and text-to-image models fit (CLIP ViT-L/14's 768, BERT's 768,
#: DINOv2's 1024): an upper bound on their input width.
EMBEDDING_WIDTH = 1024


def vae_parameters(output_dim: int, latent_dim: int, hidden_dims, condition_dim: int = 0) -> int:
    """A (conditional) VAE's MLP encoder to the latent mean and log-variance and its mirrored decoder."""
    hidden = list(hidden_dims)
    encoder = mlp_parameters([output_dim + condition_dim, *hidden, 2 * latent_dim])
    return encoder + mlp_parameters([latent_dim + condition_dim, *reversed(hidden), output_dim])


def _training_rows(data: dict, fold: str) -> int:
    """A synthetic dataset's (``crel.synthetic`` or ``crel.scaling``) rows of ``fold`` that train."""
    rows = fold_sizes(data["n"], data["splits"])[fold]
    return math.ceil(rows * (1.0 - data.get("val_fraction", 0.0)))


def lgm_training_work(
    data: dict, lgm: dict, *, epochs: int, latent_dim: int, conditional: bool = False, batch_size: int | None = None
) -> GpuWork:
    """One VAE or CVAE training job (``train_vae``, ``train_cvae``, ``train_vae_long``, ``scaling_train_vae``) on
    the LGM fold of ``data``, for ``epochs`` at most, with the ``lgm`` section's hidden widths and batch."""
    parameters = vae_parameters(data["p"], latent_dim, lgm["hidden_dims"], data["d"] if conditional else 0)
    return mlp_training_work(_training_rows(data, "lgm"), epochs, batch_size or lgm["batch_size"], parameters)


def diffusion_training_work(data: dict, diffusion: dict, latent_dim: int) -> GpuWork:
    """One ``train_ddpm`` job: the latent denoiser (time embedding and condition in) on the LGM fold."""
    width = latent_dim + diffusion["time_embed_dim"] + (data["d"] if diffusion.get("conditional") else 0)
    parameters = mlp_parameters([width, *diffusion["hidden_dims"], latent_dim])
    return mlp_training_work(_training_rows(data, "lgm"), diffusion["max_epochs"], diffusion["batch_size"], parameters)


def dqr_training_work(data: dict, dqr: dict, latent_dim: int, *, epochs: int | None = None) -> GpuWork:
    """One ``train_dqr`` job: the directional quantile network from the condition to the latent space, on
    the DQR fold, every row scored in ``directions_per_step`` directions."""
    parameters = mlp_parameters([data["d"], *dqr["hidden_dims"], latent_dim + 1])
    work = mlp_training_work(_training_rows(data, "dqr"), epochs or dqr["max_epochs"], dqr["batch_size"], parameters)
    return _scaled(work, dqr.get("directions_per_step", 1))


def _scaled(work: GpuWork, factor: float) -> GpuWork:
    return replace(work, flops=work.flops * factor)


def reliability_work(points: int, reliability: dict, decoder_parameters: int, starts: int | None = None) -> GpuWork:
    """One PGD worst-case job (``crel_reliability``, the sweeps, ``*_evaluate``): ``points`` test points
    through the decoder and the DQR from ``num_z0`` starts (or ``starts``) for ``steps`` steps."""
    return pgd_work(points, starts or reliability["num_z0"], reliability["steps"], decoder_parameters)


def embedding_fit_work(items: int, vae: dict, dqr: dict) -> GpuWork:
    """One ``i2t_fit`` / ``t2i_fit`` job: the VAE on the embeddings of the VAE fold, then the DQR on the
    DQR fold (:data:`condeval.crel.image_to_text.FOLD_FRACTIONS`), embeddings at most :data:`EMBEDDING_WIDTH` wide."""
    vae_rows, dqr_rows = (math.ceil(items * share) for share in FOLD_FRACTIONS[:2])
    latent = vae["latent_dim"]
    lgm = mlp_training_work(
        vae_rows,
        vae["max_epochs"],
        vae.get("batch_size", 512),
        vae_parameters(EMBEDDING_WIDTH, latent, vae["hidden_dims"], EMBEDDING_WIDTH),
    )
    quantile = mlp_training_work(
        dqr_rows,
        dqr["max_epochs"],
        dqr.get("batch_size", 256),
        mlp_parameters([EMBEDDING_WIDTH, *dqr["hidden_dims"], latent + 1]),
    )
    return GpuWork(
        lgm.loaded_parameters + quantile.loaded_parameters,
        lgm.flops + quantile.flops,
        "float32",
        trained_parameters=max(lgm.trained_parameters, quantile.trained_parameters),
        basis=f"VAE on {vae_rows:,}, DQR on {dqr_rows:,} rows",
        steps=lgm.steps + quantile.steps,
    )


def lgm_parameters(cfg: dict, lgm: str, data: dict | None = None) -> int:
    """The weights a PGD search runs through for an LGM id: its VAE (encoder included, an upper bound), a
    latent-diffusion id's denoiser once per DDIM step on top."""
    data = data or cfg["synthetic"]
    parts = parse_lgm_id(lgm)
    conditional = parts["family"] == "cvae"
    vae = vae_hyperparameters(cfg) if parts["family"] != "vae" else vae_hyperparameters(cfg, lgm)
    parameters = vae_parameters(data["p"], vae["latent_dim"], vae["hidden_dims"], data["d"] if conditional else 0)
    if parts["family"] == "sd":
        diffusion = cfg["diffusion"]
        width = vae["latent_dim"] + diffusion["time_embed_dim"] + data["d"]
        parameters += parts["inference_steps"] * mlp_parameters([width, *diffusion["hidden_dims"], vae["latent_dim"]])
    return parameters


def embedding_reliability_work(items: int, vae: dict, reliability: dict, starts: int | None = None) -> GpuWork:
    """One ``i2t_evaluate`` / ``t2i_evaluate`` / ``i2t_num_z0`` job: PGD over the test fold of ``items``
    through the embeddings' VAE, from ``num_z0`` starts (``starts``: a curve's in all)."""
    test = int(items * FOLD_FRACTIONS[-1])
    parameters = vae_parameters(EMBEDDING_WIDTH, vae["latent_dim"], vae["hidden_dims"], EMBEDDING_WIDTH)
    return reliability_work(test, reliability, parameters, starts)
