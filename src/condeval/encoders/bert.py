"""A tiny BERT pre-trained as BERT was: masked-language modelling plus next-sentence prediction.

Training uses ``BertForPreTraining`` on caption pairs ``[CLS] A [SEP] B [SEP]`` of the mini-world's
train split, with transformers' own ``DataCollatorForLanguageModeling`` masking (15% of tokens
chosen; 80/10/10 mask/random/keep). The sentence-level task (is B a caption of A's image, or of a
random other image?) is what trains the [CLS] state: with masked-language modelling alone every
caption's [CLS] feature came out the same (cosine 0.9999 between captions of different images),
and BERT-SIM read nothing. The saved folder loads with ``BertModel.from_pretrained(path)`` exactly
as ``bert-base-uncased`` does; BERT-SIM reads the [CLS] hidden state of a single caption.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import AutoTokenizer, BertConfig, BertForPreTraining, DataCollatorForLanguageModeling

from condeval.core.training import ScheduledModule
from condeval.encoders.data import trim_padding

__all__ = ["tiny_bert_config", "PretrainingBert", "caption_pairs"]


def tiny_bert_config(
    tokenizer, *, width: int = 64, layers: int = 2, heads: int = 4, max_length: int = 50
) -> BertConfig:
    """A ``BertConfig`` of the real architecture at a CPU-trainable size, wired to ``tokenizer``."""
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        max_position_embeddings=max_length,
        pad_token_id=tokenizer.pad_token_id,
    )


def caption_pairs(captions: list[list[str]], rng: np.random.Generator) -> tuple[list[str], list[str], np.ndarray]:
    """One (A, B, label) pair per image: B is another caption of A's image (label 0) or, half of
    the time, a caption of a random other image (label 1), BERT's IsNext / NotNext."""
    n = len(captions)
    firsts, seconds, labels = [], [], rng.integers(0, 2, size=n)
    for i, per_image in enumerate(captions):
        a, b = rng.choice(len(per_image), size=2, replace=False)
        other = (i + int(rng.integers(1, n))) % n
        firsts.append(per_image[a])
        seconds.append(captions[other][int(rng.integers(len(captions[other])))] if labels[i] else per_image[b])
    return firsts, seconds, labels.astype(np.int64)


class PretrainingBert(ScheduledModule):
    """Lightning wrapper of ``BertForPreTraining``; a batch is ``(input_ids, attention_mask, token_type_ids, next_sentence_label)``.

    ``tokenizer_dir`` is the saved tokenizer the collator masks with. Masks come from torch's
    global generator, which the training helper seeds and checkpoints, so a resumed run masks as
    an uninterrupted one.
    """

    default_weight_decay = 0.01

    def __init__(
        self,
        config: dict,
        tokenizer_dir: str,
        schedule: dict | None = None,
        mlm_probability: float = 0.15,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model = BertForPreTraining(BertConfig(**config))
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability)
        self.register_buffer("special_ids", torch.tensor(tokenizer.all_special_ids), persistent=False)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        ids, attention, types, next_sentence = batch
        attention, ids, types = trim_padding(attention, ids, types)
        special = torch.isin(ids, self.special_ids) | (attention == 0)
        masked, labels = self.collator.torch_mask_tokens(ids.cpu().clone(), special.cpu())
        out = self.model(
            input_ids=masked.to(ids.device),
            attention_mask=attention,
            token_type_ids=types,
            labels=labels.to(ids.device),
            next_sentence_label=next_sentence,
        )
        return out.loss
