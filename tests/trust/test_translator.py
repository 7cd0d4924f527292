"""Scoring during generation: the translator learns a map and keeps the trust score's ranking, its loss
terms each see what they are for, and the generation callbacks read the denoiser without changing it."""

import json

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from condeval.trust import TrustScorer
from condeval.trust.translator import (
    FeatureReadout,
    TrajectoryTap,
    Translator,
    TranslatorLoss,
    TrustAbstention,
    compute_saved,
    internal_features,
    noised_latents,
    target_geometry,
    translator_loss,
    whitened_translator_loss,
)


def _pairs(n: int, seed: int):
    """Attributes, extractor-like targets with per-value means, and internal features: an invertible
    non-linear function of the targets plus noise (as a denoiser's tokens hold the image's content)."""
    rng = np.random.default_rng(seed)
    attributes = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 3, n)])
    means_a, means_b = rng.normal(0, 1.5, (2, 6)), rng.normal(0, 1.5, (3, 6))
    target = means_a[attributes[:, 0]] + means_b[attributes[:, 1]] + rng.normal(size=(n, 6))
    mixed = target @ np.random.default_rng(99).normal(size=(6, 10))
    internal = mixed + np.tanh(mixed / 3) + rng.normal(0, 0.05, (n, 10))
    return attributes, target, internal


def test_the_translator_reduces_its_loss_and_keeps_the_trust_ranking(tmp_path):
    attributes, target, internal = _pairs(3000, seed=0)
    translator = Translator(hidden=64, epochs=40, batch_size=256, lr=1e-2, seed=0).fit(internal[:2000], target[:2000])
    before = translator_loss(torch.zeros(1000, 6, dtype=torch.float64), torch.as_tensor(target[2000:]))["loss"]
    predicted = translator.transform(internal[2000:])
    after = translator_loss(torch.as_tensor(predicted), torch.as_tensor(target[2000:]))["loss"]
    assert after < 0.1 * before
    scorer = TrustScorer(names=["a", "b"]).fit(target[:2000], attributes[:2000])
    true = scorer.score(target[2000:], attributes[2000:])["trust"].to_numpy()
    translated = scorer.score(predicted, attributes[2000:])["trust"].to_numpy()
    assert spearmanr(true, translated).statistic > 0.95
    loaded = Translator.load(translator.save(tmp_path / "translator"))
    np.testing.assert_allclose(loaded.transform(internal[2000:]), predicted, rtol=1e-6)
    with pytest.raises(ValueError, match="10-wide"):
        translator.transform(internal[:, :5])
    config = tmp_path / "translator" / "config.json"
    saved = json.loads(config.read_text())
    config.write_text(json.dumps({k: v for k, v in saved.items() if k not in ("net", "schedule")} | saved["net"]))
    with pytest.raises(ValueError, match=r"config.json: a translator saved with flat keys .* train it again"):
        Translator.load(tmp_path / "translator")


def test_the_translation_check_ranks_true_features_first_and_shuffled_ones_at_chance():
    """``translation_agreement``: the true features themselves agree perfectly, slightly noised ones almost,
    another image's features (rows shuffled) not at all; one block per noise level, in order."""
    from condeval.trust.evaluate import Translations, translation_agreement

    attributes, target, _ = _pairs(3000, seed=2)
    support = np.arange(3000) < 2000
    held = target[~support]
    noisy = held + np.random.default_rng(0).normal(0, 0.1, held.shape)
    shuffled = held[np.random.default_rng(1).permutation(len(held))]
    rows = translation_agreement(
        target, attributes, support, Translations(np.stack([held, noisy, shuffled]), [0.0, 0.5, 1.0]), ["a", "b"]
    )
    assert [row["t"] for row in rows] == [0.0, 0.5, 1.0]
    assert rows[0]["spearman"] == pytest.approx(1.0) and rows[1]["spearman"] > 0.9
    assert abs(rows[2]["spearman"]) < 0.1
    with pytest.raises(ValueError, match="one block per t"):
        translation_agreement(target, attributes, support, Translations(np.stack([held, noisy]), [0.0]), ["a", "b"])
    # a seeded sample of the rows outside the support (the workflow's held-out check) is scored as those rows
    sample = np.sort(np.random.default_rng(2).choice(np.flatnonzero(~support), 300, replace=False))
    checked = translation_agreement(
        target, attributes, support, Translations(target[sample][None], [0.0], rows=sample), ["a", "b"]
    )
    assert checked[0]["spearman"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="row 0 lies in the support"):
        translation_agreement(
            target, attributes, support, Translations(target[:3][None], [0.0], rows=np.arange(3)), ["a", "b"]
        )


def test_a_refit_with_other_settings_in_the_same_run_folder_trains_afresh(tmp_path):
    """What a config edit does to `trust_train_translator`: the run folder of the old settings is no resume
    point, so fewer epochs train afresh (Lightning refused the old checkpoint) and match a fresh folder."""
    _, target, internal = _pairs(400, seed=1)
    settings = dict(hidden=16, batch_size=128, seed=0)
    Translator(epochs=4, **settings).fit(internal, target, run_dir=tmp_path / "run")
    again = Translator(epochs=2, **settings).fit(internal, target, run_dir=tmp_path / "run")
    fresh = Translator(epochs=2, **settings).fit(internal, target, run_dir=tmp_path / "fresh")
    np.testing.assert_array_equal(again.transform(internal), fresh.transform(internal))


def test_the_loss_sees_spread_and_covariance_as_well_as_points():
    rng = np.random.default_rng(1)
    target = torch.as_tensor(rng.multivariate_normal([0, 0, 0], [[1, 0.8, 0], [0.8, 1, 0], [0, 0, 1]], 4000))
    shrunk = translator_loss(target * 0.5, target)
    assert shrunk["var"] > 0.2 and shrunk["cov"] > 0.05  # a translator that shrinks features is penalised
    decorrelated = target[torch.randperm(4000)]
    decorrelated[:, 0] = target[:, 0]  # same marginals, the 0-1 correlation broken
    assert translator_loss(decorrelated, target)["cov"] > 0.1  # 2 × 0.8² / 3 for the broken pair
    assert translator_loss(target, target)["loss"] < 1e-12


def _whitened_reference(predicted, target, gamma=0.75, kappa=1000.0, whit=1.0, geom=0.1, eps=1e-6):
    """The official code's loss written out in numpy, the whitening from an SVD of the centred targets."""
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    p, y = unit(predicted), unit(target)
    centred = y - y.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    eigenvalues = singular**2 / (len(y) - 1)
    w = vt.T @ np.diag((eigenvalues + eigenvalues.max() / kappa) ** (-gamma / 2)) @ vt
    whitened = np.mean(np.sum(((p - y) @ w) ** 2, axis=1))
    cov_t, cov_p = np.cov(y, rowvar=False), np.cov(p, rowvar=False)
    mean = np.sum((p.mean(axis=0) - y.mean(axis=0)) ** 2) / (np.sum(y.mean(axis=0) ** 2) + eps)
    cov = np.sum((cov_p - cov_t) ** 2) / (np.sum(cov_t**2) + eps)
    return whit * whitened + geom * (mean + cov)


def test_the_official_whitened_loss_matches_an_independent_computation():
    _, target, _ = _pairs(600, seed=2)
    predicted = target[:200] + np.random.default_rng(3).normal(0, 0.5, (200, 6))
    geometry = target_geometry(torch.as_tensor(target))
    # the batch's predictions against the targets of the same rows, the geometry from all 600
    got = whitened_translator_loss(
        torch.as_tensor(predicted, dtype=torch.float32), torch.as_tensor(target[:200], dtype=torch.float32), geometry
    )
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    p, y, pool = unit(predicted), unit(target[:200]), unit(target)
    cov_t = np.cov(pool, rowvar=False)
    eigenvalues, vectors = np.linalg.eigh(cov_t)
    w = vectors @ np.diag((eigenvalues.clip(0) + eigenvalues.max() / 1000) ** -0.375) @ vectors.T
    want = {
        "whit": np.mean(np.sum(((p - y) @ w) ** 2, axis=1)),
        "mean": np.sum((p.mean(0) - pool.mean(0)) ** 2) / (np.sum(pool.mean(0) ** 2) + 1e-6),
        "cov": np.sum((np.cov(p, rowvar=False) - cov_t) ** 2) / (np.sum(cov_t**2) + 1e-6),
    }
    for name, value in want.items():
        assert float(got[name]) == pytest.approx(value, rel=1e-4), name
    assert float(got["loss"]) == pytest.approx(want["whit"] + 0.1 * (want["mean"] + want["cov"]), rel=1e-4)
    # with the batch as the pool, the SVD-built reference agrees too
    whole = whitened_translator_loss(
        torch.as_tensor(predicted), torch.as_tensor(target[:200]), target_geometry(torch.as_tensor(target[:200]))
    )
    assert float(whole["loss"]) == pytest.approx(_whitened_reference(predicted, target[:200]), rel=1e-4)


def test_the_translator_trained_on_the_official_loss_keeps_the_trust_ranking(tmp_path):
    attributes, target, internal = _pairs(3000, seed=0)
    translator = Translator(hidden=64, epochs=40, batch_size=256, lr=1e-2, seed=0, loss="whitened")
    translator.fit(internal[:2000], target[:2000], run_dir=tmp_path / "run")
    predicted = translator.transform(internal[2000:])
    geometry = target_geometry(torch.as_tensor(target[:2000]))
    start = whitened_translator_loss(torch.as_tensor(internal[2000:, :6]), torch.as_tensor(target[2000:]), geometry)
    end = whitened_translator_loss(torch.as_tensor(predicted), torch.as_tensor(target[2000:]), geometry)
    assert float(end["loss"]) < 0.1 * float(start["loss"])
    scorer = TrustScorer(names=["a", "b"]).fit(target[:2000], attributes[:2000])
    true = scorer.score(target[2000:], attributes[2000:])["trust"].to_numpy()
    translated = scorer.score(predicted, attributes[2000:])["trust"].to_numpy()
    assert spearmanr(true, translated).statistic > 0.9
    loaded = Translator.load(translator.save(tmp_path / "translator"))
    assert loaded.loss == translator.loss == TranslatorLoss("whitened")
    np.testing.assert_allclose(loaded.transform(internal[2000:]), predicted, rtol=1e-6)
    with pytest.raises(ValueError, match="loss must be one of"):
        Translator(loss="tempered")


def test_noising_follows_the_generators_path_or_the_official_codes():
    latents, noise = torch.ones(2, 4, 2, 2), torch.zeros(2, 4, 2, 2)
    half = torch.full((2,), 0.5)
    assert torch.allclose(noised_latents(latents, torch.zeros(2), noise), latents)
    assert torch.allclose(noised_latents(latents, half, noise), 0.5 * latents)
    assert torch.allclose(noised_latents(latents, half, noise, path="official"), np.sqrt(0.5) * latents)
    with pytest.raises(ValueError, match="path"):
        noised_latents(latents, half, noise, path="ddpm")


def test_the_tap_reads_the_block_without_changing_the_samples(attribute_pipeline):
    pipe = attribute_pipeline()
    attributes = np.array([[0, 1], [1, 2]])

    def sample(callback=None):
        generators = [torch.Generator().manual_seed(k) for k in range(2)]
        return pipe(
            attributes, num_inference_steps=3, generator=generators, output_type="latent", callback_on_step_end=callback
        ).images

    tap = TrajectoryTap(pipe.transformer, layer=1, steps=[0, 2])
    tapped = sample(tap)
    tap.close()
    assert torch.equal(tapped, sample())
    assert tap.features(0).shape == tap.features(2).shape == (2, pipe.transformer.inner_dim)
    with pytest.raises(KeyError, match="step 1"):
        tap.features(1)
    clean = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    direct = internal_features(pipe, clean, attributes, 0.5, 1, generator=torch.Generator().manual_seed(1))
    assert direct.shape == (2, pipe.transformer.inner_dim) and np.isfinite(direct).all()
    with pytest.raises(ValueError, match="layer"):
        TrajectoryTap(pipe.transformer, layer=2, steps=[0])


def test_internal_features_stop_at_the_tapped_block_and_equal_a_full_pass(attribute_pipeline):
    pipe = attribute_pipeline(num_layers=3)
    attributes = np.array([[0, 1], [1, 2]])
    clean = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    noise = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    blocks_run = []
    hooks = [
        block.register_forward_hook(lambda module, *_: blocks_run.append(module))
        for block in pipe.transformer.transformer_blocks
    ]
    early = internal_features(pipe, clean, attributes, 0.5, 2, noise=noise)
    assert blocks_run == list(pipe.transformer.transformer_blocks[:2])
    for hook in hooks:
        hook.remove()

    kept = {}  # the reference: every block run, block 2's image tokens read by hand
    hook = pipe.transformer.transformer_blocks[1].register_forward_hook(
        lambda module, inputs, output: kept.update(tokens=output[1])
    )
    context, pooled = pipe.attribute_encoder(torch.as_tensor(attributes))
    times = torch.full((2,), 0.5)
    with torch.no_grad():
        pipe.transformer(
            hidden_states=noised_latents(clean, times, noise),
            encoder_hidden_states=context,
            timestep=times * pipe.scheduler.config.num_train_timesteps,
            pooled_projections=pooled,
        )
    hook.remove()
    np.testing.assert_allclose(early, kept["tokens"].mean(dim=1).numpy(), rtol=1e-6, atol=1e-6)


def test_the_aligned_tap_reads_a_repa_generators_projected_tokens(attribute_pipeline):
    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, REPAProjector

    pipe = attribute_pipeline()
    with pytest.raises(ValueError, match="repa_projector"):
        TrajectoryTap.aligned(pipe, [0])
    projector = REPAProjector(width=pipe.transformer.inner_dim, hidden=8, target_dim=5, depth=1)
    repa = AttributeDiffusionPipeline(pipe.transformer, pipe.vae, pipe.scheduler, pipe.attribute_encoder, projector)
    attributes = np.array([[0, 1], [1, 2]])
    aligned, raw = TrajectoryTap.aligned(repa, [1]), TrajectoryTap(pipe.transformer, 1, [1])
    tokens = []
    hook = pipe.transformer.transformer_blocks[0].register_forward_hook(lambda m, i, out: tokens.append(out[1]))
    repa(
        attributes,
        num_inference_steps=3,
        generator=torch.Generator().manual_seed(0),
        output_type="latent",
        callback_on_step_end=lambda *args: aligned(*args) | raw(*args),
    )
    hook.remove()
    aligned.close(), raw.close()
    with torch.no_grad():
        expected = projector(tokens[1]).mean(dim=1).numpy()  # the second step's call (0-based step 1)
    np.testing.assert_allclose(aligned.features(1), expected, rtol=1e-5, atol=1e-6)
    assert aligned.features(1).shape == (2, 5) and raw.features(1).shape == (2, pipe.transformer.inner_dim)


def test_the_abstention_callback_scores_mid_trajectory_and_interrupts_when_all_abstain(attribute_pipeline):
    pipe = attribute_pipeline()
    attributes = np.array([[0, 0], [1, 1], [0, 2], [1, 0]] * 4)
    tap = TrajectoryTap(pipe.transformer, layer=1, steps=[1])
    pipe(
        attributes,
        num_inference_steps=3,
        generator=torch.Generator().manual_seed(0),
        output_type="latent",
        callback_on_step_end=tap,
    )
    tap.close()
    internal = tap.features(1)
    translator = Translator(hidden=16, epochs=2, batch_size=8).fit(internal, internal[:, :4])
    scorer = TrustScorer(names=["a", "b"], calibration=0.0).fit(internal[:, :4], attributes)
    thresholds = scorer.thresholds(0.95)
    callback = TrustAbstention(TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes, translator=translator)
    pipe(
        attributes,
        num_inference_steps=3,
        generator=torch.Generator().manual_seed(0),
        output_type="latent",
        callback_on_step_end=callback,
    )
    callback.close()
    assert callback.abstained.shape == (16,) and callback.trust.shape == (16,)
    strict = thresholds.with_columns(threshold=thresholds["threshold"] * 0 - 1e9)
    callback = TrustAbstention(
        TrajectoryTap(pipe.transformer, 1, [0]), scorer, attributes, translator=translator, thresholds=strict
    )
    pipe(
        attributes,
        num_inference_steps=3,
        generator=torch.Generator().manual_seed(0),
        output_type="latent",
        callback_on_step_end=callback,
    )
    callback.close()
    assert callback.abstained.all() and pipe.interrupt
    saved = compute_saved(callback.abstained, step=0, num_inference_steps=3)
    assert saved["steps_saved_pct"] == pytest.approx(100 * 2 / 3) and saved["decoder_passes_saved"] == 16


def test_scoring_with_a_saved_translator_never_imports_lightning():
    """Scoring during generation loads and applies a translator in every job: Lightning's 3.4 s of
    imports belong to fitting only (condeval.trust.translator_training)."""
    import subprocess
    import sys

    code = "import sys, condeval.trust.translator; sys.exit('pytorch_lightning' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


class _SplitSeen(Exception):
    """Raised by a stand-in for condeval.core.training.fit once it has seen the splits."""


def _fit_recording(monkeypatch, stop: bool = False) -> list:
    """The (train, val) internal features each Translator.fit hands condeval.core.training.fit (as arrays; it
    hands datasets); with ``stop``, no training."""
    import condeval.core.training as training

    seen, real_fit = [], training.fit

    def recording(module, train, val, out_dir, settings, **kwargs):
        seen.append(
            tuple(np.stack([split[k][0] for k in range(len(split))]) for split in (train, val)) + (settings.batch_size,)
        )
        if stop:
            raise _SplitSeen
        return real_fit(module, train, val, out_dir, settings, **kwargs)

    monkeypatch.setattr(training, "fit", recording)
    return seen


@pytest.mark.parametrize("loss", ["paper", "whitened"])
def test_a_one_row_batch_at_the_end_of_either_split_leaves_the_fit_finite(tmp_path, monkeypatch, loss):
    """Both losses read batch statistics (std, covariance: ddof 1), NaN on one row. 98 rows, batch 32, a third
    held out: 65 training rows (two batches and one row) and 33 validation rows (a batch and one row); the
    fit's translations and its validation losses (checkpoint selection reads them) stay finite."""
    import polars

    _, target, internal = _pairs(98, seed=3)
    seen = _fit_recording(monkeypatch)
    translator = Translator(hidden=16, epochs=3, batch_size=32, val_share=1 / 3, seed=0, loss=loss)
    translator.fit(internal, target, run_dir=tmp_path / "run")
    ((train, val, batch_size),) = seen
    assert len(train) % batch_size == 1 and len(val) % batch_size == 1  # the case under test
    assert np.isfinite(translator.transform(internal)).all()
    logs = [polars.read_csv(path) for path in (tmp_path / "run").glob("csv/version_*/metrics.csv")]
    val_loss = polars.concat(logs, how="diagonal")["val_loss"].drop_nulls().to_numpy()
    assert len(val_loss) == 3 and np.isfinite(val_loss).all()
    with pytest.raises(ValueError, match="batch_size must be at least 2"):
        Translator(batch_size=1)  # every batch a single row


def test_a_loss_that_turns_nan_stops_the_fit_loudly(monkeypatch):
    """A non-finite loss (here forced after a few batches) raises, rather than training on and saving NaN
    weights or a translator chosen on NaN validation losses."""
    import condeval.trust.translator_training as translator_training

    _, target, internal = _pairs(300, seed=4)
    calls = []

    def poisoned(predicted, target, weights=None):
        terms = translator_loss(predicted, target, weights)
        calls.append(len(predicted))
        return terms | {"loss": terms["loss"] * float("nan")} if len(calls) > 4 else terms

    monkeypatch.setattr(translator_training, "translator_loss", poisoned)
    with pytest.raises(FloatingPointError, match="not finite"):
        Translator(hidden=16, epochs=3, batch_size=64, seed=0).fit(internal, target)


def test_the_validation_split_holds_out_whole_images(monkeypatch):
    """Pairs as translator_pairs and the training job build them: t-major (all images at the first t, then the
    next), each image's target repeated at every t. Every image's rows fall on one side, all of its t in
    validation when it is held out, about val_share of the images held out, the same split for the same seed;
    explicit ``groups`` (an image id per row) are honoured the same way."""
    n_images, t_values = 200, (0.2, 0.5, 0.8)
    _, target, clean = _pairs(n_images, seed=5)
    rng = np.random.default_rng(6)
    internal = np.concatenate([clean + rng.normal(0, 3 * t, clean.shape) for t in t_values]).astype(np.float32)
    targets = np.tile(target, (len(t_values), 1))
    image_of = {row.tobytes(): k % n_images for k, row in enumerate(internal)}

    def split(seed, groups=None):
        seen = _fit_recording(monkeypatch, stop=True)
        explicit = {} if groups is None else {"groups": groups}
        with pytest.raises(_SplitSeen):
            Translator(hidden=8, epochs=1, batch_size=64, seed=seed).fit(internal, targets, **explicit)
        ((train, val, _),) = seen
        return [np.array([image_of[row.tobytes()] for row in rows]) for rows in (train, val)]

    train, val = split(seed=0)
    assert len(train) + len(val) == len(internal)
    assert not set(train) & set(val)
    assert set(np.unique(val, return_counts=True)[1]) == {len(t_values)}  # every t of a held-out image
    assert len(np.unique(val)) == 10  # 5% of 200 images
    again, other = split(seed=0), split(seed=1)
    np.testing.assert_array_equal(again[1], val)
    assert set(other[1]) != set(val)
    pairs = np.tile(np.arange(n_images) // 2, len(t_values))  # two images per group
    train, val = split(seed=0, groups=pairs)
    assert not set(train // 2) & set(val // 2) and len(np.unique(val // 2)) == 5
    with pytest.raises(ValueError, match="one group per row"):
        Translator().fit(internal, targets, groups=pairs[:10])


def test_real_images_are_read_where_the_sampler_stands_at_each_step(attribute_pipeline):
    """step_noise_levels gives the noise level the sampler hands the denoiser at each step, and the real
    images' aligned features at a level are the projector's mean over the block's tokens there."""
    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, REPAProjector
    from condeval.trust.translator import step_noise_levels

    pipe = attribute_pipeline()
    seen = []
    hook = pipe.transformer.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(kwargs["timestep"][0]), with_kwargs=True
    )
    pipe(np.array([[0, 1]]), num_inference_steps=5, generator=torch.Generator().manual_seed(0), output_type="latent")
    hook.remove()
    levels = step_noise_levels(pipe.scheduler, 5, [0, 2, 4])
    total = pipe.scheduler.config.num_train_timesteps
    np.testing.assert_allclose(levels, [float(seen[s]) / total for s in (0, 2, 4)], rtol=1e-6)
    assert levels[0] == pytest.approx(1.0) and levels[0] > levels[1] > levels[2] > 0

    projector = REPAProjector(width=pipe.transformer.inner_dim, hidden=8, target_dim=5, depth=1)
    repa = AttributeDiffusionPipeline(pipe.transformer, pipe.vae, pipe.scheduler, pipe.attribute_encoder, projector)
    clean = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    noise = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    tokens = []
    hook = pipe.transformer.transformer_blocks[0].register_forward_hook(lambda m, i, out: tokens.append(out[1]))
    readout = FeatureReadout(1, project=projector)
    aligned = internal_features(repa, clean, np.array([[0, 1], [1, 2]]), levels[1], readout, noise=noise)
    hook.remove()
    with torch.no_grad():
        np.testing.assert_allclose(aligned, projector(tokens[0]).mean(dim=1).numpy(), rtol=1e-5, atol=1e-6)


def test_the_translator_trains_on_the_accelerator_it_is_given(monkeypatch):
    """A GPU job's translator trains on its GPU: its ``TrainSettings.accelerator`` reaches ``fit``."""
    import condeval.core.training

    asked = {}

    def trainer_fit(module, train, val, out_dir, settings, **kwargs):
        asked["accelerator"] = settings.accelerator
        raise _Stop

    monkeypatch.setattr(condeval.core.training, "fit", trainer_fit)
    _, target, internal = _pairs(64, seed=5)
    for accelerator in ("gpu", "cpu"):
        with pytest.raises(_Stop):
            Translator(hidden=8, epochs=1, batch_size=16).fit(internal, target, accelerator=accelerator)
        assert asked["accelerator"] == accelerator


class _Stop(Exception):
    pass


def _abstain_on_b0(width: int):
    """A scorer in ``width`` dims and P95 thresholds under which every sample asking for b = 0 abstains
    and every other is kept (the decision is the test's, not the scorer's)."""
    rng = np.random.default_rng(0)
    attributes = np.column_stack([rng.integers(0, 2, 400), rng.integers(0, 3, 400)])
    scorer = TrustScorer(names=["a", "b"], calibration=0.0).fit(rng.normal(size=(400, width)), attributes)
    thresholds = scorer.thresholds(0.95)
    return scorer, thresholds.with_columns(threshold=np.where(thresholds["b"].to_numpy() == 0, -1e9, 1e9))


def test_abstaining_samples_leave_the_batch_and_the_kept_ones_are_unchanged(attribute_pipeline):
    """With ``drop=True`` the pipeline denoises and decodes only the kept samples, and each kept image is
    the one the full batch draws for it (per-sample generators); nothing is dropped without it."""
    pipe = attribute_pipeline(num_layers=2)
    attributes = np.array([[0, 0], [1, 1], [0, 2], [1, 0], [0, 1], [1, 2]])
    scorer, thresholds = _abstain_on_b0(pipe.transformer.inner_dim)

    def draw(callback=None, inputs=("latents", "attributes")):
        generators = [torch.Generator().manual_seed(i) for i in range(len(attributes))]
        return pipe(
            attributes,
            num_inference_steps=4,
            generator=generators,
            output_type="np",
            callback_on_step_end=callback,
            callback_on_step_end_tensor_inputs=inputs,
        ).images

    full = draw()
    callback = TrustAbstention(
        TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes, thresholds=thresholds, drop=True
    )
    kept_images = draw(callback)
    callback.close()
    np.testing.assert_array_equal(callback.kept_rows, [1, 2, 4, 5])  # b = 0 abstains
    assert kept_images.shape == (4, *full.shape[1:])
    np.testing.assert_allclose(kept_images, full[callback.kept_rows], atol=1e-5)
    recorded = TrustAbstention(TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes, thresholds=thresholds)
    assert draw(recorded).shape == full.shape and recorded.abstained.sum() == 2
    recorded.close()
    everyone = thresholds.with_columns(threshold=thresholds["threshold"] * 0 - 1e9)
    callback = TrustAbstention(
        TrajectoryTap(pipe.transformer, 1, [0]), scorer, attributes, thresholds=everyone, drop=True
    )
    assert draw(callback).shape == full.shape and callback.kept_rows.size == 0 and pipe.interrupt  # interrupted
    callback.close()
    assert draw(lambda pipe, step, t, tensors: {name: x[:0] for name, x in tensors.items()}).shape == (0, 16, 16, 3)
    callback = TrustAbstention(
        TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes, thresholds=thresholds, drop=True
    )
    with pytest.raises(ValueError, match="conditioning beside its latents"):
        draw(callback, inputs=("latents",))
    callback.close()
    with pytest.raises(ValueError, match="return both"):
        draw(lambda pipe, step, t, tensors: {"latents": tensors["latents"][:2]})


def _sd3_of(pipe):
    """SD3's diffusers pipeline on an attribute pipeline's denoiser and autoencoder, as a lab holds one;
    no text encoders: the tests pass prompt embeddings."""
    from diffusers import StableDiffusion3Pipeline

    pipe.vae.register_to_config(shift_factor=0.0)  # SD3's decoder reads it
    return StableDiffusion3Pipeline(
        transformer=pipe.transformer,
        vae=pipe.vae,
        scheduler=pipe.scheduler,
        text_encoder=None,
        tokenizer=None,
        text_encoder_2=None,
        tokenizer_2=None,
        text_encoder_3=None,
        tokenizer_3=None,
    )


def test_a_guided_sd3_pipeline_drops_abstaining_samples_from_both_halves(attribute_pipeline):
    """A lab's diffusers pipeline: SD3's, with classifier-free guidance (the unconditional half first),
    drops the abstained samples' latents and both halves of their prompt embeddings, and the kept images
    are the full batch's; a callback that does not fit the batch says why before it scores."""
    pipe = _sd3_of(attribute_pipeline(num_layers=1))
    attributes = np.array([[0, 0], [1, 1], [0, 2], [1, 0], [0, 1]])
    embeds = torch.randn(2, len(attributes), 3, 24, generator=torch.Generator().manual_seed(1))
    pooled = torch.randn(2, len(attributes), 32, generator=torch.Generator().manual_seed(2))
    scorer, thresholds = _abstain_on_b0(pipe.transformer.inner_dim)

    def draw(callback=None, guidance=3.0, inputs=("latents", "prompt_embeds", "pooled_prompt_embeds")):
        return pipe(
            prompt_embeds=embeds[1],
            negative_prompt_embeds=embeds[0],
            pooled_prompt_embeds=pooled[1],
            negative_pooled_prompt_embeds=pooled[0],
            guidance_scale=guidance,
            num_inference_steps=3,
            height=16,
            width=16,
            output_type="np",
            callback_on_step_end=callback,
            generator=[torch.Generator().manual_seed(i) for i in range(len(attributes))],
            callback_on_step_end_tensor_inputs=list(inputs),
        ).images

    def abstention(step=0, conditional_half=True):
        tap = TrajectoryTap(pipe.transformer, 1, [step], conditional_half=conditional_half)
        return TrustAbstention(tap, scorer, attributes, thresholds=thresholds, drop=True)

    full = draw()
    callback = abstention()
    kept_images = draw(callback)
    callback.close()
    np.testing.assert_array_equal(callback.kept_rows, [1, 2, 4])
    np.testing.assert_allclose(kept_images, full[callback.kept_rows], atol=1e-5)
    mistakes = [
        (abstention(conditional_half=False), {}, "10 rows for 5 .* needs conditional_half=True"),
        (abstention(), {"guidance": 1.0}, "conditional_half=True, but the batch is not guided"),
        (abstention(step=3), {}, r"step 3 is not among the pipeline's 3 denoising steps"),
        (abstention(), {"inputs": ("latents", "prompt_embeds")}, r"got \['latents', 'prompt_embeds'\]"),
    ]
    for callback, arguments, message in mistakes:
        with pytest.raises(ValueError, match=message):
            draw(callback, **arguments)
        callback.close()


def test_a_text_conditioned_pipeline_reads_real_images_through_the_labs_conditioning(attribute_pipeline):
    """translator_pairs on a pipeline without an attribute encoder (SD3's) reads the real images through
    the lab's ``conditioning``: given the attribute pipeline's encoder, the same features as that pipeline."""
    from condeval.trust.translator import FeatureReadout, translator_pairs

    pipe = attribute_pipeline(num_layers=2)
    sd3 = _sd3_of(pipe)
    images = np.random.default_rng(0).integers(0, 256, (4, 3, 16, 16), dtype=np.uint8)
    attributes = np.array([[0, 0], [1, 1], [0, 2], [1, 0]])
    with pytest.raises(ValueError, match="no attribute_encoder: pass conditioning="):
        translator_pairs(sd3, images, attributes, [0.5], 1)

    def conditioning(rows):
        return pipe.attribute_encoder(torch.as_tensor(rows))

    own = translator_pairs(pipe, images, attributes, [0.25, 0.5], 2)
    readout = FeatureReadout(2, conditioning=conditioning)
    np.testing.assert_array_equal(translator_pairs(sd3, images, attributes, [0.25, 0.5], readout), own)
    other = translator_pairs(sd3, images, attributes[::-1].copy(), [0.25, 0.5], readout)
    assert not np.allclose(other, own)


def test_internal_features_read_a_pipeline_loaded_in_bfloat16(attribute_pipeline):
    """The paper config's precision on a GPU: float32 latents and noise are cast to the denoiser's dtype, and the
    features agree with float32's (cosine >= 0.99 per row on this random tiny denoiser)."""
    import torch

    from condeval.trust.translator import internal_features

    pipe = attribute_pipeline(num_layers=2)
    latents = torch.randn(6, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    attributes = np.array([[0, 1], [1, 2], [0, 0], [1, 1], [0, 2], [1, 0]])

    def features():
        return internal_features(pipe, latents, attributes, 0.5, 1, generator=torch.Generator().manual_seed(1))

    full = features()
    pipe.to(dtype=torch.bfloat16)
    half = features()
    assert half.dtype == np.float32 and half.shape == full.shape
    cosine = (full * half).sum(1) / np.linalg.norm(full, axis=1) / np.linalg.norm(half, axis=1)
    assert cosine.min() >= 0.99
