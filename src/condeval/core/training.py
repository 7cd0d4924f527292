"""Resumable, seeded Lightning training shared by the VAE and the DQR.

Layout of ``out_dir`` after :func:`fit`::

    out_dir/
      checkpoints/last.ckpt          latest state, used to resume a killed run
      checkpoints/best-epNNN.ckpt    lowest val_loss (NNN: 1-based epoch count)
      checkpoints/epoch=NNN.ckpt     state after NNN completed epochs (save_epochs)
      csv/version_*/metrics.csv      one CSVLogger version per fit() call
      fit_summary.json               wall time, peak memory, epoch times

Epoch numbers in file names and summaries count *completed* epochs (1-based);
the ``epoch`` column of the CSV logs is Lightning's 0-based index.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pickle
import resource
import shutil
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import polars
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, Dataset, TensorDataset

from condeval.core.devices import accelerator_for_gpus, device_for_gpus, select_accelerator  # noqa: F401 (re-exported)
from condeval.core.io import atomic_path, read_json, write_json
from condeval.core.nn import ADAPTER_PREFIX, CheckpointedModule
from condeval.core.resources import PART_RESERVE
from condeval.core.settings import TrainRecipe, TrainSettings, check_integer, check_number

__all__ = [
    "TrainSettings",
    "TrainRecipe",
    "hold_out",
    "fit",
    "fit_to_files",
    "export_best",
    "training_summary",
    "model_record",
    "state_digest",
    "RUN_KEYS",
    "select_accelerator",
    "accelerator_for_gpus",
    "device_for_gpus",
    "UnsafeCheckpointError",
    "ScheduledModule",
    "cosine_schedule",
    "DEFAULT_SCHEDULE",
    "LightningAdapter",
    "as_lightning",
    "SUMMARY_NAME",
    "TrainingPaused",
    "job_deadline",
]

log = logging.getLogger(__name__)

SUMMARY_NAME = "fit_summary.json"
CHECKPOINT_DIR = "checkpoints"
LAST_NAME = "last.ckpt"
FINGERPRINT_NAME = "fingerprint.txt"


# ---------------------------------------------------------------- callbacks
class EpochSnapshots(Callback):
    """Save ``epoch=NNN.ckpt`` after each of the given (1-based) epoch counts."""

    def __init__(self, dirpath: Path, epochs: Iterable[int]) -> None:
        self.dirpath = Path(dirpath)
        self.epochs = {int(e) for e in epochs}

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        completed = trainer.current_epoch + 1
        if completed in self.epochs and not trainer.sanity_checking:
            trainer.save_checkpoint(self.dirpath / f"epoch={completed:03d}.ckpt")


class EpochTimer(Callback):
    """Record the wall time of every training epoch (validation included) and log one progress line
    per epoch (epoch, losses, seconds): under Snakemake the progress bar is off, and a training job
    would otherwise say nothing in its log for minutes."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.durations.append(time.perf_counter() - self._start)
        losses = " ".join(
            f"{name} {float(value):.4g}"
            for name, value in sorted(trainer.callback_metrics.items())
            if name.endswith("loss")
        )
        log.info("epoch %d/%d: %s (%.1f s)", trainer.current_epoch + 1, trainer.max_epochs, losses, self.durations[-1])


class TrainingPaused(RuntimeError):
    """:func:`fit` stopped at an epoch's end to finish before its job's time limit; calling it again with
    the same run folder resumes from ``last.ckpt``."""


class Deadline(Callback):
    """Stop at the end of an epoch when one more epoch, as long as the longest so far, would end after
    ``stop_at`` (a :func:`time.time` value). At least one epoch runs, so every call makes progress."""

    def __init__(self, stop_at: float) -> None:
        self.stop_at = stop_at
        self.longest_s = 0.0
        self.paused_after: int | None = None
        self._start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.time()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        now = time.time()
        self.longest_s = max(self.longest_s, now - self._start)
        completed = trainer.current_epoch + 1
        if completed < trainer.max_epochs and now + self.longest_s > self.stop_at:
            trainer.should_stop = True
            self.paused_after = completed


def job_deadline(
    runtime_min: float, parts: int, *, reserve: float = PART_RESERVE, started: float | None = None
) -> float | None:
    """When a job whose work is split over ``parts`` jobs of ``runtime_min`` minutes each must stop training.

    Parameters
    ----------
    runtime_min : float
        The job's time limit (its Snakemake ``runtime`` resource).
    parts : int
        Jobs the work is split into (the ``parts`` resource, :func:`condeval.core.resources.need`); with
        one there is no deadline: the job was sized to finish.
    reserve : float
        Share of the limit kept for loading before training and saving after it.
    started : float, optional
        The job's start (:func:`time.time`), default now.

    Returns
    -------
    float or None
        A :func:`time.time` value for :func:`fit`'s ``stop_at``, or None.
    """
    if int(parts) <= 1:
        return None
    return (time.time() if started is None else started) + 60.0 * float(runtime_min) * (1.0 - reserve)


class FiniteLosses(Callback):
    """Stop a run loudly at a non-finite training or validation loss (NaN in the rows, a diverging step)
    instead of letting early stopping end it quietly and the caller save non-finite weights."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    def _check(self, loss, trainer: pl.Trainer, where: str) -> None:
        if loss is not None and not bool(torch.isfinite(torch.as_tensor(loss)).all()):
            raise FloatingPointError(
                f"{self.out_dir}: the {where} loss is {float(torch.as_tensor(loss).float().mean())} in epoch "
                f"{trainer.current_epoch + 1} (non-finite rows, or a step that diverged): stopping rather than "
                "keeping non-finite weights"
            )

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx) -> None:
        self._check(
            outputs.get("loss") if isinstance(outputs, dict) else outputs, trainer, f"training (batch {batch_idx})"
        )

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check(trainer.callback_metrics.get("val_loss"), trainer, "validation")


class RngState(Callback):
    """Carry the global torch RNG and the shuffling generator through checkpoints.

    With it, a run resumed from ``last.ckpt`` draws the same shuffles, VAE
    noise and DQR direction subsets as an uninterrupted run would.
    """

    def __init__(self, shuffle_generator: torch.Generator) -> None:
        self.shuffle_generator = shuffle_generator

    def state_dict(self) -> dict:
        state = {"torch": torch.get_rng_state(), "shuffle": self.shuffle_generator.get_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        torch.set_rng_state(state_dict["torch"])
        self.shuffle_generator.set_state(state_dict["shuffle"])
        if "cuda" in state_dict and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])


# the paths a ModelCheckpoint's state holds, each a file in its dirpath
_CHECKPOINT_PATH_KEYS = ("best_model_path", "kth_best_model_path", "last_model_path")


def _rebased_checkpoint_state(state: dict, dirpath: str | os.PathLike) -> dict:
    """A ModelCheckpoint state whose paths name the same files in ``dirpath`` (relative when ``dirpath`` is)."""

    def move(path):
        return str(Path(dirpath) / Path(path).name) if path else path

    state = dict(state)
    for key in _CHECKPOINT_PATH_KEYS:
        if key in state:
            state[key] = move(state[key])
    if isinstance(state.get("best_k_models"), dict):
        state["best_k_models"] = {move(path): score for path, score in state["best_k_models"].items()}
    return state | {"dirpath": str(dirpath)}


class _PortableCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that resumes a run folder that moved (a DVC pull, a copy): its saved state names
    files of the old folder, which Lightning would read as another run's, keeping only the old best
    path and forgetting the best score, so the first resumed epoch would count as best."""

    def load_state_dict(self, state_dict: dict) -> None:
        saved = state_dict.get("dirpath")
        if saved and self.dirpath and saved != self.dirpath:
            state_dict = _rebased_checkpoint_state(state_dict, self.dirpath)
        super().load_state_dict(state_dict)


class _BestCheckpoint(_PortableCheckpoint):
    """ModelCheckpoint whose ``{epoch}`` in file names counts completed epochs (1-based)."""

    def format_checkpoint_name(self, metrics, filename=None, ver=None, **kwargs):
        metrics = dict(metrics)
        if "epoch" in metrics:
            metrics["epoch"] = int(metrics["epoch"]) + 1
        return super().format_checkpoint_name(metrics, filename=filename, ver=ver, **kwargs)


def _last_checkpoint(dirpath: Path) -> ModelCheckpoint:
    """A second, stock ModelCheckpoint that rewrites ``last.ckpt`` at the end of every epoch.

    Lightning 2.6's ``save_last=True`` rewrites ``last.ckpt`` only when a top-k checkpoint was
    saved in the same step, i.e. when val_loss improved: a killed run would resume from its
    last improvement instead of its last epoch. Without a monitor, ModelCheckpoint keeps the
    latest epoch; Lightning writes it through a file-system transaction (temporary file, then
    move), after validation and after EarlyStopping has counted the epoch.
    """
    return _PortableCheckpoint(
        dirpath=dirpath,
        filename=LAST_NAME.removesuffix(".ckpt"),
        monitor=None,
        save_top_k=1,
        save_on_train_epoch_end=True,
        enable_version_counter=False,
    )


# ------------------------------------------------------------------ helpers
def _as_batch_tensor(array: np.ndarray) -> torch.Tensor:
    array = np.asarray(array)
    dtype = torch.int64 if np.issubdtype(array.dtype, np.integer) or array.dtype == bool else torch.float32
    return torch.as_tensor(array, dtype=dtype)


def _loader(rows, batch_size: int, generator: torch.Generator | None = None, workers: int = 0) -> DataLoader:
    """A loader of rows: arrays (a TensorDataset; floats as float32, integers such as token ids as int64) or a
    dataset read from disk (:class:`condeval.core.rows.RowShards`, with ``workers`` reading processes);
    shuffled with ``generator`` if given."""
    shuffle = generator is not None
    if isinstance(rows, Dataset):
        return DataLoader(
            rows,
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=workers,
            generator=generator,
            persistent_workers=workers > 0,
        )
    tensors = [_as_batch_tensor(a) for a in rows]
    lengths = {t.shape[0] for t in tensors}
    if len(lengths) != 1:
        raise ValueError(f"arrays of one split must have the same number of rows, got {sorted(lengths)}")
    return DataLoader(
        TensorDataset(*tensors), batch_size=batch_size, shuffle=shuffle, num_workers=0, generator=generator
    )


def hold_out(arrays: Sequence[np.ndarray], n_val: int) -> tuple[tuple, tuple]:
    """(train, validation) row tuples of ``arrays``: the first ``n_val`` rows of each validate.

    Examples
    --------
    >>> train, val = hold_out((np.arange(5), np.arange(5) * 10), 2)
    >>> val[1].tolist(), train[0].tolist()
    ([0, 10], [2, 3, 4])
    """
    if not 0 < n_val < arrays[0].shape[0]:
        raise ValueError(f"cannot hold out {n_val} of {arrays[0].shape[0]} training rows for validation")
    return tuple(a[n_val:] for a in arrays), tuple(a[:n_val] for a in arrays)


def _as_rows(split) -> tuple:
    return (split,) if isinstance(split, Dataset) else tuple(split)


class UnsafeCheckpointError(RuntimeError):
    """A checkpoint holds objects that only an unrestricted unpickler would build."""


def _load_checkpoint(path: Path) -> dict | None:
    """The checkpoint dict, or None if it cannot be read completely.

    Loaded with ``weights_only=True``: a ``last.ckpt`` may arrive from a shared DVC remote, and an
    unrestricted unpickler would run whatever code it names. A file the restricted loader refuses
    is kept and reported (:class:`UnsafeCheckpointError`), never deleted as merely corrupt.
    """
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UnsafeCheckpointError(
            f"{path}: refusing to resume from this checkpoint: it is not loadable with "
            f"torch.load(weights_only=True) ({error}). Remove it if you trust nothing in it, "
            "or inspect it first; it was left in place."
        ) from error
    except Exception as error:  # truncated zip, missing records, ...
        log.warning("checkpoint %s is unreadable (%s: %s)", path, type(error).__name__, error)
        return None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint or "epoch" not in checkpoint:
        log.warning("checkpoint %s lacks 'state_dict' or 'epoch'", path)
        return None
    return checkpoint


def _clear_previous_run(out_dir: Path) -> None:
    """Remove checkpoints, logs and summary of an abandoned run before a fresh start."""
    stale = [out_dir / CHECKPOINT_DIR, out_dir / "csv", out_dir / SUMMARY_NAME]
    for path in stale:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _match_fingerprint(out_dir: Path, fingerprint: str) -> None:
    """Discard a run folder that belongs to a job with other inputs or hyperparameters."""
    stamp = out_dir / FINGERPRINT_NAME
    previous = stamp.read_text().strip() if stamp.exists() else None
    if previous != fingerprint:
        if previous is not None or (out_dir / CHECKPOINT_DIR).exists():
            log.warning(
                "%s belongs to another job (its rows, parameters or schedule changed): starting afresh", out_dir
            )
        _clear_previous_run(out_dir)
        with atomic_path(stamp, suffix=".txt") as tmp:
            tmp.write_text(fingerprint + "\n")


def state_digest(*parts) -> str:
    """SHA-256 of modules' weights (their ``state_dict``: names, dtypes, shapes and bytes) and of plain
    JSON-able values (captions, vocabularies), for a module's :meth:`frozen_identity`."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, torch.nn.Module):
            for name, tensor in part.state_dict().items():
                array = np.ascontiguousarray(tensor.detach().cpu().numpy())
                digest.update(f"{name}{array.dtype}{array.shape}".encode())
                digest.update(array)
        else:
            digest.update(json.dumps(part, sort_keys=True, default=_stable_repr).encode())
    return digest.hexdigest()


def _run_identity(module, rows: Sequence, settings: dict, fingerprint: str | None) -> str:
    """SHA-256 of what a run folder's checkpoints depend on: the module's class and hyperparameters, its
    :meth:`frozen_identity` where it defines one (inputs its batches are completed with: captions, a
    frozen encoder), the rows, the fit's settings and the caller's fingerprint. ``max_epochs`` is left
    out: a higher cap extends a run (a lower one is handled in :func:`fit`)."""
    hparams = _canonical(dict(getattr(module, "hparams", None) or {}))
    frozen = module.frozen_identity() if hasattr(module, "frozen_identity") else None
    if not hparams and fingerprint is None:
        log.warning(
            "%s saved no hyperparameters (save_hyperparameters()) and fit got no fingerprint: a run "
            "folder it left is resumed whatever its other settings were",
            type(module).__qualname__,
        )
    header = {
        "module": type(module).__qualname__,
        "hparams": hparams,
        "frozen": frozen,
        "settings": settings,
        "fingerprint": fingerprint,
    }
    digest = hashlib.sha256(json.dumps(header, sort_keys=True, default=_stable_repr).encode())
    for array in rows:
        if isinstance(array, Dataset):  # rows read from disk: the files' identity, not their bytes
            digest.update(array.identity.encode())
            continue
        array = np.ascontiguousarray(array.detach().cpu().numpy() if torch.is_tensor(array) else array)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array)  # the contiguous buffer itself, no copy
    return digest.hexdigest()


def _canonical(value):
    """``value`` with every diffusers ``_use_default_values`` list (a config's keys left at their defaults,
    listed in set order, which changes with the process's hash seed) sorted, so that a restarted job
    recognises its own run folder."""
    if not isinstance(value, Mapping):
        return value
    return {
        key: sorted(item) if key == "_use_default_values" and isinstance(item, (list, tuple)) else _canonical(item)
        for key, item in value.items()
    }


def _stable_repr(value) -> str:
    """A hyperparameter JSON cannot hold, as text that is the same in every process (no addresses); an
    array or tensor by the digest of its bytes (its repr elides the middle of a long one)."""
    if torch.is_tensor(value):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.dtype != object:
        array = np.ascontiguousarray(value)
        return f"{array.dtype}{array.shape}:{hashlib.sha256(array).hexdigest()}"
    text = repr(value)
    return type(value).__qualname__ if " at 0x" in text else text


def _resume_point(out_dir: Path) -> tuple[Path | None, dict | None]:
    """``(last.ckpt path, its contents)`` if it loads; otherwise clear and return ``(None, None)``."""
    last = out_dir / CHECKPOINT_DIR / LAST_NAME
    if last.exists():
        checkpoint = _load_checkpoint(last)
        if checkpoint is not None:
            return last, checkpoint
        log.warning("deleting corrupt %s and the rest of that run; starting %s from scratch", last, out_dir)
    elif any(p.exists() for p in (out_dir / CHECKPOINT_DIR, out_dir / "csv", out_dir / SUMMARY_NAME)):
        log.warning("no %s in %s: removing the previous run's files and starting from scratch", LAST_NAME, out_dir)
    _clear_previous_run(out_dir)
    return None, None


def _callback_state(checkpoint: dict, kind: type) -> dict:
    """State of the first callback of class ``kind`` stored in a checkpoint."""
    for key, state in checkpoint.get("callbacks", {}).items():
        if isinstance(key, str) and key.startswith(kind.__qualname__ + "{"):
            return state
    return {}


def _stopped_early(state: dict) -> bool:
    """Whether an EarlyStopping state says it fired (the stopped epoch may be 0)."""
    if "stopping_reason" in state:
        return int(state["stopping_reason"]) != 0
    return int(state.get("stopped_epoch", 0) or 0) > 0


def _already_stopped(checkpoint: dict) -> bool:
    """Whether early stopping had already fired when this checkpoint was written."""
    return _stopped_early(_callback_state(checkpoint, EarlyStopping))


def _peak_memory() -> dict:
    """Peak resident set size of this process and, on GPU, peak CUDA allocation (MiB)."""
    peak = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        peak["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return peak


def _write_summary(out_dir: Path, call: dict, best: str) -> None:
    """Append this fit() call to ``fit_summary.json`` (atomic write)."""
    path = out_dir / SUMMARY_NAME
    previous = read_json(path) if path.exists() else {}
    calls = list(previous.get("calls", [])) + [call]
    durations = [d for c in calls for d in c["epoch_times_s"]]
    summary = {
        "calls": calls,
        "best_checkpoint": best,
        "wall_time_s": sum(c["wall_time_s"] for c in calls),
        "peak_rss_mib": max(c["peak_rss_mib"] for c in calls),
        "mean_epoch_time_s": float(np.mean(durations)) if durations else None,
    }
    cuda = [c["peak_cuda_mib"] for c in calls if "peak_cuda_mib" in c]
    if cuda:
        summary["peak_cuda_mib"] = max(cuda)
    write_json(summary, path)


# ------------------------------------------------------------ modules
class LightningAdapter(pl.LightningModule):
    """Lightning's view of a :class:`~condeval.core.nn.CheckpointedModule`, for training it.

    The module's ``training_step`` and ``validation_step`` run as they are, its
    ``configure_optimizers(lr)`` gets ``lr`` (default its ``default_lr``), its
    :meth:`~condeval.core.nn.CheckpointedModule.log` calls reach this adapter's ``log``, and
    checkpoints store its current ``hparams``, so ``type(module).load_from_checkpoint`` rebuilds it
    with torch alone. The module is the attribute ``model``: its keys in a checkpoint's
    ``state_dict`` start with ``model.``.
    """

    def __init__(self, model: CheckpointedModule, lr: float | None = None) -> None:
        super().__init__()
        self.model = model
        self.lr = model.default_lr if lr is None else lr
        self.save_hyperparameters(dict(model.hparams) | {"lr": self.lr})  # for the CSV logger's hparams.yaml

    def setup(self, stage: str) -> None:
        self.model._log_to = self.log

    def teardown(self, stage: str) -> None:
        self.model._log_to = None

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def training_step(self, batch, batch_idx):
        return self.model.training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        return self.model.validation_step(batch, batch_idx)

    def configure_optimizers(self):
        return self.model.configure_optimizers(self.lr)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["hyper_parameters"] = dict(self.model.hparams)  # as set now (e.g. DDIM steps)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resume a run folder left by a version whose models were LightningModules (keys unprefixed)."""
        state = checkpoint["state_dict"]
        checkpoint["state_dict"] = {
            key if key.startswith(ADAPTER_PREFIX) else ADAPTER_PREFIX + key: value for key, value in state.items()
        }


def as_lightning(module: pl.LightningModule | CheckpointedModule, lr: float | None = None) -> pl.LightningModule:
    """``module`` itself if it is a LightningModule, else its :class:`LightningAdapter` training at ``lr``.

    Raises
    ------
    ValueError
        If ``lr`` is given for a LightningModule: it configures its own optimiser.
    """
    if not isinstance(module, pl.LightningModule):
        return LightningAdapter(module, lr)
    if lr is not None:
        raise ValueError(
            f"TrainSettings.lr={lr} is for a CheckpointedModule; a {type(module).__name__} configures its own "
            "optimiser (a ScheduledModule takes its learning rate in its schedule)"
        )
    return module


def cosine_schedule(
    lr: float, total_steps: int, warmup_steps: int, weight_decay: float | None = None
) -> dict[str, float | int]:
    """The optimiser schedule a :class:`ScheduledModule` takes, as the plain mapping its checkpoints keep.

    Plain values because checkpoints load with ``weights_only=True``, which refuses a settings object's class.

    Parameters
    ----------
    lr : float >= 0
        AdamW's peak learning rate.
    total_steps : int >= 1
        Optimiser steps of the whole run: the cosine decays to 0 at the last.
    warmup_steps : int >= 0
        Steps of linear warm-up from 0 to ``lr``.
    weight_decay : float >= 0, optional
        AdamW's decoupled weight decay; default the module's ``default_weight_decay``.

    Examples
    --------
    >>> cosine_schedule(1e-3, total_steps=100, warmup_steps=5)
    {'lr': 0.001, 'total_steps': 100, 'warmup_steps': 5}
    >>> cosine_schedule(1e-3, total_steps=0, warmup_steps=5)
    Traceback (most recent call last):
    ...
    ValueError: total_steps must be an integer >= 1; got 0
    """
    schedule = {
        "lr": check_number(lr, "lr"),
        "total_steps": check_integer(total_steps, "total_steps", least=1),
        "warmup_steps": check_integer(warmup_steps, "warmup_steps", least=0),
    }
    if weight_decay is not None:
        schedule["weight_decay"] = check_number(weight_decay, "weight_decay")
    return schedule


class ScheduledModule(pl.LightningModule):
    """Base of the transformers-model wrappers: AdamW with linear warm-up and cosine decay per step.

    A subclass implements ``_loss(batch, training: bool)`` and saves its ``schedule`` (a
    :func:`cosine_schedule`; ``None``: :data:`DEFAULT_SCHEDULE`) among its hyperparameters.
    ``default_weight_decay`` is its recipe's decay where the schedule names none. ``decay_matrices_only``
    keeps weight decay off biases and norms (CLIP's recipe); otherwise every trainable tensor decays.
    """

    decay_matrices_only = False
    default_weight_decay = 0.0

    def _loss(self, batch, training: bool) -> torch.Tensor:
        raise NotImplementedError

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch, training=True)
        self.log("train_loss", loss, prog_bar=True, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch, training=False), prog_bar=True)

    def lr_scale(self, name: str) -> float:
        """Factor on ``lr`` for the parameter called ``name`` (1 here; a subclass may slow a pre-trained part)."""
        return 1.0

    @property
    def schedule(self) -> dict[str, float | int]:
        """The saved schedule, checked, with the module's default weight decay where it names none."""
        saved = self.hparams.get("schedule") or DEFAULT_SCHEDULE
        missing = {"lr", "total_steps", "warmup_steps"} - set(saved)
        if missing:
            raise ValueError(f"{type(self).__name__}'s schedule lacks {sorted(missing)}: build it with cosine_schedule")
        return {"weight_decay": self.default_weight_decay} | dict(saved)

    def configure_optimizers(self):
        from transformers import get_cosine_schedule_with_warmup

        schedule = self.schedule
        groups: dict[tuple[float, float], list] = {}
        for name, parameter in self.named_parameters():
            if parameter.requires_grad:
                decays = parameter.ndim >= 2 or not self.decay_matrices_only
                key = (schedule["weight_decay"] if decays else 0.0, self.lr_scale(name))
                groups.setdefault(key, []).append(parameter)
        optimizer = torch.optim.AdamW(
            [
                {"params": params, "weight_decay": decay, "lr": schedule["lr"] * scale}
                for (decay, scale), params in sorted(groups.items(), key=lambda item: (-item[0][0], -item[0][1]))
            ],
            lr=schedule["lr"],
        )
        scheduler = get_cosine_schedule_with_warmup(optimizer, schedule["warmup_steps"], schedule["total_steps"])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


#: A :class:`ScheduledModule`'s schedule when it is given none (a module built to be loaded, not trained).
DEFAULT_SCHEDULE = cosine_schedule(1e-3, total_steps=1000, warmup_steps=50)


# ---------------------------------------------------------------------- fit
def fit(
    module: pl.LightningModule | CheckpointedModule,
    train: tuple[np.ndarray, ...] | Dataset,
    val: tuple[np.ndarray, ...] | Dataset,
    out_dir: str | os.PathLike,
    settings: TrainSettings,
    *,
    seed: int,
    save_epochs: Iterable[int] = (),
    fingerprint: str | None = None,
) -> Path:
    """Train ``module`` with early stopping, resuming from ``out_dir`` if possible.

    Parameters
    ----------
    module : LightningModule or CheckpointedModule
        Model; its batches are the tuples of rows of ``train`` / ``val``. A
        :class:`~condeval.core.nn.CheckpointedModule` trains through :class:`LightningAdapter`.
    train, val : tuple of ndarray, or Dataset
        Arrays with equal numbers of rows, e.g. ``(y,)``, ``(y, x)`` or ``(x, z)``; or rows too large for
        memory, read from disk (:class:`condeval.core.rows.RowShards`: a batch at a time, its ``identity``
        standing for its bytes).
    out_dir : path
        Run folder (see the module docstring for its layout).
    settings : TrainSettings
        Epoch cap (``epochs``), early-stopping patience on ``val_loss``, batch size, a
        :class:`~condeval.core.nn.CheckpointedModule`'s learning rate (``lr``), accelerator and
        devices (passed to the Trainer, see :func:`select_accelerator`), progress bar, DataLoader
        ``workers`` (processes reading a dataset's rows from disk; arrays need none) and ``stop_at``: a
        :func:`time.time` value (:func:`job_deadline`) the call must finish by; training stops at the end
        of the last epoch that fits and :class:`TrainingPaused` is raised, the next call resumes. This
        splits training longer than a partition's time limit over several jobs.
    seed : int
    save_epochs : iterable of int
        Completed-epoch counts after which ``epoch=NNN.ckpt`` is also kept.
    fingerprint : str, optional
        Identity of this training job beyond what ``fit`` sees (e.g. the files its rows
        came from). Either way a run folder is resumed only by the same module class and
        hyperparameters (arrays and tensors by their bytes), the same :meth:`frozen_identity`
        where the module defines one (the captions and frozen encoders it completes its batches
        with: :func:`state_digest`), the same rows, ``patience``, ``batch_size``, ``lr`` and ``seed``,
        and this fingerprint; one left by any other fit is discarded, so a change of data or
        parameters always trains afresh. A module without saved hyperparameters is warned
        about: settings outside them cannot be seen. A higher ``epochs`` continues a run
        whose hyperparameters do not depend on it; the package's ``train_*`` functions size
        their learning-rate schedule by the epochs (``total_steps``), so there a new epoch
        count trains afresh. A lower one than the run has passed trains afresh.

    Returns
    -------
    Path
        The best (lowest ``val_loss``) checkpoint.

    Raises
    ------
    FloatingPointError
        A training or validation loss that is not finite (NaN in the rows, a diverging step),
        naming ``out_dir`` and the epoch.
    TrainingPaused
        ``stop_at`` came before ``max_epochs``; ``last.ckpt`` holds the last epoch.

    Notes
    -----
    If ``checkpoints/last.ckpt`` loads, training continues from it (model,
    optimiser, loop and callback states); a run that early stopping had
    already ended is not trained further. If it is unreadable (e.g. truncated
    by a kill), a warning is logged, the previous run's files are removed and
    training starts afresh. The global torch RNG and the shuffling generator
    are stored in checkpoints, so on CPU a resumed run ends with the same
    weights as an uninterrupted one. The module's *initial* weights come from
    the global RNG when it is constructed: call ``pl.seed_everything(seed)``
    before building it if they must be reproducible too.
    """
    if not isinstance(settings, TrainSettings):
        raise TypeError(f"settings must be a TrainSettings; got {type(settings).__name__}")
    trained = as_lightning(module, settings.lr)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    identity = _run_identity(module, _as_rows(train) + _as_rows(val), _identity_settings(settings, seed), fingerprint)
    _match_fingerprint(out_dir, identity)
    ckpt_path, checkpoint = _resume_point(out_dir)
    if checkpoint is not None and int(checkpoint["epoch"]) + 1 > settings.epochs:
        log.info("%s ran %d epochs, past epochs=%d: starting afresh", out_dir, checkpoint["epoch"] + 1, settings.epochs)
        _clear_previous_run(out_dir)
        ckpt_path, checkpoint = None, None
    if checkpoint is not None and _already_stopped(checkpoint):
        best = _callback_state(checkpoint, _BestCheckpoint).get("best_model_path")
        best = best and out_dir / CHECKPOINT_DIR / Path(best).name  # the run folder may have moved since
        if best and best.exists():
            log.info("%s: early stopping already ended this run; not training further", out_dir)
            return Path(best)
    pl.seed_everything(seed, workers=True, verbose=False)
    return _train(trained, train, val, out_dir, settings, seed, save_epochs, (ckpt_path, checkpoint))


def _identity_settings(settings: TrainSettings, seed: int) -> dict:
    """The settings a run folder is resumed under (the epoch cap may grow: a longer run continues)."""
    return {"patience": settings.patience, "batch_size": settings.batch_size, "lr": settings.lr, "seed": seed}


def _trainer(out_dir: Path, settings: TrainSettings, callbacks: list) -> pl.Trainer:
    """A deterministic Trainer logging each step to ``out_dir/csv``."""
    return pl.Trainer(
        max_epochs=settings.epochs,
        accelerator=settings.accelerator,
        devices=settings.devices,
        deterministic=True,
        callbacks=callbacks,
        logger=CSVLogger(out_dir, name="csv"),
        enable_progress_bar=settings.progress,
        enable_model_summary=False,
        log_every_n_steps=1,
    )


def _train(
    module: pl.LightningModule, train, val, out_dir: Path, settings: TrainSettings, seed: int, save_epochs, resume
) -> Path:
    """One Trainer.fit call of :func:`fit` (``module``: :func:`as_lightning`'s), from ``resume`` = (checkpoint
    path, its contents) or afresh."""
    ckpt_path, checkpoint = resume
    ckpt_dir = out_dir / CHECKPOINT_DIR
    best_callback = _BestCheckpoint(
        dirpath=ckpt_dir,
        filename="best-ep{epoch:03d}",
        auto_insert_metric_name=False,
        monitor="val_loss",
        save_last=False,
        save_top_k=1,
    )
    timer = EpochTimer()
    deadline = Deadline(settings.stop_at) if settings.stop_at is not None else None
    shuffle_generator = torch.Generator().manual_seed(int(seed))
    callbacks = [
        FiniteLosses(out_dir),
        RngState(shuffle_generator),
        EarlyStopping(monitor="val_loss", patience=settings.patience, check_on_train_epoch_end=False),
        EpochSnapshots(ckpt_dir, save_epochs),
        timer,
        *([deadline] if deadline else []),
        best_callback,
        _last_checkpoint(ckpt_dir),
    ]
    trainer = _trainer(out_dir, settings, callbacks)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=r".*exists and is not empty.*")
        trainer.fit(
            module,
            train_dataloaders=_loader(train, settings.batch_size, shuffle_generator, settings.workers),
            val_dataloaders=_loader(val, settings.batch_size, workers=settings.workers),
            ckpt_path=ckpt_path,
            weights_only=True,
        )
    best = best_callback.best_model_path or str(ckpt_dir / LAST_NAME)
    call = {
        "wall_time_s": time.perf_counter() - started,
        "resumed_from_epoch": None if checkpoint is None else int(checkpoint["epoch"]) + 1,
        "epochs_completed": int(trainer.current_epoch),
        "epoch_times_s": timer.durations,
        "stopped_early": _stopped_early(trainer.early_stopping_callback.state_dict()),
        "accelerator": settings.accelerator,
        **_peak_memory(),
    }
    paused_after = deadline and deadline.paused_after
    if paused_after:
        call["paused_after_epoch"] = paused_after
    _write_summary(out_dir, call, best)
    if paused_after:
        raise TrainingPaused(
            f"{out_dir}: paused after epoch {paused_after}/{settings.epochs}, another epoch "
            f"({deadline.longest_s:.0f} s) would pass the job's time limit; the next call resumes from {LAST_NAME}"
        )
    return Path(best)


# ------------------------------------------------------------------ outputs
def fit_to_files(
    module: pl.LightningModule | CheckpointedModule,
    train: tuple[np.ndarray, ...],
    val: tuple[np.ndarray, ...],
    model_path: str | os.PathLike,
    summary_path: str | os.PathLike,
    *,
    snapshot_paths: Sequence[str | os.PathLike] = (),
    **fit_kwargs,
) -> Path:
    """:func:`fit` in the run folder ``<model stem>_run`` beside ``model_path``, then export.

    The best checkpoint is copied to ``model_path``, the ``save_epochs`` snapshots (in
    order) to ``snapshot_paths`` and :func:`training_summary` to ``summary_path``, each
    atomically. Keyword arguments go to :func:`fit`. Returns the run's best checkpoint.
    """
    model_path = Path(model_path)
    run_dir = model_path.with_name(model_path.stem + "_run")
    best = fit(module, train, val, run_dir, **fit_kwargs)
    for epoch, dest in zip(fit_kwargs.get("save_epochs", ()), snapshot_paths, strict=True):
        export_best(run_dir / CHECKPOINT_DIR / f"epoch={int(epoch):03d}.ckpt", dest)
    export_best(best, model_path)
    write_json(training_summary(run_dir), summary_path)
    return best


def export_best(best_ckpt: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write ``best_ckpt`` to ``dest`` atomically (temp file in dest's folder, then rename), its callbacks'
    paths made relative to the run folder: they named the folder absolutely, so the same run in two
    clones exported different bytes and everything reading the file reran after a pull."""
    checkpoint = torch.load(best_ckpt, map_location="cpu", weights_only=True)
    callbacks = checkpoint.get("callbacks", {})
    for key, state in callbacks.items():
        if isinstance(state, dict) and "dirpath" in state:
            callbacks[key] = _rebased_checkpoint_state(state, CHECKPOINT_DIR)
    with atomic_path(dest, suffix=".ckpt") as tmp, open(tmp, "wb") as handle:
        torch.save(checkpoint, handle)  # a file object: the archive's inner name is fixed, not tmp's
    return Path(dest)


def _read_epoch_rows(out_dir: Path) -> dict[int, dict[str, float]]:
    """Epoch-level metrics merged over every CSV log version (later calls win)."""
    files = sorted(
        (out_dir / "csv").glob("version_*/metrics.csv"),
        key=lambda p: int(p.parent.name.split("_")[-1]),
    )
    rows: dict[int, dict[str, float]] = {}
    for path in files:
        for record in polars.read_csv(path, infer_schema_length=None).iter_rows(named=True):
            values = {k: float(v) for k, v in record.items() if v is not None and k != "epoch"}
            rows.setdefault(int(record["epoch"]), {}).update(values)
    return rows


#: Keys of a training summary that describe the run, not the model: time, memory, the absolute path of the
#: best checkpoint and how many calls a resumed run took.
RUN_KEYS = frozenset(
    {"wall_time_s", "mean_epoch_time_s", "peak_rss_mib", "peak_cuda_mib", "best_checkpoint", "n_calls"}
)


def model_record(summary: dict) -> dict:
    """``summary`` (:func:`training_summary`, or a dict holding such summaries) without :data:`RUN_KEYS`, at
    any depth: what a saved model folder's ``training.json`` holds, so the same config and seed give the same
    folder, byte for byte, on any run and in any clone. The whole summary stays in the run folder's
    ``fit_summary.json`` and the job's log."""
    return {k: model_record(v) if isinstance(v, dict) else v for k, v in summary.items() if k not in RUN_KEYS}


def training_summary(out_dir: str | os.PathLike) -> dict:
    """Epochs run, best epoch and val_loss, wall time and peak memory of a run.

    Epochs are 1-based counts of completed epochs. Wall time and peak memory
    come from ``fit_summary.json`` (summed / maxed over resumed calls); peak RSS
    is the process-wide maximum, so it includes whatever ran before ``fit``.
    ``val_loss_by_epoch`` maps each completed epoch (as a string) to its val_loss.
    """
    out_dir = Path(out_dir)
    rows = _read_epoch_rows(out_dir)
    val = {e: r["val_loss"] for e, r in rows.items() if "val_loss" in r and math.isfinite(r["val_loss"])}
    best_epoch = min(val, key=val.get) if val else None
    summary = read_json(out_dir / SUMMARY_NAME) if (out_dir / SUMMARY_NAME).exists() else {}
    calls = summary.get("calls", [])
    return {
        "epochs_run": max(rows) + 1 if rows else 0,
        "best_epoch": None if best_epoch is None else best_epoch + 1,
        "best_val_loss": None if best_epoch is None else val[best_epoch],
        "wall_time_s": summary.get("wall_time_s"),
        "mean_epoch_time_s": summary.get("mean_epoch_time_s"),
        "peak_rss_mib": summary.get("peak_rss_mib"),
        "peak_cuda_mib": summary.get("peak_cuda_mib"),
        "stopped_early": bool(calls and calls[-1].get("stopped_early")),
        "best_checkpoint": summary.get("best_checkpoint"),
        "n_calls": len(calls),
        "val_loss_by_epoch": {str(e + 1): v for e, v in sorted(val.items())},
    }
