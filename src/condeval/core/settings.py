"""Settings objects shared by the tracks' estimators: what repeated keyword arguments used to carry.

Kept apart from :mod:`condeval.core.training` so that building them imports neither torch nor Lightning.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrainSettings"]


@dataclass(frozen=True)
class TrainSettings:
    """How one model trains under :func:`fit`: its epochs, batch size, early-stopping patience and
    accelerator, checked on construction.

    Parameters
    ----------
    epochs : int >= 1
    batch_size : int >= 1
    patience : int >= 1
        Epochs without a better validation loss before training stops.
    accelerator : str, default "cpu"
        Lightning's accelerator (``"gpu"`` on a GPU node).
    progress : bool, default True
        Show the progress bar.
    """

    epochs: int
    batch_size: int
    patience: int
    accelerator: str = "cpu"
    progress: bool = True

    def __post_init__(self):
        from condeval.core.io import check_integer

        for name in ("epochs", "batch_size", "patience"):
            check_integer(getattr(self, name), name, least=1)
