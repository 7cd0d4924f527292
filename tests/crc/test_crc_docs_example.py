"""docs/crc/index.md's "Your own model, end to end" runs as written: image files, captions as word lists,
per-word labels and human scores in; λ̂, test risk, calibrated intervals and new captions' flags out,
through a tiny CLIP saved where the example loads one and a lexicon tagger standing in for stanza."""

from pathlib import Path

import numpy as np
import pytest
import torch

from condeval.datasets.miniworld import SceneObject, render_scene, vocabulary

DOC = Path(__file__).resolve().parents[2] / "docs" / "crc" / "index.md"
MARKER = "<!-- example: your-model -->"
LEXICON = {"a": "DET", "red": "ADJ", "blue": "ADJ", "green": "ADJ", "star": "NOUN", "ring": "NOUN", "square": "NOUN"}
COLOURS, SHAPES = ["red", "blue", "green"], ["star", "ring", "square"]


def example_block() -> str:
    text = DOC.read_text()
    assert MARKER in text, f"{DOC}: no {MARKER!r}"
    return text.split(MARKER, 1)[1].split("```python", 1)[1].split("```", 1)[0]


def _save_tiny_clip(folder: Path) -> None:
    from transformers import CLIPModel

    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.tokenizer import build_word_tokenizer

    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    config = tiny_clip_config(
        tokenizer,
        32,
        ClipSizes(vision_width=16, vision_layers=1, patch_size=16, text_width=16, text_layers=1, projection_dim=8),
    )
    for part in (CLIPModel(config).eval(), tokenizer, clip_image_processor(32)):
        part.save_pretrained(folder)


def _pairs(root: Path, n_images: int, rng: np.random.Generator, prefix: str):
    """Two captions per image, one true and one with its shape swapped (the wrong word labelled 1)."""
    paths, words, keys, labels, human = [], [], [], [], []
    for i in range(n_images):
        colour, shape = COLOURS[i % 3], SHAPES[(i // 3) % 3]
        path = root / f"{prefix}{i:03d}.png"
        render_scene([SceneObject(shape, colour, "large", 0.5, 0.5)], rng, side=32).save(path)
        foil = SHAPES[(SHAPES.index(shape) + 1) % 3]
        for caption, label, score in (([colour, shape], [0, 0], 4.0), ([colour, foil], [0, 1], 1.0)):
            paths.append(str(path))
            words.append(["a", *caption])
            keys.append(len(keys) + (0 if prefix == "cal" else 10_000))
            labels.append([0, *label])
            human.append(score + rng.normal(0, 0.5))
    return paths, words, keys, labels, human


@pytest.mark.slow
def test_the_end_to_end_example_runs_as_written(tmp_path, monkeypatch):
    import condeval.crc.pos
    from condeval.crc.intervals import NoValidLambdaError

    _save_tiny_clip(tmp_path / "models/my-clip")
    monkeypatch.setattr(condeval.crc.pos, "StanzaTagger", lambda folder: condeval.crc.pos.LexiconTagger(LEXICON))
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    paths, words, keys, labels, human = _pairs(tmp_path, 40, rng, "cal")
    new_paths, new_words, new_keys, _, _ = _pairs(tmp_path, 3, rng, "new")
    block = example_block().replace("n_image=100, n_text=100", "n_image=8, n_text=8")
    namespace = dict(paths=paths, words=words, keys=keys, pair_labels=labels, human=human)
    namespace |= dict(new_paths=new_paths, new_words=new_words, new_keys=new_keys)
    steps_1_to_3, rest = block.split("# 4.", 1)
    step_4, step_5 = rest.split("# 5.", 1)
    exec(compile(steps_1_to_3, str(DOC), "exec"), namespace)
    try:  # the documented outcome when no λ beats the uncalibrated intervals (step 4's note)
        exec(compile("# 4." + step_4, str(DOC), "exec"), namespace)
        intervals_found = True
    except NoValidLambdaError:
        intervals_found = False
    exec(compile("# 5." + step_5, str(DOC), "exec"), namespace)
    control, flagged = namespace["control"], namespace["flagged"]
    assert 0 <= control.threshold_ and np.isfinite(namespace["test_risk"])
    assert [len(f) for f in flagged] == [len(w) for w in new_words]  # one flag per word, caption by caption
    assert not any(f[0] for f in flagged)  # "a" is not a valid word: never flagged
    if intervals_found:
        assert len(namespace["low"]) == len(namespace["test"]) and (namespace["low"] <= namespace["high"]).all()
