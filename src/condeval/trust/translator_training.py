"""The translator's Lightning module, apart from :mod:`condeval.trust.translator` so that scoring
during generation never imports Lightning (3.4 s a job)."""

from __future__ import annotations

import torch

from condeval.core.training import ScheduledModule
from condeval.trust.translator import StandardisedTranslator, translator_loss

__all__ = ["TranslatorModule"]


class TranslatorModule(ScheduledModule):
    """Lightning wrapper of :class:`~condeval.trust.translator.StandardisedTranslator`: batches
    ``(internal, target)``, the weighted loss of :func:`~condeval.trust.translator.translator_loss`."""

    def __init__(self, in_dim: int, out_dim: int, hidden: int, weights: dict, lr: float, weight_decay: float,
                 warmup_steps: int, total_steps: int, mean: list, scale: list):  # fmt: skip
        super().__init__()
        self.save_hyperparameters()
        self.model = StandardisedTranslator(in_dim, out_dim, hidden, mean, scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        internal, target = batch
        terms = translator_loss(self(internal), target, dict(self.hparams.weights))
        prefix = "" if training else "val_"
        for name in ("mse", "var", "cov"):
            self.log(f"{prefix}{name}", terms[name], on_step=False, on_epoch=True)
        return terms["loss"]
