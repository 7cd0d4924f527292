"""The translator's Lightning module, apart from :mod:`condeval.trust.translator` so that scoring
during generation never imports Lightning (3.4 s a job)."""

from __future__ import annotations

import torch

from condeval.core.training import ScheduledModule
from condeval.trust.translator_net import StandardisedTranslator, translator_loss, whitened_translator_loss

__all__ = ["TranslatorModule"]


class TranslatorModule(ScheduledModule):
    """Lightning wrapper of :class:`~condeval.trust.translator.StandardisedTranslator`: batches
    ``(internal, target)``, the paper's weighted loss (:func:`~condeval.trust.translator.translator_loss`)
    or, with ``loss="whitened"``, the official code's
    (:func:`~condeval.trust.translator.whitened_translator_loss`, against the training targets'
    geometry, set by :meth:`set_geometry` and kept in the checkpoint as buffers).

    Parameters
    ----------
    net : dict
        :class:`~condeval.trust.translator_net.StandardisedTranslator`'s arguments (``in_dim``, ``out_dim``,
        ``hidden``, ``mean``, ``scale``), plain values a checkpoint keeps.
    weights : dict
        The paper's loss weights (:func:`~condeval.trust.translator_net.translator_loss`).
    schedule : dict, optional
        The optimiser schedule (:func:`~condeval.core.training.cosine_schedule`).
    loss : {"paper", "whitened"}
    whitened : dict, optional
        The whitened loss's settings, with ``loss="whitened"``.
    """

    def __init__(
        self,
        net: dict,
        weights: dict,
        schedule: dict | None = None,
        loss: str = "paper",
        whitened: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model = StandardisedTranslator(**net)
        if loss == "whitened":
            out_dim = net["out_dim"]
            self.register_buffer("geometry_mean", torch.zeros(out_dim))
            self.register_buffer("geometry_cov", torch.zeros(out_dim, out_dim))
            self.register_buffer("geometry_whitening", torch.zeros(out_dim, out_dim))

    def set_geometry(self, geometry: dict) -> None:
        """The training targets' :func:`~condeval.trust.translator.target_geometry`."""
        for name in ("mean", "cov", "whitening"):
            getattr(self, f"geometry_{name}").copy_(geometry[name])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(self, batch, batch_idx):
        # the losses read batch statistics (std, covariance: ddof 1), NaN on one row: a trailing one-row batch
        # (rows ≡ 1 mod batch size) is skipped, no optimiser step
        return super().training_step(batch, batch_idx) if len(batch[0]) > 1 else None

    def validation_step(self, batch, batch_idx):
        # likewise the validation split's trailing one-row batch, left out of val_loss
        if len(batch[0]) > 1:
            super().validation_step(batch, batch_idx)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        internal, target, *_ = batch  # pairs read from disk carry their image too
        if self.hparams.loss == "whitened":
            geometry = {name: getattr(self, f"geometry_{name}") for name in ("mean", "cov", "whitening")}
            terms = whitened_translator_loss(self(internal), target, geometry, dict(self.hparams.whitened))
        else:
            terms = translator_loss(self(internal), target, dict(self.hparams.weights))
        if not torch.isfinite(terms["loss"]):
            values = ", ".join(f"{name} {float(value.detach()):.4g}" for name, value in terms.items())
            raise FloatingPointError(
                f"the translator's {'training' if training else 'validation'} loss is not finite ({values}) on a "
                f"batch of {len(internal)} rows, epoch {self.current_epoch + 1}: stopping rather than keeping "
                "non-finite weights or choosing a checkpoint on a NaN val_loss"
            )
        prefix = "" if training else "val_"
        for name, value in terms.items():
            if name != "loss":
                self.log(f"{prefix}{name}", value, on_step=False, on_epoch=True)
        return terms["loss"]
