"""Snakemake adapter: the mini-world's word-level tokenizer in Hugging Face format."""

from condeval.core.io import write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.datasets.miniworld import vocabulary
from condeval.encoders.tokenizer import save_word_tokenizer

log = log_to_file(snakemake.log[0])
words = vocabulary()
save_word_tokenizer(words, snakemake.output.folder)
write_folder_manifest(snakemake.output.folder, snakemake.output.manifest)
log.info("saved a %d-word tokenizer to %s", len(words), snakemake.output.folder)
