"""Snakemake adapter: the configured RGB autoencoder, wrapped to take each of the dataset's channels as grey."""

from diffusers import AutoencoderKL

from condeval.core.io import atomic_directory, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.generators.channelwise import ChannelwiseAutoencoderKL
from condeval.trust.data import image_channels

log = log_to_file(snakemake.log[0])
channels = image_channels(snakemake.wildcards.dataset)
wrapper = ChannelwiseAutoencoderKL.wrapping(AutoencoderKL.from_pretrained(snakemake.input.rgb), channels)
with atomic_directory(snakemake.output.model) as folder:
    wrapper.save_pretrained(folder)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info(
    "%s: each of %d channels through %s as grey, %d latent channels",
    snakemake.wildcards.dataset,
    channels,
    snakemake.input.rgb,
    wrapper.latent_channels,
)
