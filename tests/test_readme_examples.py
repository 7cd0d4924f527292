"""The README's "Score your own model" examples run as written, on synthetic inputs of the shapes they name."""

from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks(text: str) -> list[str]:
    return [block.split("```", 1)[0] for block in text.split("```python")[1:]]


def test_the_risk_control_and_trust_example_runs_as_written():
    block = next(b for b in _python_blocks(README.read_text()) if "TrustScorer" in b)
    rng = np.random.default_rng(0)
    words = 3000
    is_error = (rng.random(words) < 0.2).astype(int)
    namespace = {
        "word_is_error": is_error,
        "word_scores": np.clip(0.5 * is_error + 0.6 * rng.random(words), 0, 1),
        "caption_ids": np.arange(words) // 6,
        "image_ids": np.arange(words) // 12,
        "real_features": rng.normal(size=(800, 16)),
        "real_attributes": rng.integers(0, 2, (800, 2)),
        "sample_features": rng.normal(size=(200, 16)),
        "requested_attributes": rng.integers(0, 2, (200, 2)),
        "new_word_scores": rng.random(50),
    }
    exec(block, namespace)
    assert 0 < namespace["control"].threshold_ < 1 and namespace["flags"].shape == (50,)
    assert namespace["scores"].height == 200 and 0.8 < namespace["keep"].mean() <= 1.0


def test_the_crel_example_trains_calibrates_and_scores_one_output_per_condition(tmp_path, monkeypatch):
    block = next(b for b in _python_blocks(README.read_text()) if "CReL(" in b)
    rng = np.random.default_rng(0)
    conditions, per_condition = 300, 2
    condition_features = rng.normal(size=(conditions, 4))
    X = np.repeat(condition_features, per_condition, axis=0)
    mix = rng.normal(size=(4, 6))
    Y = X @ mix + 0.3 * rng.normal(size=(len(X), 6))
    namespace = {"X": X, "Y": Y, "GT": X @ mix, "condition_ids": np.repeat(np.arange(conditions), per_condition)}
    monkeypatch.chdir(tmp_path)
    exec(block, namespace)
    cal_units = namespace["condition_ids"][namespace["cal"]]
    assert len(cal_units) == len(set(cal_units)) == int(conditions * 0.05)
    vae_units = set(namespace["condition_ids"][namespace["vae"]])
    assert not vae_units & set(cal_units) and not vae_units & set(namespace["condition_ids"][namespace["test"]])
    assert namespace["worst"].shape == (int(conditions * 0.05),) and np.isfinite(namespace["worst"]).all()
