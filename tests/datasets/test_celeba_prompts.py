"""CelebA's condition prompts (Appendix J's CLIP alignment): one per condition, foils one attribute away."""

import itertools

import numpy as np
import pytest

from condeval.datasets.celeba_prompts import condition_prompt, condition_prompts, foil_prompts, prompt_vocabulary
from condeval.encoders.tokenizer import build_word_tokenizer

CONDITIONS = np.array(list(itertools.product([0, 1], repeat=4)))


def test_the_sixteen_conditions_have_sixteen_prompts_and_the_tokenizer_knows_every_word():
    prompts = condition_prompts(CONDITIONS)
    assert len(set(prompts)) == 16
    assert condition_prompt([1, 1, 1, 1]) == "a photo of a smiling man with blond hair and eyeglasses"
    tokenizer = build_word_tokenizer(prompt_vocabulary(), model_max_length=16)
    ids = tokenizer(prompts)["input_ids"]
    assert tokenizer.unk_token_id not in {token for row in ids for token in row}
    assert max(map(len, ids)) <= 16


def test_each_foil_is_the_prompt_of_the_condition_with_one_attribute_flipped():
    for values in CONDITIONS:
        foils = foil_prompts(values)
        assert len(foils) == 4
        for k, foil in enumerate(foils):
            flipped = values.copy()
            flipped[k] = 1 - flipped[k]
            assert foil == condition_prompt(flipped) != condition_prompt(values)


@pytest.mark.parametrize("values", [[0, 1, 2, 0], [0, 1, 0]])
def test_a_condition_outside_celebas_four_binary_attributes_is_refused(values):
    with pytest.raises(ValueError, match="CelebA condition"):
        condition_prompt(values)
