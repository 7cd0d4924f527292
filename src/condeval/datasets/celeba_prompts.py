"""Text prompts of CelebA's conditions: what Appendix J's CLIP-alignment scorer compares a sample with.

The paper scores CelebA samples against "16 joint-combo prompts", one per (Male, Smiling, Blond_Hair,
Eyeglasses) tuple; its wording is not given, so this is ours: every attribute is named in both of its
values ("a photo of a serious woman with dark hair and no eyeglasses"), so that each prompt differs
from a one-attribute foil by one word.
"""

from __future__ import annotations

import numpy as np

from condeval.datasets.celeba import ATTRIBUTES

__all__ = ["PROMPTED_DATASETS", "condition_prompt", "condition_prompts", "foil_prompts", "prompt_vocabulary"]

#: Datasets whose conditions have prompts (RxRx1's siRNAs have no text a CLIP reads).
PROMPTED_DATASETS = ("celeba",)
# (value 0, value 1) of each attribute, in ATTRIBUTES' order
_WORDS = {
    "Male": ("woman", "man"),
    "Smiling": ("serious", "smiling"),
    "Blond_Hair": ("dark", "blond"),
    "Eyeglasses": ("no eyeglasses", "eyeglasses"),
}
_TEMPLATE = "a photo of a {Smiling} {Male} with {Blond_Hair} hair and {Eyeglasses}"


def condition_prompt(values) -> str:
    """The prompt of one CelebA condition, ``values`` in the order of :data:`condeval.datasets.celeba.ATTRIBUTES`."""
    values = [int(v) for v in values]
    if len(values) != len(ATTRIBUTES) or not set(values) <= {0, 1}:
        raise ValueError(f"a CelebA condition is {len(ATTRIBUTES)} values in {{0, 1}}; got {values}")
    return _TEMPLATE.format(**{name: _WORDS[name][v] for name, v in zip(ATTRIBUTES, values, strict=True)})


def condition_prompts(conditions) -> list[str]:
    """One prompt per row of ``conditions`` (M, 4).

    Examples
    --------
    >>> from condeval.datasets.celeba_prompts import condition_prompts
    >>> for prompt in condition_prompts([[0, 1, 0, 0], [1, 0, 1, 1]]):   # (Male, Smiling, Blond_Hair, Eyeglasses)
    ...     print(prompt)
    a photo of a smiling woman with dark hair and no eyeglasses
    a photo of a serious man with blond hair and eyeglasses
    >>> condition_prompts([[0, 1, 2, 0]])
    Traceback (most recent call last):
    ...
    ValueError: a CelebA condition is 4 values in {0, 1}; got [0, 1, 2, 0]
    """
    return [condition_prompt(row) for row in np.asarray(conditions)]


def foil_prompts(values) -> list[str]:
    """The prompts of the condition with one attribute flipped, one per attribute (CLIP's hard negatives)."""
    values = np.asarray(values, dtype=np.int64)
    return [condition_prompt(np.where(np.arange(len(values)) == k, 1 - values, values)) for k in range(len(values))]


def prompt_vocabulary() -> list[str]:
    """Every word a prompt can hold, for a word tokenizer."""
    words = _TEMPLATE.replace("{", " ").replace("}", " ").split()
    words += [w for pair in _WORDS.values() for phrase in pair for w in phrase.split()]
    return [w for w in dict.fromkeys(words) if w not in _WORDS]
