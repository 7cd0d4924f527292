"""Do the text-to-image generators carry signal? Measured on held-out val captions with the shared CLIP.

- **Retrieval.** Each generated image's own caption among a gallery of val captions (image→text
  R@k), beside the same for the real images of those captions.
- **Requested attributes.** On captions of single-object scenes, two readers name the object's
  colour and shape. Zero-shot, the CLIP matches each image against ``"a {colour} {shape}"`` for every
  colour and shape of the mini-world and reads off the best prompt's. The probe
  (:class:`AttributeProbe`) is a small classifier trained on real mini-world images: scikit-learn
  logistic regressions on the CLIP's image features of single-object train images at the generated
  size. Each is reported for the generated images, for the real images (the reader's own ceiling) and
  for a shuffled-caption baseline: the generated images read against another caption's request (what
  a generator ignoring its prompt would score).
"""

from __future__ import annotations

import numpy as np

from condeval.core.conformal import mean_interval
from condeval.datasets.miniworld import COLOURS, SHAPES
from condeval.encoders.signal import retrieval_at_k

__all__ = ["AttributeProbe", "at_size", "read_attributes", "attribute_accuracy", "generation_signal", "single_objects"]


def at_size(path, side: int):
    """The image at ``path`` as a generator of ``side`` pixels would draw it (RGB, Lanczos-resized), read
    when an encoder's batch reaches it (:class:`~condeval.encoders.features.ResizedImage`): how every
    reader here reads a real image beside generated ones."""
    from condeval.encoders.inputs import ResizedImage

    return ResizedImage(path, side)


def read_attributes(encoder, images, colours=None, shapes=None) -> tuple[np.ndarray, np.ndarray]:
    """(colour, shape) the CLIP reads in each image: the best of every ``"a {colour} {noun}"`` prompt.

    Parameters
    ----------
    encoder : condeval.encoders.features.ClipEncoder
    images : sequence of PIL images or paths
    colours, shapes : sequence of str, optional
        The candidates (default every colour and shape of the mini-world; a shape's canonical noun).

    Returns
    -------
    (ndarray of str, ndarray of str)
    """
    colours = list(COLOURS) if colours is None else list(colours)
    shapes = list(SHAPES) if shapes is None else list(shapes)
    prompts = [(c, s) for c in colours for s in shapes]
    texts = encoder.text_features([f"a {c} {SHAPES[s][0]}" for c, s in prompts])
    best = (encoder.image_features(list(images)) @ texts.T).argmax(axis=1)
    return np.array([prompts[i][0] for i in best]), np.array([prompts[i][1] for i in best])


class AttributeProbe:
    """Colour and shape read by logistic regressions (scikit-learn) on the CLIP's image features.

    Parameters
    ----------
    encoder : condeval.encoders.features.ClipEncoder
        The shared CLIP, whose image features the probes read.
    C : float
        Inverse regularisation strength of both regressions.
    """

    def __init__(self, encoder, C: float = 10.0):
        self.encoder, self.C = encoder, C

    def fit(self, images, objects: list[dict]) -> AttributeProbe:
        """Train on ``images`` of single objects, ``objects[i]`` (``{"colour", "shape"}``) the object of ``images[i]``."""
        from sklearn.linear_model import LogisticRegression

        features = self.encoder.image_features(list(images))
        self.probes_ = {
            attribute: LogisticRegression(C=self.C, max_iter=2000).fit(features, [obj[attribute] for obj in objects])
            for attribute in ("colour", "shape")
        }
        return self

    def read(self, images) -> tuple[np.ndarray, np.ndarray]:
        """(colour, shape) predicted for each image."""
        features = self.encoder.image_features(list(images))
        return self.probes_["colour"].predict(features), self.probes_["shape"].predict(features)


def single_objects(scenes: list[list[dict]], captions: list[str] | None = None) -> list[int]:
    """Indices of the scenes holding one object (and, given ``captions``, whose caption names its colour and shape)."""
    return [
        i
        for i, objects in enumerate(scenes)
        if len(objects) == 1 and (captions is None or _names(captions[i], objects[0]))
    ]


def attribute_accuracy(read: tuple[np.ndarray, np.ndarray], requested: list[dict]) -> dict:
    """Share of images whose read colour and shape are the requested object's (``{"colour", "shape"}``),
    each with its 95% interval over the images (``<key>_low``, ``<key>_high``)."""
    colour, shape = read
    want_colour = np.array([obj["colour"] for obj in requested])
    want_shape = np.array([obj["shape"] for obj in requested])
    hits = {
        "colour": colour == want_colour,
        "shape": shape == want_shape,
        "both": (colour == want_colour) & (shape == want_shape),
    }
    out = {}
    for key, hit in hits.items():
        out[key] = float(np.mean(hit))
        out[f"{key}_low"], out[f"{key}_high"] = mean_interval(hit)
    return out


def generation_signal(
    encoder,
    generated,
    real,
    captions: list[str],
    scenes: list[list[dict]],
    gallery: int = 1000,
    seed: int = 0,
    probe: AttributeProbe | None = None,
) -> dict:
    """Retrieval and requested-attribute accuracy of ``generated[i]``, drawn for ``captions[i]`` of ``real[i]``.

    Parameters
    ----------
    encoder : condeval.encoders.features.ClipEncoder
        The shared CLIP.
    generated, real : sequence of PIL images or paths
        The generated image and the real image of each caption.
    captions : list of str
    scenes : list of list of dict
        Each real image's objects (the mini-world's scenes sidecar). Images of one object whose
        caption names its colour and its shape are read (a caption may omit either).
    gallery : int
        Captions per retrieval gallery (the first ``gallery`` items).
    seed : int
        Seed of the shuffled-caption permutation.
    probe : AttributeProbe, optional
        A fitted probe: its readings are reported as ``attributes_probe``.

    Returns
    -------
    dict
        ``generated``/``real`` retrieval (R@1, R@5, chance), and ``attributes`` (zero-shot; with a
        probe, ``attributes_probe`` too) with ``generated``, ``real`` and ``shuffled`` colour/shape
        accuracy on the ``single_object`` captions, and chance.
    """
    n = min(gallery, len(captions))
    texts = encoder.text_features(captions[:n])
    out = {
        "gallery": n,
        "generated": retrieval_at_k(encoder.image_features(list(generated[:n])), texts),
        "real": retrieval_at_k(encoder.image_features(list(real[:n])), texts),
    }
    lone = single_objects(scenes, captions)
    requested = [scenes[i][0] for i in lone]
    permutation = np.random.default_rng(seed).permutation(len(lone))
    readers = {"attributes": lambda images: read_attributes(encoder, images)}
    if probe is not None:
        readers["attributes_probe"] = probe.read
    for key, read in readers.items():
        read_generated = read([generated[i] for i in lone])
        out[key] = {
            "single_object": len(lone),
            "generated": attribute_accuracy(read_generated, requested),
            "real": attribute_accuracy(read([real[i] for i in lone]), requested),
            "shuffled": attribute_accuracy(read_generated, [requested[j] for j in permutation]),
            "chance": {"colour": 1 / len(COLOURS), "shape": 1 / len(SHAPES)},
        }
    return out


def _names(caption: str, obj: dict) -> bool:
    """Whether ``caption`` names ``obj``'s colour and one of its shape's nouns (singular or plural)."""
    from condeval.datasets.miniworld import plural

    words = set(caption.lower().split())
    nouns = set(SHAPES[obj["shape"]]) | {plural(noun) for noun in SHAPES[obj["shape"]]}
    return obj["colour"] in words and bool(words & nouns)
