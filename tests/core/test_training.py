"""`condeval.core.training.fit`: a run stops loudly at a non-finite loss, a run folder is resumed only
by the same run (hyperparameters compared by their bytes, the frozen inputs a module names), and a run
split by its jobs' time limits ends with an uninterrupted run's weights."""

import logging
import shutil

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from condeval.core.settings import TrainSettings
from condeval.core.training import (
    ScheduledModule,
    TrainingPaused,
    cosine_schedule,
    fit,
    fit_to_files,
    job_deadline,
    state_digest,
)

ROWS = np.random.default_rng(0).normal(size=(40, 4)).astype(np.float32)
TARGETS = ROWS.sum(axis=1, keepdims=True)
OTHER_RUN = "belongs to another job"


class Regression(pl.LightningModule):
    """Linear regression; ``weights`` (a tensor hyperparameter) scales the loss, ``frozen`` names an input."""

    def __init__(self, weights: torch.Tensor | None = None, frozen: str | None = None, lr: float = 0.01):
        super().__init__()
        self.save_hyperparameters(ignore=["frozen"])
        self.net, self._frozen = torch.nn.Linear(4, 1), frozen

    def frozen_identity(self):
        return self._frozen

    def _loss(self, batch):
        x, y = batch
        scale = 1.0 if self.hparams.weights is None else self.hparams.weights.mean()
        return ((self.net(x) - y) ** 2).mean() * scale

    def training_step(self, batch, batch_idx):
        return self._loss(batch)

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Unnamed(Regression):
    """The same module without saved hyperparameters."""

    def __init__(self):
        pl.LightningModule.__init__(self)
        self.net, self._frozen = torch.nn.Linear(4, 1), None

    def _loss(self, batch):
        x, y = batch
        return ((self.net(x) - y) ** 2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _fit(module, out_dir, rows=ROWS, epochs=2, stop_at=None, **options):
    settings = TrainSettings(epochs=epochs, batch_size=8, patience=5, progress=False, stop_at=stop_at)
    return fit(module, (rows[8:], TARGETS[8:]), (rows[:8], TARGETS[:8]), out_dir, settings, seed=0, **options)


def _last_weights(run_dir):
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]


def test_a_run_paused_at_each_deadline_ends_with_the_uninterrupted_weights(tmp_path):
    """Work longer than a job's time limit: each call stops at an epoch's end before its deadline (here
    one already past, so one epoch a call), says so, and the next call resumes; the third call finishes
    with the weights of one uninterrupted run."""
    torch.manual_seed(0)
    _fit(Regression(), tmp_path / "whole", epochs=3)
    for paused_after in (1, 2):
        torch.manual_seed(0)
        with pytest.raises(TrainingPaused, match=f"paused after epoch {paused_after}/3"):
            _fit(Regression(), tmp_path / "split", epochs=3, stop_at=0.0)
    torch.manual_seed(0)
    _fit(Regression(), tmp_path / "split", epochs=3, stop_at=0.0)
    whole, split = _last_weights(tmp_path / "whole"), _last_weights(tmp_path / "split")
    assert whole.keys() == split.keys() and all(torch.equal(whole[k], split[k]) for k in whole)


def test_a_job_deadline_exists_only_for_work_split_over_jobs():
    assert job_deadline(600, parts=1) is None
    assert job_deadline(600, parts=3, reserve=0.1, started=1000.0) == 1000.0 + 600 * 60 * 0.9


@pytest.mark.parametrize("where", ["training", "validation"])
def test_a_nan_row_stops_the_run_loudly_instead_of_saving_nan_weights(tmp_path, where):
    rows = ROWS.copy()
    rows[20 if where == "training" else 3, 1] = np.nan
    with pytest.raises(FloatingPointError, match=rf"{tmp_path.name}.*the {where}.*loss is nan.*non-finite"):
        _fit(Regression(), tmp_path, rows)


def test_a_tensor_hyperparameter_changed_where_its_repr_elides_trains_afresh(tmp_path, caplog):
    weights, changed = torch.ones(2000), torch.ones(2000)
    changed[1000] = 3.0
    assert repr(weights) == repr(changed)  # what the identity read before
    _fit(Regression(weights), tmp_path)
    with caplog.at_level(logging.WARNING, logger="condeval.core.training"):
        _fit(Regression(changed), tmp_path)
    assert OTHER_RUN in caplog.text


def test_a_changed_frozen_input_trains_afresh_and_the_same_one_resumes(tmp_path, caplog):
    _fit(Regression(frozen="captions A"), tmp_path)
    with caplog.at_level(logging.WARNING, logger="condeval.core.training"):
        _fit(Regression(frozen="captions A"), tmp_path)
        assert OTHER_RUN not in caplog.text
        _fit(Regression(frozen="captions B"), tmp_path)
    assert OTHER_RUN in caplog.text


class Configured(Regression):
    """Regression with a diffusers-style config among its hyperparameters."""

    def __init__(self, config: dict):
        super().__init__()
        self.save_hyperparameters()


def test_a_config_whose_default_keys_come_in_another_order_resumes_its_run(tmp_path, caplog):
    """diffusers lists a config's defaulted keys in set order, which changes with the process's hash seed."""
    _fit(Configured({"layers": 2, "_use_default_values": ["width", "heads"]}), tmp_path)
    with caplog.at_level(logging.WARNING, logger="condeval.core.training"):
        _fit(Configured({"layers": 2, "_use_default_values": ["heads", "width"]}), tmp_path)
        assert OTHER_RUN not in caplog.text
        _fit(Configured({"layers": 3, "_use_default_values": ["heads", "width"]}), tmp_path)
    assert OTHER_RUN in caplog.text


def test_a_module_without_saved_hyperparameters_is_warned_about(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="condeval.core.training"):
        _fit(Unnamed(), tmp_path)
    assert "saved no hyperparameters" in caplog.text


def test_state_digest_reads_weights_and_values():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    assert state_digest(a, ["x"]) == state_digest(a, ["x"])
    assert len({state_digest(a, ["x"]), state_digest(b, ["x"]), state_digest(a, ["y"])}) == 3


def test_a_moved_run_folder_answers_with_its_own_checkpoint(tmp_path):
    """A run folder copied elsewhere (a DVC pull, another clone) and its original gone: the finished run
    resumes from its own files and names its own best checkpoint (it named the old folder's, and exporting
    it failed)."""
    _fit(Regression(), tmp_path / "a" / "run")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "a")
    best = _fit(Regression(), tmp_path / "b" / "run")
    assert best.parent == tmp_path / "b" / "run" / "checkpoints" and best.is_file(), best


def test_the_same_run_in_two_folders_exports_the_same_bytes(tmp_path):
    """The exported checkpoint holds no absolute path: the same config and seed give the same bytes in any
    clone (they differed by the run folder's path, and every reader reran after a pull), and it loads."""
    exported = []
    for clone in ("a", "b/deeper"):
        model = tmp_path / clone / "model.ckpt"
        fit_to_files(
            Regression(),
            (ROWS[8:], TARGETS[8:]),
            (ROWS[:8], TARGETS[:8]),
            model,
            tmp_path / clone / "s.json",
            settings=TrainSettings(epochs=2, batch_size=8, patience=5, progress=False),
            seed=0,
        )
        exported.append(model.read_bytes())
        assert str(tmp_path) not in str(torch.load(model, weights_only=True)["callbacks"])
    assert exported[0] == exported[1]
    assert isinstance(Regression.load_from_checkpoint(tmp_path / "a" / "model.ckpt", weights_only=True), Regression)


def test_fit_takes_its_settings_as_one_checked_object(tmp_path):
    with pytest.raises(TypeError, match="settings must be a TrainSettings; got dict"):
        fit(Regression(), (ROWS, TARGETS), (ROWS, TARGETS), tmp_path, {"epochs": 2}, seed=0)
    for bad, message in [({"workers": -1}, "workers must be an integer >= 0"), ({"devices": 0}, "devices must be")]:
        with pytest.raises(ValueError, match=message):
            TrainSettings(epochs=2, batch_size=8, patience=1, **bad)


class Scheduled(ScheduledModule):
    """A linear layer on the shared AdamW schedule; biases keep no decay, its recipe decays at 0.3."""

    decay_matrices_only = True
    default_weight_decay = 0.3

    def __init__(self, schedule: dict | None = None):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Linear(4, 1)


@pytest.mark.parametrize(("weight_decay", "decays"), [(None, 0.3), (0.05, 0.05)])
def test_a_schedule_sets_the_optimiser_and_its_module_decays_by_default(weight_decay, decays):
    schedule = cosine_schedule(2e-3, total_steps=10, warmup_steps=4, weight_decay=weight_decay)
    module = Scheduled(schedule)
    optimisers = module.configure_optimizers()
    groups = optimisers["optimizer"].param_groups
    assert [(g["weight_decay"], len(g["params"])) for g in groups] == [(decays, 1), (0.0, 1)]
    scheduler = optimisers["lr_scheduler"]["scheduler"]
    rates = []
    for _ in range(10):
        rates.append(groups[0]["lr"])
        optimisers["optimizer"].step()
        scheduler.step()
    assert rates[0] == 0.0 and rates[4] == pytest.approx(2e-3) and rates[-1] < rates[5] < 2e-3
    assert dict(module.hparams.schedule) == schedule  # plain values: a weights_only checkpoint keeps them


def test_a_schedule_missing_a_key_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"Scheduled's schedule lacks \['total_steps'\]"):
        Scheduled({"lr": 1e-3, "warmup_steps": 1}).configure_optimizers()
    with pytest.raises(ValueError, match="lr must be a finite number >= 0; got nan"):
        cosine_schedule(float("nan"), total_steps=10, warmup_steps=1)


def test_a_learning_rate_is_refused_for_a_module_that_sets_its_own_before_any_training(tmp_path):
    settings = TrainSettings(epochs=1, batch_size=8, patience=1, progress=False, lr=0.1)
    with pytest.raises(ValueError, match="TrainSettings.lr=0.1 is for a CheckpointedModule; a Regression configures"):
        fit(Regression(), (ROWS, TARGETS), (ROWS, TARGETS), tmp_path, settings, seed=0)
    assert not list(tmp_path.iterdir())
