"""The README's "Score your own model" example for the CLIPScore and trust tracks runs as written, on
synthetic inputs of the shapes it names (the CReL example needs a run's checkpoints: docs/package.md)."""

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
    }
    exec(block, namespace)
    assert 0 < namespace["lam"] < 1
    assert namespace["scores"].height == 200 and 0.8 < namespace["keep"].mean() <= 1.0
