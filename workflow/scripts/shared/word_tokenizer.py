"""Snakemake adapter: the mini-world's word-level tokenizer in Hugging Face format."""
from condeval.core.logs import log_to_file
from condeval.datasets.miniworld import vocabulary
from condeval.encoders.tokenizer import save_word_tokenizer

log = log_to_file(snakemake.log[0])
words = vocabulary()
save_word_tokenizer(words, snakemake.output[0])
log.info("saved a %d-word tokenizer to %s", len(words), snakemake.output[0])
