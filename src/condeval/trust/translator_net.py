"""The translator's network and losses, plain torch: what both :mod:`condeval.trust.translator` (fitting,
scoring during generation) and :mod:`condeval.trust.translator_training` (its Lightning module) need,
below both of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "LOSS_WEIGHTS",
    "LOSSES",
    "NOISE_PATHS",
    "WHITENED",
    "StandardisedTranslator",
    "TranslatorLoss",
    "TranslatorNet",
    "geometry_of",
    "pair_moments",
    "target_geometry",
    "translator_loss",
    "whitened_translator_loss",
]


#: The paper's loss weights (Section 5.2).
LOSS_WEIGHTS = {"mse": 0.1, "var": 1.0, "cov": 0.04}
#: The official code's loss ("whit_geom"): weights of the whitened MSE and of the mean + covariance
#: terms, and the whitening's tempering γ and condition number κ.
WHITENED = {"whit": 1.0, "geom": 0.1, "gamma": 0.75, "kappa": 1000.0}
LOSSES = ("paper", "whitened")
NOISE_PATHS = ("generator", "official")


@dataclass(frozen=True)
class TranslatorLoss:
    """The loss a :class:`~condeval.trust.Translator` trains with, and its settings.

    Parameters
    ----------
    kind : {"paper", "whitened"}, default "paper"
        The paper's loss (:func:`translator_loss`, weighted by ``weights``) or the official code's
        (:func:`whitened_translator_loss`, with ``whitened``, against the training targets' geometry).
    weights : dict, optional
        ``mse``, ``var``, ``cov`` of the paper's loss; default :data:`LOSS_WEIGHTS` (0.1, 1.0, 0.04).
    whitened : dict, optional
        ``whit``, ``geom``, ``gamma``, ``kappa`` of the official code's loss; a key left out takes
        :data:`WHITENED`'s value.

    Examples
    --------
    >>> TranslatorLoss("whitened", whitened={"gamma": 0.5}).whitened["kappa"]
    1000.0
    >>> TranslatorLoss("tempered")
    Traceback (most recent call last):
    ...
    ValueError: loss must be one of ('paper', 'whitened'); got 'tempered'
    """

    kind: str = "paper"
    weights: dict | None = None
    whitened: dict | None = None

    def __post_init__(self):
        if self.kind not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}; got {self.kind!r}")
        object.__setattr__(self, "weights", dict(LOSS_WEIGHTS if self.weights is None else self.weights))
        object.__setattr__(self, "whitened", WHITENED | dict(self.whitened or {}))

    @classmethod
    def of(cls, loss: TranslatorLoss | str) -> TranslatorLoss:
        """``loss`` itself, or the loss of that kind with its default settings."""
        return loss if isinstance(loss, cls) else cls(loss)


class TranslatorNet(torch.nn.Module):
    """``skip(x) + MLP(x)``: a linear skip and three linear layers with SiLU between them."""

    def __init__(self, in_dim: int, out_dim: int, hidden: int = 2048):
        super().__init__()
        self.skip = torch.nn.Linear(in_dim, out_dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(in_dim, hidden),
            torch.nn.SiLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.SiLU(),
            torch.nn.Linear(hidden, out_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.skip(x) + self.mlp(x)


def translator_loss(predicted: torch.Tensor, target: torch.Tensor, weights: dict | None = None) -> dict:
    """The weighted loss and its three terms (module description) on one batch, (B, D) each."""
    weights = LOSS_WEIGHTS if weights is None else weights
    dim = target.shape[1]
    mse = torch.mean((predicted - target) ** 2)
    var = torch.sum((predicted.std(dim=0) - target.std(dim=0)) ** 2) / dim
    off_diagonal = ~torch.eye(dim, dtype=torch.bool, device=target.device)
    difference = torch.cov(predicted.T) - torch.cov(target.T)
    cov = torch.sum(difference[off_diagonal] ** 2) / dim
    total = weights["mse"] * mse + weights["var"] * var + weights["cov"] * cov
    return {"loss": total, "mse": mse, "var": var, "cov": cov}


def target_geometry(target: torch.Tensor, gamma: float = WHITENED["gamma"], kappa: float = WHITENED["kappa"]) -> dict:
    """What :func:`whitened_translator_loss` compares against, from the L2-normalised training targets
    (N, D): their ``mean``, covariance ``cov`` (ddof 1) and the tempered whitening
    ``whitening = V (Λ + λ_max/κ)^(−γ/2) Vᵀ`` of that covariance (eigenvalues clipped at 0)."""
    unit = torch.nn.functional.normalize(target.double(), dim=1)
    return geometry_of(unit.mean(dim=0), torch.cov(unit.T), gamma, kappa)


def geometry_of(
    mean: torch.Tensor, cov: torch.Tensor, gamma: float = WHITENED["gamma"], kappa: float = WHITENED["kappa"]
) -> dict:
    """:func:`target_geometry` from the unit targets' mean and covariance (however they were accumulated)."""
    eigenvalues, eigenvectors = torch.linalg.eigh(cov.double())
    eigenvalues = eigenvalues.clamp_min(0.0)
    scale = (eigenvalues + eigenvalues.max() / kappa) ** (-gamma / 2)
    whitening = (eigenvectors * scale) @ eigenvectors.T
    return {"mean": mean.float(), "cov": cov.float(), "whitening": whitening.float()}


def pair_moments(rows, batch_size: int = 4096) -> dict:
    """Streaming statistics of translator pairs ``(internal, target)``, a batch at a time: the inputs'
    mean and standard deviation (ddof 0) and the L2-normalised targets' mean and covariance (ddof 1)."""
    loader = torch.utils.data.DataLoader(rows, batch_size=batch_size)
    n, sums, squares, unit_sum, outer = 0, 0.0, 0.0, 0.0, 0.0
    for internal, target, *_ in loader:
        internal = internal.double()
        unit = torch.nn.functional.normalize(target.double(), dim=1)
        n += len(internal)
        sums, squares = sums + internal.sum(dim=0), squares + (internal**2).sum(dim=0)
        unit_sum, outer = unit_sum + unit.sum(dim=0), outer + unit.T @ unit
    mean, unit_mean = sums / n, unit_sum / n
    std = (squares / n - mean**2).clamp_min(0.0).sqrt()
    cov = (outer - n * torch.outer(unit_mean, unit_mean)) / max(n - 1, 1)
    return {"mean": mean, "std": std, "target_mean": unit_mean, "target_cov": cov}


def whitened_translator_loss(
    predicted: torch.Tensor, target: torch.Tensor, geometry: dict, weights: dict | None = None, eps: float = 1e-6
) -> dict:
    """The official code's translator loss on one batch, its terms alongside.

    On L2-normalised predictions ``p`` and targets ``y``: ``whit · mean_i ‖(p_i − y_i) W‖²`` plus
    ``geom · (‖p̄ − μ‖² / ‖μ‖² + ‖Cov(p) − C‖²_F / ‖C‖²_F)``, with ``μ``, ``C`` and ``W`` the training
    targets' :func:`target_geometry` (fixed, not the batch's).
    """
    weights = WHITENED if weights is None else weights
    geometry = {name: value.to(predicted) for name, value in geometry.items()}
    p = torch.nn.functional.normalize(predicted, dim=1)
    y = torch.nn.functional.normalize(target, dim=1)
    whit = (((p - y) @ geometry["whitening"]) ** 2).sum(dim=1).mean()
    mean_gap = p.mean(dim=0) - geometry["mean"]
    mean = (mean_gap**2).sum() / ((geometry["mean"] ** 2).sum() + eps)
    cov = ((torch.cov(p.T) - geometry["cov"]) ** 2).sum() / ((geometry["cov"] ** 2).sum() + eps)
    return {"loss": weights["whit"] * whit + weights["geom"] * (mean + cov), "whit": whit, "mean": mean, "cov": cov}


class StandardisedTranslator(torch.nn.Module):
    """:class:`TranslatorNet` on inputs standardised by fixed statistics (the training split's): what
    :class:`Translator` applies and saves, plain torch."""

    def __init__(self, in_dim: int, out_dim: int, hidden: int, mean: list, scale: list):
        super().__init__()
        self.net = TranslatorNet(in_dim, out_dim, hidden)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.scale)
