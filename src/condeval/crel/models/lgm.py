"""Load a latent generative model (LGM) checkpoint, whichever kind it is.

CReL works with any LGM that has ``encode(y, x)``, a differentiable
``decode(z, x)`` and ``hparams.cond_dim`` / ``hparams.metric``: the VAE / CVAE of
:mod:`condeval.crel.models.vae` or the latent diffusion model of
:mod:`condeval.crel.models.diffusion`. :func:`load_lgm` tells them apart by the
hyperparameters saved in the Lightning checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from condeval.crel.models.vae import LatentVAE

if TYPE_CHECKING:  # imported when a checkpoint holds one: diffusers costs seconds a job
    from condeval.crel.models.diffusion import LatentDDPM

__all__ = ["lgm_kind", "load_lgm"]

_VAE_KEYS = {"output_dim", "latent_dim", "cond_dim", "beta", "metric"}


def lgm_kind(path: str | os.PathLike) -> type[LatentVAE | LatentDDPM]:
    """The class (:class:`LatentVAE` or :class:`LatentDDPM`) of the LGM saved at ``path``.

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ValueError
        If the file cannot be read as a checkpoint, or holds neither model.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no LGM checkpoint at {path}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # missing, truncated, not a torch file, ...
        raise ValueError(f"cannot read LGM checkpoint {path}: {type(error).__name__}: {error}") from error
    hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    hparams = hparams if isinstance(hparams, dict) else {}
    if "vae_hparams" in hparams:
        from condeval.crel.models.diffusion import LatentDDPM

        return LatentDDPM
    if _VAE_KEYS <= hparams.keys():
        return LatentVAE
    raise ValueError(f"{path} is neither a LatentVAE nor a LatentDDPM checkpoint (hyperparameters: {sorted(hparams)})")


def load_lgm(path: str | os.PathLike, inference_steps: int | None = None) -> LatentVAE | LatentDDPM:
    """Load a :class:`LatentVAE` or :class:`LatentDDPM` checkpoint on the CPU, in eval mode.

    Parameters
    ----------
    path : path
        Lightning checkpoint written by :func:`condeval.core.training.fit`.
    inference_steps : int, optional
        DDIM steps ``T`` for a :class:`LatentDDPM` (default: the saved value).
        Giving it for a VAE checkpoint is an error.

    Raises
    ------
    ValueError
        If the file is not a checkpoint of either model, naming the file.
    """
    kind = lgm_kind(path)
    if inference_steps is not None and kind is LatentVAE:
        raise ValueError(
            f"inference_steps={inference_steps} was given but {path} holds a {kind.__name__}, not a LatentDDPM"
        )
    model = kind.load_from_checkpoint(path, map_location="cpu", weights_only=True).eval()
    if inference_steps is not None:
        model.inference_steps = inference_steps
    return model
