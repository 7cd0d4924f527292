"""The generator-signal readers on an encoder whose features are known: the probe reads what the
features hold, the shuffled baseline sits at chance, and a generator that ignores its prompt scores none."""

import numpy as np

from condeval.datasets.miniworld import COLOURS, SHAPES
from condeval.generators.signal import AttributeProbe, generation_signal, single_objects


class NoisyAttributes:
    """An image (a dict ``{"colour", "shape"}``) becomes its one-hot colour and shape plus Gaussian
    noise; a text, a fixed random vector (retrieval is not under test here)."""

    def __init__(self, noise: float = 0.2, seed: int = 0):
        self.noise, self.rng = noise, np.random.default_rng(seed)

    def image_features(self, images):
        colours = np.eye(len(COLOURS))[[list(COLOURS).index(im["colour"]) for im in images]]
        shapes = np.eye(len(SHAPES))[[list(SHAPES).index(im["shape"]) for im in images]]
        clean = np.hstack([colours, shapes])
        return (clean + self.noise * self.rng.standard_normal(clean.shape)).astype(np.float32)

    def text_features(self, texts):
        return np.random.default_rng(len(texts)).standard_normal((len(texts), len(COLOURS) + len(SHAPES)))


def _objects(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"colour": str(rng.choice(list(COLOURS))), "shape": str(rng.choice(list(SHAPES)))} for _ in range(n)]


def test_the_probe_reads_what_the_features_hold():
    encoder = NoisyAttributes()
    train, test = _objects(600, seed=1), _objects(300, seed=2)
    probe = AttributeProbe(encoder).fit(train, train)
    colour, shape = probe.read(test)
    assert np.mean(colour == [o["colour"] for o in test]) > 0.9
    assert np.mean(shape == [o["shape"] for o in test]) > 0.9


def test_generation_signal_reports_the_probe_beside_real_and_shuffled():
    encoder = NoisyAttributes()
    train = _objects(600, seed=1)
    probe = AttributeProbe(encoder).fit(train, train)
    scenes = [[obj] for obj in _objects(300, seed=3)]
    captions = [f"a {s[0]['colour']} {SHAPES[s[0]['shape']][0]}" for s in scenes]
    real = [s[0] for s in scenes]
    faithful = generation_signal(encoder, real, real, captions, scenes, probe=probe)["attributes_probe"]
    assert faithful["single_object"] == 300 == len(single_objects(scenes, captions))
    assert faithful["generated"]["shape"] > 0.9 and faithful["real"]["shape"] > 0.9
    assert faithful["shuffled"]["shape"] < 3 * faithful["chance"]["shape"]
    # a generator that ignores its prompt draws other objects: it scores like the shuffled baseline
    ignoring = [s[0] for s in [[obj] for obj in _objects(300, seed=4)]]
    blind = generation_signal(encoder, ignoring, real, captions, scenes, probe=probe)["attributes_probe"]
    assert blind["generated"]["shape"] < 3 * blind["chance"]["shape"]
    assert blind["real"]["shape"] > 0.9
