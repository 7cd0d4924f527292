"""Attention-mask sampling of CLIPScore distributions (Section 3) and word error scores (Section 4.1).

For one image–caption pair, I image embeddings come from the vision tower with ξ_i of the patches
masked out of attention, and T text embeddings from the text tower with ξ_t of the caption's valid
words (nouns, proper nouns, numerals, verbs, adjectives, adverbs) masked out of attention; the text
is never edited. Row 0 of each is the unmasked embedding. The I×T CLIPScores w·max(cos, 0) then come
from one matrix product: I + T rows through the encoders, not I×T pairs.

Word error scores: v_t (Eq. 1) is the mean over masked images of CLIPS(masked caption t) −
CLIPS(caption); V[j] (Eq. 2) averages v_t over the samples that masked word j; f_v = σ(V) (Eq. 3).
A word never masked (not a valid POS) scores f_v = 0, as in the official code (V = −∞).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from PIL import Image

from condeval.core.io import read_image
from condeval.core.resources import INFERENCE_BYTES_PER_TOKEN, GpuWork, forward_flops, tower_parameters
from condeval.crc.pos import PosTagger, maskable_words
from condeval.encoders.features import ClipEncoder
from condeval.metrics import CLIPSCORE_WEIGHT, cosine_similarity
from condeval.metrics import clipscore as clipscore_of_cosine

if TYPE_CHECKING:  # polars is imported where the table is built
    import polars as pl

__all__ = [
    "sampling_work",
    "CLIPSCORE_WEIGHT",
    "IMAGE_MASKINGS",
    "clipscore",
    "PairSamples",
    "AttentionMaskSampler",
    "word_error_scores",
    "sample_captions",
]

IMAGE_MASKINGS = ("patches", "attention_entries")


def clipscore(text_embeddings: torch.Tensor, image_embeddings: torch.Tensor, weight: float) -> torch.Tensor:
    """w · max(cos, 0) between every text row and every image row: shape (n_image, n_text) (formula in condeval.metrics)."""
    return clipscore_of_cosine(
        cosine_similarity(image_embeddings.float(), text_embeddings.float(), pairwise=True), weight
    )


def word_error_scores(scores: np.ndarray, text_masks: np.ndarray) -> np.ndarray:
    """f_v per word (Eqs. 1–3) from a pair's CLIPScores.

    Parameters
    ----------
    scores : ndarray, shape (1 + I, 1 + T)
        CLIPScores; row 0 / column 0 are the unmasked image / caption.
    text_masks : ndarray of bool, shape (T, n_words)
        Which words each text sample masked.
    """
    v = (scores[1:, 1:] - scores[1:, :1]).mean(axis=0)  # Eq. 1, one v_t per text sample
    times_masked = text_masks.sum(axis=0)
    totals = v @ text_masks
    V = np.divide(totals, times_masked, out=np.full(text_masks.shape[1], -np.inf), where=times_masked > 0)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-V))


@dataclass
class PairSamples:
    """The attention-mask samples of one image–caption pair."""

    scores: np.ndarray  # (1 + I, 1 + T) CLIPScores; [0, 0] is the unmasked pair's
    text_masks: np.ndarray  # (T, n_words) bool: the words each text sample masked
    words: list[str]

    @property
    def has_valid_words(self) -> bool:
        """False for a caption with no maskable word: its T text samples equal the caption, every
        f_v is 0, and the workflow counts such captions in its log."""
        return bool(self.text_masks.any())

    @property
    def clipscore(self) -> float:
        return float(self.scores[0, 0])

    @property
    def distribution(self) -> np.ndarray:
        """The I×T masked CLIPScores (Section 3's output distribution)."""
        return self.scores[1:, 1:].ravel()

    @property
    def clipped_share(self) -> float:
        """The share of the I×T masked CLIPScores at exactly 0: their cosine was at or below 0, and
        w·max(cos, 0) cut it off, so the distribution there no longer says how wrong the pair is."""
        return float(np.mean(self.distribution == 0.0))

    @property
    def word_scores(self) -> np.ndarray:
        return word_error_scores(self.scores, self.text_masks)


class AttentionMaskSampler:
    """CLIPScore distributions by masking a CLIP model's attention (any ``CLIPModel`` folder).

    Parameters
    ----------
    encoder : ClipEncoder
        The CLIP model, its tokenizer (a fast one, for offsets) and image processor.
    tagger : PosTagger
        Tags the caption's words; only NOUN, PROPN, NUM, VERB, ADJ and ADV words are masked.
    n_image, n_text : int
        I and T, the masked samples per image and per caption.
    image_ratio, text_ratio : float
        ξ_i and ξ_t: the share of patches and of valid words masked per sample (rounded up).
    weight : float or "logit_scale"
        CLIPScore's w (the paper: 2.5); "logit_scale" uses the model's raw logit-scale parameter,
        as the official code does.
    image_masking : {"patches", "attention_entries"}
        "patches" (the paper) removes whole patches from attention; "attention_entries" (the
        official code) masks ⌈ξ_i (P+1)²⌉ random entries of the attention matrix.

    Examples
    --------
    Sampling needs a CLIP folder (``ClipEncoder("models/my-clip")``, then ``sampler.sample(image, words, seed=0)``);
    the settings are checked before the encoder is read, so a bad ratio is refused without one:

    >>> from condeval.crc.pos import LexiconTagger
    >>> from condeval.crc.sampling import AttentionMaskSampler
    >>> tagger = LexiconTagger({"red": "ADJ", "star": "NOUN"})
    >>> AttentionMaskSampler(None, tagger, n_image=100, n_text=100, image_ratio=1.0, text_ratio=0.5)
    Traceback (most recent call last):
    ...
    ValueError: image_ratio must lie in [0, 1); got 1.0
    """

    def __init__(
        self,
        encoder: ClipEncoder,
        tagger: PosTagger,
        *,
        n_image: int,
        n_text: int,
        image_ratio: float,
        text_ratio: float,
        weight: float | str = CLIPSCORE_WEIGHT,
        image_masking: str = "patches",
    ):
        if image_masking not in IMAGE_MASKINGS:
            raise ValueError(f"image_masking must be one of {IMAGE_MASKINGS}; got {image_masking!r}")
        for name, ratio in (("image_ratio", image_ratio), ("text_ratio", text_ratio)):
            if not 0.0 <= ratio < 1.0:
                raise ValueError(f"{name} must lie in [0, 1); got {ratio!r}")
        from condeval.core.io import check_integer

        check_integer(n_image, "n_image", least=1)
        check_integer(n_text, "n_text", least=1)
        if weight != "logit_scale" and not float(weight) > 0:
            raise ValueError(f"weight must be positive (CLIPScore's w, 2.5) or 'logit_scale'; got {weight!r}")
        self.encoder, self.tagger = encoder, tagger
        self.n_image, self.n_text = n_image, n_text
        self.image_ratio, self.text_ratio = image_ratio, text_ratio
        self.image_masking = image_masking
        self.weight = float(encoder.model.logit_scale.detach()) if weight == "logit_scale" else float(weight)

    # -- images ------------------------------------------------------------------------------
    def _image_attention_mask(self, n_tokens: int, rng: np.random.Generator, dtype=torch.float32) -> torch.Tensor:
        """Additive masks (1 + I, 1, q, n_tokens) in ``dtype``: row 0 masks nothing; the CLS token is never masked.
        The mask value is ``dtype``'s lowest, not float32's, which half precisions would round to −inf."""
        lowest = torch.finfo(dtype).min
        if self.image_masking == "patches":
            mask = torch.zeros(1 + self.n_image, 1, 1, n_tokens, dtype=dtype)
            k = math.ceil(self.image_ratio * (n_tokens - 1))
            for i in range(1, 1 + self.n_image):
                mask[i, 0, 0, 1 + rng.choice(n_tokens - 1, size=k, replace=False)] = lowest
            return mask
        mask = torch.zeros(1 + self.n_image, 1, n_tokens * n_tokens, dtype=dtype)
        k = math.ceil(self.image_ratio * n_tokens * n_tokens)
        for i in range(1, 1 + self.n_image):
            mask[i, 0, rng.choice(n_tokens * n_tokens, size=k, replace=False)] = lowest
        return mask.view(1 + self.n_image, 1, n_tokens, n_tokens)

    @torch.no_grad()
    def image_embeddings(self, image: Image.Image, rng: np.random.Generator) -> torch.Tensor:
        """(1 + I, projection_dim): the unmasked image, then I patch-masked ones, in one batch."""
        pixels = self.encoder.image_processor([image.convert("RGB")], return_tensors="pt")["pixel_values"]
        vision = self.encoder.vision_tower
        embedded = vision.embeddings(pixels.to(self.encoder.device, self.encoder.dtype))
        hidden = vision.pre_layrnorm(embedded).expand(1 + self.n_image, -1, -1)
        mask = self._image_attention_mask(hidden.shape[1], rng, hidden.dtype).to(hidden.device)
        hidden = vision.encoder(inputs_embeds=hidden, attention_mask=mask).last_hidden_state
        return self.encoder.visual_projection(vision.post_layernorm(hidden[:, 0])).float()

    # -- captions ----------------------------------------------------------------------------
    def _word_tokens(self, words: Sequence[str]) -> tuple[dict, list[list[int]]]:
        """Token ids of the caption and, per word, the positions of its tokens (by offsets)."""
        text = " ".join(words)
        starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
        tokens = self.encoder.tokenizer(
            text, truncation=True, max_length=self.encoder.max_length, return_offsets_mapping=True, return_tensors="pt"
        )
        offsets = tokens.pop("offset_mapping")[0].tolist()
        positions = [
            [p for p, (a, b) in enumerate(offsets) if b > a and start <= a and b <= start + len(word)]
            for word, start in zip(words, starts)
        ]
        return tokens, positions

    def truncated_words(self, words: Sequence[str]) -> int:
        """How many valid words the tokenizer's ``max_length`` cuts off: never masked, they score f_v = 0."""
        _, positions = self._word_tokens(words)
        return sum(1 for j in maskable_words(self.tagger, words) if not positions[j])

    @torch.no_grad()
    def text_embeddings(self, words: Sequence[str], rng: np.random.Generator) -> tuple[torch.Tensor, np.ndarray]:
        """(1 + T, projection_dim) caption embeddings (row 0 unmasked) and the (T, n_words) masks."""
        tokens, positions = self._word_tokens(words)
        valid = [j for j in maskable_words(self.tagger, words) if positions[j]]
        masks = np.zeros((self.n_text, len(words)), dtype=bool)
        attention = tokens["attention_mask"].repeat(1 + self.n_text, 1)
        k = math.ceil(self.text_ratio * len(valid))
        for t in range(self.n_text):
            if not valid or k == 0:
                break
            for j in rng.choice(valid, size=k, replace=False):
                masks[t, j] = True
                attention[1 + t, positions[j]] = 0
        input_ids = tokens["input_ids"].repeat(1 + self.n_text, 1).to(self.encoder.device)
        return self.encoder.text_embeddings(input_ids, attention.to(self.encoder.device)), masks

    def sample(self, image: Image.Image | str | os.PathLike, words: Sequence[str], seed: int) -> PairSamples:
        """All samples of one pair (``image`` a PIL image or its file); the same ``seed`` gives the same masks."""
        rng = np.random.default_rng(seed)
        if isinstance(image, (str, os.PathLike)):
            return self.score(self.image_embeddings(read_image(image), rng), words, rng)
        if not isinstance(image, Image.Image):
            raise TypeError(f"image must be a PIL image or an image file's path; got {type(image).__name__}")
        return self.score(self.image_embeddings(image, rng), words, rng)

    def score(self, image_embeddings: torch.Tensor, words: Sequence[str], rng: np.random.Generator) -> PairSamples:
        """The samples of one caption against an image's ``(1 + I)`` :meth:`image_embeddings`.

        One image's embeddings serve all of its captions (:func:`sample_captions`): the image
        forwards are most of a pair's cost.
        """
        texts, masks = self.text_embeddings(caption_words(words), rng)
        scores = clipscore(texts, image_embeddings, self.weight).cpu().numpy().astype(np.float64)
        return PairSamples(scores=scores, text_masks=masks, words=list(words))


def caption_words(words) -> list[str]:
    """A caption as its list of words, refused when it is one str (it would be read letter by letter)
    or holds a non-str word."""
    from condeval.encoders.inputs import text_list

    return text_list(words, "a caption's words", f"split it: {words.split()!r}" if isinstance(words, str) else "")


def sample_captions(
    sampler: AttentionMaskSampler,
    paths: Sequence[str],
    words: Sequence[Sequence[str]],
    keys: Sequence[int],
    *,
    seed: int,
    keep_distribution: bool = False,
    progress: bool = True,
) -> pl.DataFrame:
    """Attention-mask samples of many pairs, one row per pair, in the order given.

    An image's I masked embeddings are computed once and shared by all of its captions, seeded by
    ``(seed, the image file's name)``; each caption's T text masks are seeded by ``(seed, key)``. So a
    pair's results do not depend on how the pairs are sharded or ordered. Captions of one image
    share its image masks as they share the image: the calibration unit is the image
    (``crc.calibration_unit``), not the caption.

    Returns
    -------
    polars.DataFrame
        ``key``, ``clipscore`` (unmasked; 0 when the pair itself is clipped), ``mean`` and ``std``
        of the I×T masked CLIPScores, ``clipped_share`` (the share of them clipped at exactly 0),
        ``word_scores`` (f_v per word), ``has_valid_words``, ``pos`` (each word's UPOS tag),
        ``truncated_words`` (valid words past the tokenizer's ``max_length``, never scored), and
        with ``keep_distribution`` the I×T ``samples`` themselves.

    Raises
    ------
    FloatingPointError
        When a pair's scores are not finite (naming the pair's key and image).

    Examples
    --------
    Each caption is a list of words; one str is refused before any image is read or the sampler is used
    (a real call passes an :class:`AttentionMaskSampler` and image files):

    >>> from condeval.crc.sampling import sample_captions
    >>> sample_captions(None, ["cat.jpg"], ["a red star"], [7], seed=0)
    Traceback (most recent call last):
    ...
    TypeError: pair 0 (key 7): a caption's words must be a sequence of str; got one str 'a red star'
    (split it: ['a', 'red', 'star'])
    """
    import polars as pl
    from tqdm.auto import tqdm

    if not len(paths) == len(words) == len(keys):
        raise ValueError(
            f"one image path, caption and key per pair; got {len(paths)} paths, {len(words)} captions "
            f"and {len(keys)} keys"
        )
    for index, path in enumerate(paths):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"paths[{index}] must be an image file's path (its name seeds the image masks); got "
                f"{type(path).__name__}"
            )
        try:
            caption_words(words[index])
        except TypeError as error:
            raise TypeError(f"pair {index} (key {keys[index]}): {error}") from None
    by_image: dict[str, list[int]] = {}
    for index, path in enumerate(paths):
        by_image.setdefault(str(path), []).append(index)
    rows: list[dict | None] = [None] * len(paths)
    bar = tqdm(total=len(paths), desc="attention-mask sampling", unit="pair", disable=not progress, mininterval=10)
    for path, indices in by_image.items():
        image = read_image(path)
        images = sampler.image_embeddings(image, np.random.default_rng(_seed(seed, _name_key(path))))
        for index in indices:
            caption, key = list(words[index]), int(keys[index])
            pair = sampler.score(images, caption, np.random.default_rng(_seed(seed, key)))
            if not np.isfinite(pair.scores).all():
                raise FloatingPointError(f"non-finite CLIPScores for pair key {key} ({path})")
            rows[index] = _sample_row(sampler, pair, key, keep_distribution)
            bar.update()
    bar.close()
    schema = {
        "key": pl.Int64,
        "clipscore": pl.Float64,
        "mean": pl.Float64,
        "std": pl.Float64,
        "clipped_share": pl.Float64,
        "word_scores": pl.List(pl.Float64),
        "has_valid_words": pl.Boolean,
        "pos": pl.List(pl.String),
        "truncated_words": pl.Int64,
    }
    if keep_distribution:
        schema["samples"] = pl.List(pl.Float32)
    return pl.DataFrame(rows, schema=schema)


def _seed(seed: int, key: int) -> int:
    return int(np.random.SeedSequence([seed, key]).generate_state(1)[0])


def _name_key(path) -> int:
    """A stable integer of an image file's name: its masks do not move with the data root."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(Path(path).name.encode(), digest_size=8).digest(), "little")


def _sample_row(sampler: AttentionMaskSampler, pair: PairSamples, key: int, keep_distribution: bool) -> dict:
    row = {
        "key": key,
        "clipscore": pair.clipscore,
        "mean": float(pair.distribution.mean()),
        "std": float(pair.distribution.std()),
        "clipped_share": pair.clipped_share,
        "word_scores": pair.word_scores.tolist(),
        "has_valid_words": pair.has_valid_words,
        "pos": sampler.tagger.tag(pair.words),
        "truncated_words": sampler.truncated_words(pair.words),
    }
    if keep_distribution:
        row["samples"] = pair.distribution.astype(np.float32).tolist()
    return row


#: Tokens a tower reads, at most: a ViT/14's 257 at 224 px, CLIP's 77 text tokens.
IMAGE_TOKENS, TEXT_TOKENS = 257, 77


def sampling_work(parameters: dict | None, sampling: dict, pairs: int, dtype: str = "auto") -> GpuWork:
    """One ``crc_sample`` job's GPU work: ``pairs`` pairs, each through ``n_image`` + 1 image and ``n_text`` + 1
    text forwards of a CLIP of ``parameters`` (each tower's own, condeval.core.resources.tower_parameters;
    None: a CLIP this run trains)."""
    if not parameters:
        return GpuWork(0.0, 0.0, dtype, basis="a CLIP trained by this run")
    per_pair = (sampling["n_image"] + 1) * forward_flops(tower_parameters(parameters, "image"), IMAGE_TOKENS)
    per_pair += (sampling["n_text"] + 1) * forward_flops(tower_parameters(parameters, "text"), TEXT_TOKENS)
    batch_tokens = (sampling["n_image"] + 1) * IMAGE_TOKENS + (sampling["n_text"] + 1) * TEXT_TOKENS
    return GpuWork(
        parameters["loaded"],
        pairs * per_pair,
        dtype,
        activation_bytes=batch_tokens * INFERENCE_BYTES_PER_TOKEN,
        basis=f"{pairs:,} pairs x ({sampling['n_image']} + {sampling['n_text']} + 2) forwards",
    )
