"""Settings objects shared by the tracks' estimators (what repeated keyword arguments used to carry), and
the integer check they and the readers use.

Kept apart from :mod:`condeval.core.training` so that building them imports neither torch nor Lightning.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TrainSettings", "TrainRecipe", "SearchSettings", "check_integer", "check_number"]


@dataclass(frozen=True)
class TrainSettings:
    """How one model trains under :func:`condeval.core.training.fit`: its epochs, batch size,
    early-stopping patience, where it runs and when it pauses, checked on construction.

    Parameters
    ----------
    epochs : int >= 1
        The epoch cap.
    batch_size : int >= 1
    patience : int >= 1
        Epochs without a better validation loss before training stops.
    accelerator : str, default "cpu"
        Lightning's accelerator (``"gpu"`` on a GPU node).
    progress : bool, default True
        Show the progress bar.
    devices : int >= 1, default 1
        Devices of the accelerator.
    workers : int >= 0, default 0
        DataLoader worker processes (0: the training process reads the batches).
    stop_at : float, optional
        A wall-clock deadline (``time.time()``): training pauses after the last epoch that fits before
        it, and the next call resumes (a job shorter than its partition's time limit).
    lr : float >= 0, optional
        The learning rate of a model that takes it from its training, a
        :class:`~condeval.core.nn.CheckpointedModule` (CReL's models); default its ``default_lr``. A
        LightningModule sets its own optimiser (a ``ScheduledModule`` its schedule) and refuses one.

    Examples
    --------
    >>> TrainSettings(epochs=30, batch_size=128, patience=5).accelerator
    'cpu'
    >>> TrainSettings(epochs=0, batch_size=128, patience=5)
    Traceback (most recent call last):
    ...
    ValueError: epochs must be an integer >= 1; got 0
    """

    epochs: int
    batch_size: int
    patience: int
    accelerator: str = "cpu"
    progress: bool = True
    devices: int = 1
    workers: int = 0
    stop_at: float | None = None
    lr: float | None = None

    def __post_init__(self):
        for name in ("epochs", "batch_size", "patience", "devices"):
            check_integer(getattr(self, name), name, least=1)
        check_integer(self.workers, "workers", least=0)
        if self.lr is not None:
            check_number(self.lr, "lr")


@dataclass(frozen=True)
class TrainRecipe:
    """What every trainer of condeval's models shares (the encoders, the autoencoders, the captioners and
    the generators): its epochs, batch size, learning rate, held-out items, seed and where it runs, checked
    on construction. A trainer's own options (its model, its loss terms) stay its own arguments.

    Parameters
    ----------
    epochs : int >= 1, optional
        The epoch cap; a trainer that counts optimizer steps instead (the attribute generator's
        ``steps``) takes ``None``.
    batch_size : int >= 1
    lr : float > 0
        The peak learning rate.
    held_out : int >= 1
        Training items (images, or cell instances) held out for early stopping and the best epoch. They
        come from the *train* split: the evaluation split is never seen.
    seed : int >= 0
        Seeds the model's initialisation, the shuffling and any sampling of the training rows.
    patience : int >= 1, optional
        Epochs without a lower validation loss before training stops; default ``max(2, epochs)``, which
        runs every epoch (the best is saved either way, and the learning-rate schedule does not depend on it).
    accelerator : str, default "cpu"
        Lightning's accelerator (``"gpu"`` on a GPU node: :func:`condeval.core.training.accelerator_for_gpus`).
    workers : int >= 0, default 0
        DataLoader worker processes.
    stop_at : float, optional
        A wall-clock deadline (``time.time()``): training pauses after the last epoch that fits before it,
        and the next call resumes.
    fingerprint : str, optional
        What the training rows are (their files and settings, :func:`condeval.core.io.fingerprint`): a
        run folder left by other inputs is not resumed.

    Examples
    --------
    >>> recipe = TrainRecipe(epochs=8, batch_size=32, lr=3e-4, held_out=16, seed=0)
    >>> recipe.settings().patience
    8
    >>> TrainRecipe.from_config({"epochs": 8, "batch_size": 32, "lr": 3e-4, "val_images": 16}, seed=1).held_out
    16
    >>> TrainRecipe(epochs=8, batch_size=32, lr=0.0, held_out=16, seed=0)
    Traceback (most recent call last):
    ...
    ValueError: lr must be a finite number > 0; got 0.0
    """

    epochs: int | None
    batch_size: int
    lr: float
    held_out: int
    seed: int
    patience: int | None = None
    accelerator: str = "cpu"
    workers: int = 0
    stop_at: float | None = None
    fingerprint: str | None = None

    def __post_init__(self):
        if self.epochs is not None:
            check_integer(self.epochs, "epochs", least=1)
        for name in ("batch_size", "held_out"):
            check_integer(getattr(self, name), name, least=1)
        check_integer(self.seed, "seed", least=0)
        check_integer(self.workers, "workers", least=0)
        if self.patience is not None:
            check_integer(self.patience, "patience", least=1)
        check_number(self.lr, "lr", positive=True)

    @classmethod
    def from_config(cls, section: Mapping, *, seed: int, held_out_key: str = "val_images", **where) -> TrainRecipe:
        """The recipe a config's training section gives (its ``epochs``, ``batch_size``, ``lr``, optional
        ``patience`` and the held-out count under ``held_out_key``), with ``seed`` and ``where``
        (``accelerator``, ``workers``, ``stop_at``, ``fingerprint``) from the job."""
        return cls(
            epochs=section.get("epochs"),
            batch_size=section["batch_size"],
            lr=section["lr"],
            held_out=section[held_out_key],
            seed=seed,
            patience=section.get("patience"),
            **where,
        )

    def replace(self, **changes) -> TrainRecipe:
        """This recipe with ``changes`` (a stage of a two-stage trainer: its own epochs or learning rate)."""
        return dataclasses.replace(self, **changes)

    def settings(self, epochs: int | None = None) -> TrainSettings:
        """The :class:`TrainSettings` of :func:`condeval.core.training.fit` (``epochs`` when the trainer
        derived them, e.g. from a step count)."""
        epochs = self.epochs if epochs is None else epochs
        if epochs is None:
            raise ValueError("this recipe gives no epochs: pass the epochs the trainer derived")
        return TrainSettings(
            epochs,
            self.batch_size,
            self.patience or max(2, epochs),
            accelerator=self.accelerator,
            workers=self.workers,
            stop_at=self.stop_at,
        )


@dataclass(frozen=True)
class SearchSettings:
    """How CReL's projected gradient descent searches a calibrated region for its worst point (Eq. 8),
    checked on construction: :func:`condeval.crel.reliability.reliability_score` and every caller.

    Parameters
    ----------
    num_z0 : int >= 1, default 50
        Random starting points per row.
    steps : int >= 0, default 100
        Projected gradient steps from the worst start.
    lr : float > 0, default 0.05
        Fixed step size of ``z ← Π_{S^γ}(z − lr ∇_z similarity)``.
    seed : int, default 0
        Seed of the ``torch.Generator`` drawing the starts (same seed → same result).
    batch_size : int >= 1, default 1024
        Rows searched together.
    init_scale : float, default 1.0
        Cap on how far a start may go from the anchor along an unbounded ray.
    refine_top : int >= 1, default 1
        Run PGD from this many of the worst starts per row and keep the best (1 is the paper's procedure;
        more guard against a start in the basin of a merely local minimum, at proportional cost).
    tol : float, default 1e-9
        Feasibility tolerance of the projections.
    patience : int >= 1, default 10
        Window, in PGD steps, over which convergence is judged: a row has converged when its best
        similarity fell by at most ``min_improvement`` over the last ``patience`` steps.
    min_improvement : float >= 0, default 1e-4
        Improvement of the best similarity below which a row counts as converged.
    early_stop : bool, default False
        Stop a batch once every row has converged (False runs all ``steps``, the paper's rule).
    progress : bool or None, default None
        Report progress over batches (a bar on a terminal, a line per 30 s in a job's log); None as True.

    Examples
    --------
    >>> SearchSettings(num_z0=8, steps=20).lr
    0.05
    >>> SearchSettings(num_z0=0)
    Traceback (most recent call last):
    ...
    ValueError: num_z0 must be an integer >= 1; got 0
    """

    num_z0: int = 50
    steps: int = 100
    lr: float = 0.05
    seed: int = 0
    batch_size: int = 1024
    init_scale: float = 1.0
    refine_top: int = 1
    tol: float = 1e-9
    patience: int = 10
    min_improvement: float = 1e-4
    early_stop: bool = False
    progress: bool | None = None

    def __post_init__(self):
        import numbers

        for name in ("num_z0", "batch_size", "refine_top", "patience"):
            check_integer(getattr(self, name), name, least=1)
        check_integer(self.steps, "steps", least=0)
        check_integer(self.seed, "seed", least=0)
        if isinstance(self.lr, bool) or not isinstance(self.lr, numbers.Real) or not self.lr > 0:
            raise ValueError(f"lr must be positive (a descent step on ρ); got {self.lr!r}")
        if not self.min_improvement >= 0:
            raise ValueError(f"min_improvement must be >= 0; got {self.min_improvement!r}")


def check_integer(value, name: str, least: int = 0) -> int:
    """``value`` as an int, refused naming ``name`` unless it is an integer ``>= least`` (TypeError for a
    float, a str or a bool, rather than truncating: an id of 1.5 must not become id 1; ValueError below
    ``least``)."""
    try:
        integer = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        integer = None
    if integer is None:
        raise TypeError(f"{name} must be an integer >= {least}; got {type(value).__name__} {value!r}")
    if integer < least:
        raise ValueError(f"{name} must be an integer >= {least}; got {integer}")
    return integer


def check_number(value, name: str, *, positive: bool = False) -> float:
    """``value`` as a float if it is a finite number >= 0 (> 0 with ``positive``), else a ValueError naming
    ``name``; a bool or a numeric string is refused, not converted.

    Examples
    --------
    >>> check_number(0, "lr")
    0.0
    >>> check_number(0, "lr", positive=True)
    Traceback (most recent call last):
    ...
    ValueError: lr must be a finite number > 0; got 0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        raise ValueError(f"{name} must be a finite number {'>' if positive else '>='} 0; got {value!r}")
    return float(value)
