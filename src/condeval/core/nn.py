"""Small neural-network building blocks shared by every track's models.

:class:`CheckpointedModule` is the base of the models that are trained in Lightning but used
without it: a job that only loads one and runs it imports torch, not Lightning (whose import,
with the torchmetrics it pulls in, costs about 7 s a job on 2 cores). Training wraps the module in
:class:`condeval.core.training.LightningAdapter`.
"""

from __future__ import annotations

import inspect
import itertools
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

__all__ = ["CheckpointedModule", "HParams", "mlp", "random_unit_vectors"]

#: Attribute under which :class:`condeval.core.training.LightningAdapter` holds the module, so the
#: prefix of its keys in a Lightning checkpoint's ``state_dict``.
ADAPTER_PREFIX = "model."


class HParams(dict):
    """Hyperparameters, readable and settable as attributes (``hparams.latent_dim``) like Lightning's."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no hyperparameter {name!r} (saved: {sorted(self)})") from None

    def __setattr__(self, name: str, value) -> None:
        self[name] = value


class CheckpointedModule(nn.Module):
    """An ``nn.Module`` with saved hyperparameters, Lightning's training hooks and a torch-only loader.

    A subclass calls :meth:`save_hyperparameters` with plain Python values that rebuild it
    (``type(self)(**hparams)``) and may define ``training_step`` and ``validation_step`` as for a
    ``LightningModule``, and ``configure_optimizers(lr)``: the learning rate is its training's
    (:class:`condeval.core.settings.TrainSettings`' ``lr``, default :attr:`default_lr`), not a
    hyperparameter of the model. :meth:`log` reaches Lightning's logger while
    :class:`condeval.core.training.LightningAdapter` trains it, and does nothing otherwise.
    """

    #: The learning rate it trains at when its :class:`~condeval.core.settings.TrainSettings` names none.
    default_lr = 1e-3
    _log_to = None  # set by LightningAdapter to its own ``log``

    def __init__(self) -> None:
        super().__init__()
        self.hparams = HParams()

    def save_hyperparameters(self, hparams: dict) -> None:
        """Record ``hparams`` (plain Python values) as :attr:`hparams`, as checkpoints store them."""
        self.hparams = HParams(hparams)

    def log(self, name: str, value, **kwargs) -> None:
        """Lightning's ``LightningModule.log`` while training under the adapter; a no-op otherwise."""
        if self._log_to is not None:
            self._log_to(name, value, **kwargs)

    @property
    def device(self) -> torch.device:
        """Where the module's first parameter or buffer lives (the CPU if it has none)."""
        tensor = next(itertools.chain(self.parameters(), self.buffers()), None)  # no state_dict: a hot path
        return torch.device("cpu") if tensor is None else tensor.device

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the module's first floating-point parameter (float32 if it has none)."""
        return next((p.dtype for p in self.parameters() if p.is_floating_point()), torch.float32)

    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Write the module's hyperparameters and weights, atomically, as a checkpoint that
        :meth:`load_from_checkpoint` reads (tensors and plain values only)."""
        from condeval.core.io import atomic_path

        with atomic_path(path) as tmp:
            torch.save({"hyper_parameters": dict(self.hparams), "state_dict": self.state_dict()}, tmp)
        return Path(path)

    @classmethod
    def load_from_checkpoint(
        cls, path: str | os.PathLike, map_location="cpu", *, weights_only: bool = True
    ) -> CheckpointedModule:
        """The module saved in the Lightning checkpoint ``path``, with torch alone.

        Rebuilt from the checkpoint's ``hyper_parameters``, then its ``state_dict`` loaded
        strictly (keys with or without the adapter's ``model.`` prefix). Only tensors and plain
        values are read (``weights_only`` stays in the signature as Lightning's; ``False``, which
        would unpickle arbitrary objects, is refused).

        Raises
        ------
        ValueError
            If ``weights_only`` is False, the file cannot be read, or its hyperparameters or
            weights do not fit the class; the message names the file.
        """
        path = Path(path)
        if not weights_only:
            raise ValueError(f"{path}: a checkpoint is read with weights_only=True; nothing in it is unpickled")
        try:
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as error:  # missing, truncated, not a torch file, an unsafe pickle, ...
            raise ValueError(f"cannot read checkpoint {path}: {type(error).__name__}: {error}") from error
        hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
        if not isinstance(hparams, dict) or "state_dict" not in checkpoint:
            raise ValueError(f"{path} is not a checkpoint of a {cls.__name__}: no hyper_parameters or state_dict")
        state = {key.removeprefix(ADAPTER_PREFIX): value for key, value in checkpoint["state_dict"].items()}
        try:
            module = cls(**_init_arguments(cls, hparams))
            module.load_state_dict(state)
        except (TypeError, ValueError, RuntimeError) as error:
            raise ValueError(f"{path} does not hold a {cls.__name__}: {type(error).__name__}: {error}") from error
        return module


def _init_arguments(cls: type, hparams: dict) -> dict:
    """The entries of ``hparams`` that ``cls.__init__`` takes (derived ones, saved for readers, dropped)."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(hparams)
    return {name: value for name, value in hparams.items() if name in {p.name for p in parameters}}


def mlp(
    sizes: Sequence[int], negative_slope: float = 0.2, dropout: float = 0.0, batch_norm: bool = False
) -> nn.Sequential:
    """Linear layers of the given sizes with LeakyReLU between them (none at the end).

    Between two linear layers come, in order: batch normalisation (if ``batch_norm``), the
    LeakyReLU, and dropout (if ``dropout`` > 0), as CReL's image-to-text VAE uses them.

    Parameters
    ----------
    sizes : sequence of int
        ``[in, h1, ..., out]``; at least two entries.
    negative_slope : float
        LeakyReLU slope.
    dropout : float
        Dropout rate after each hidden activation.
    batch_norm : bool
        ``BatchNorm1d`` before each hidden activation (in eval mode it acts row-wise).
    """
    if len(sizes) < 2:
        raise ValueError(f"an MLP needs at least input and output sizes, got {list(sizes)}")
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i > 0:
            if batch_norm:
                layers.append(nn.BatchNorm1d(fan_in))
            layers.append(nn.LeakyReLU(negative_slope))
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)


def random_unit_vectors(
    shape: Sequence[int], generator: torch.Generator, device=None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Directions drawn uniformly on the unit sphere: normalised standard normal draws.

    Parameters
    ----------
    shape : sequence of int
        Leading shape, then the dimension ``r`` of the sphere's space (the last axis is normalised).
    generator : torch.Generator
        Private generator of the draws (the global RNG is untouched).
    device : torch.device, optional
        Where to draw (the generator's device).
    dtype : torch.dtype, default float64

    Returns
    -------
    Tensor of ``shape``
        Rows of unit L2 norm along the last axis.
    """
    draws = torch.randn(*shape, generator=generator, device=device, dtype=dtype)
    return nn.functional.normalize(draws, dim=-1, eps=1e-300)
