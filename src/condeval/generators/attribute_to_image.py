"""The shared conditional image generator on attribute tuples (the trust-score track's generators).

The text-to-image track's machinery (an ``SD3Transformer2DModel`` denoiser on ``AutoencoderKL``
latents, rectified flow, a ``FlowMatchEulerDiscreteScheduler``) conditioned on a tuple of attribute
values instead of a caption:

- :class:`AttributeEncoder` gives each attribute its own embedding table and **sums** the requested
  values' rows, as the trust-score paper's SiT sums per-attribute embeddings into its time
  embedding. A sum composes: an unseen tuple of seen values is a new sum of trained rows, where one
  label per joint condition would leave an untrained row. The sum enters the denoiser as its pooled
  projection (added to the timestep embedding, SD3's adaLN conditioning) and, projected, as its one
  context token. Each table has one extra row, "dropped", for condition dropout.
- :class:`AttributeDiffusionPipeline` is a ``DiffusionPipeline``. It saves with ``save_pretrained``
  and loads with ``AttributeDiffusionPipeline.from_pretrained(path)``; its four components
  (transformer, vae, scheduler, attribute_encoder) are each a diffusers model or scheduler. A REPA
  generator also carries its :class:`REPAProjector` (optional component ``repa_projector``), so its
  aligned features can be read during generation (the trust-score paper's "REPA aligned_mean").
  ``__call__(attributes, num_inference_steps, generator=...)`` samples by the scheduler's Euler steps
  without guidance, as the paper samples.
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import ConfigMixin, DiffusionPipeline, ModelMixin  # ModelMixin here: diffusers' loader looks it up
from diffusers.configuration_utils import register_to_config
from diffusers.pipelines.pipeline_utils import ImagePipelineOutput

# A saved RxRx1 pipeline names its channel-by-channel vae's class; diffusers loads a component's class only from
# a module already imported, so every reader of AttributeDiffusionPipeline gets it with this one.
from condeval.core.io import integer_array
from condeval.generators import channelwise  # noqa: F401
from condeval.generators.channelwise import image_channels  # not .autoencoders: that imports Lightning

__all__ = [
    "AttributeEncoder",
    "AttributeDiffusionPipeline",
    "attribute_values",
    "ModelMixin",
    "OUTPUT_TYPES",
    "REPAProjector",
]

#: What :meth:`AttributeDiffusionPipeline.__call__` returns: PIL images, (N, H, W, C) arrays in [0, 1],
#: (N, C, H, W) tensors, or the latents.
OUTPUT_TYPES = ("pil", "np", "pt", "latent")


def attribute_values(attributes, values, name: str = "attributes", *, allow_dropped: bool = True) -> np.ndarray:
    """``attributes`` as integer (B, K) rows of values an :class:`AttributeEncoder` of ``values`` holds.

    Value ``values[k]`` is attribute k's "dropped" row: a request may drop a whole row (the
    unconditional sample, as condition dropout trains it) but not part of one, which training
    never produces; training data (``allow_dropped=False``) may not hold it at all.

    Raises
    ------
    TypeError
        Values that are not integers (0.6 is refused, not truncated onto value 0).
    ValueError
        Another width than K, or a value outside ``0..values[k] - 1`` (naming the row).
    """
    rows = integer_array(attributes, name, ndim=2)
    values = np.asarray(values)
    if rows.shape[1] != len(values):
        raise ValueError(f"{name} must be (B, {len(values)}), one value per attribute; got shape {rows.shape}")
    dropped = rows == values
    partly = dropped.any(axis=1) & ~dropped.all(axis=1) if allow_dropped else dropped.any(axis=1)
    bad = np.flatnonzero(((rows < 0) | (rows > values)).any(axis=1) | partly)
    if len(bad):
        why = (
            "may request it only for a whole row, the unconditional sample"
            if allow_dropped
            else "and training data may not hold it"
        )
        raise ValueError(
            f"{name}[{bad[0]}] = {rows[bad[0]].tolist()}: attribute k takes the values "
            f"0..values[k] - 1 (values = {values.tolist()}); values[k] itself is the dropped "
            f"condition, {why}"
        )
    return rows


class AttributeEncoder(ModelMixin, ConfigMixin):
    """Per-attribute embedding tables whose requested rows are summed.

    Parameters
    ----------
    values : sequence of int
        How many values each attribute takes (a value ``v`` is ``0 ≤ v < values[k]``; ``values[k]``
        itself means "dropped", the unconditional row).
    width : int
        Embedding width (the denoiser's ``pooled_projection_dim``).
    context_width : int
        Width of the one context token (the denoiser's ``joint_attention_dim``).
    """

    @register_to_config
    def __init__(self, values: tuple[int, ...] = (2, 2, 2, 2), width: int = 64, context_width: int = 64):
        super().__init__()
        self.tables = torch.nn.ModuleList(torch.nn.Embedding(v + 1, width) for v in values)
        self.context = torch.nn.Linear(width, context_width)

    def check_values(self, attributes, name: str = "attributes", *, allow_dropped: bool = True) -> np.ndarray:
        """:func:`attribute_values` against these tables."""
        return attribute_values(attributes, self.config.values, name, allow_dropped=allow_dropped)

    def dropped(self, attributes: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``attributes`` with every attribute of the rows in ``mask`` (B,) set to its "dropped" row."""
        dropped = torch.tensor(self.config.values, device=attributes.device)
        return torch.where(mask[:, None], dropped[None, :], attributes)

    def forward(self, attributes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(context (B, 1, context_width), pooled (B, width)) of integer ``attributes`` (B, K)."""
        if attributes.ndim != 2 or attributes.shape[1] != len(self.tables):
            raise ValueError(f"attributes must be (B, {len(self.tables)}); got {tuple(attributes.shape)}")
        limits = torch.tensor(self.config.values, device=attributes.device)
        if bool(((attributes < 0) | (attributes > limits)).any()):
            raise ValueError(f"an attribute value is outside 0..values (values={list(self.config.values)})")
        pooled = sum(table(attributes[:, k]) for k, table in enumerate(self.tables))
        return self.context(pooled)[:, None, :], pooled


class REPAProjector(ModelMixin, ConfigMixin):
    """REPA's projector: the denoiser's block-``depth`` image tokens to the extractor's patch-feature space.

    Three linear layers with SiLU between them (REPA's MLP), applied per token. Saved with the
    generator it was trained with, so that generator's aligned features are readable without its
    training run.

    Parameters
    ----------
    width : int
        The denoiser's token width.
    hidden : int
        The MLP's hidden width.
    target_dim : int
        The extractor's feature width.
    depth : int
        The denoiser block (1-based) whose image tokens it reads.
    extractor : str
        Name of the extractor whose patch features it was aligned to (``dinov3``, ``siglip``).
    """

    @register_to_config
    def __init__(self, width: int = 64, hidden: int = 128, target_dim: int = 64, depth: int = 1, extractor: str = ""):
        super().__init__()
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, hidden),
            torch.nn.SiLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.SiLU(),
            torch.nn.Linear(hidden, target_dim),
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Projected tokens (B, T, target_dim) of image tokens (B, T, width)."""
        return self.mlp(tokens)


class AttributeDiffusionPipeline(DiffusionPipeline):
    """Attribute tuples to images: an ``SD3Transformer2DModel`` on ``AutoencoderKL`` latents, Euler sampling."""

    model_cpu_offload_seq = "attribute_encoder->transformer->vae"
    _optional_components = ["repa_projector"]

    def __init__(
        self,
        transformer,
        vae,
        scheduler,
        attribute_encoder: AttributeEncoder,
        repa_projector: REPAProjector | None = None,
    ):
        super().__init__()
        self.register_modules(
            transformer=transformer,
            vae=vae,
            scheduler=scheduler,
            attribute_encoder=attribute_encoder,
            repa_projector=repa_projector,
        )

    @property
    def interrupt(self) -> bool:
        """Set by a step-end callback (``pipe._interrupt = True``) to stop denoising, as diffusers' pipelines."""
        return getattr(self, "_interrupt", False)

    @property
    def num_timesteps(self) -> int:
        """The denoising steps of the current (or last) call, as diffusers' pipelines."""
        return self._num_timesteps

    @torch.no_grad()
    def __call__(
        self,
        attributes,
        num_inference_steps: int = 50,
        generator=None,
        output_type: str = "pil",
        return_dict: bool = True,
        callback_on_step_end=None,
        callback_on_step_end_tensor_inputs=("latents",),
    ):
        """Sample one image per row of ``attributes`` (B, K) ints.

        Parameters
        ----------
        attributes : array-like of int, shape (B, K)
        num_inference_steps : int
        generator : torch.Generator or list of them, optional
            One per row makes each image independent of its batch.
        output_type : {"pil", "np", "pt", "latent"}
        return_dict : bool
        callback_on_step_end : callable, optional
            ``callback(pipe, step, timestep, callback_kwargs) -> dict``, after each denoising step, as in
            diffusers' pipelines: ``callback_kwargs`` holds ``callback_on_step_end_tensor_inputs``
            (``latents``, ``attributes``); returned ``latents`` and ``attributes`` replace the current
            ones. Returning fewer rows of both drops samples from the batch: they are neither denoised
            further nor decoded (:class:`condeval.trust.TrustAbstention` with ``drop=True``).
        callback_on_step_end_tensor_inputs : sequence of str

        Returns
        -------
        ImagePipelineOutput or tuple
        """
        from diffusers.utils.torch_utils import randn_tensor

        device = self._execution_device
        if output_type not in OUTPUT_TYPES:
            raise ValueError(f"output_type must be one of {OUTPUT_TYPES}; got {output_type!r}")
        channels = image_channels(self.vae)
        if output_type == "pil" and channels not in (1, 3):
            raise ValueError(
                f"output_type 'pil' holds 1 or 3 channels; this generator draws {channels}: "
                "ask for output_type='np' (N, H, W, C) or 'pt'"
            )
        attributes = torch.as_tensor(self.attribute_encoder.check_values(attributes), device=device)
        context, pooled = self.attribute_encoder(attributes)
        config = self.transformer.config
        shape = (len(attributes), config.in_channels, config.sample_size, config.sample_size)
        latents = randn_tensor(shape, generator=generator, device=device, dtype=context.dtype)
        self.scheduler.set_timesteps(num_inference_steps, device=device)
        self._interrupt, self._num_timesteps = False, len(self.scheduler.timesteps)
        for step, t in enumerate(self.progress_bar(self.scheduler.timesteps)):
            if self.interrupt:
                break
            velocity = self.transformer(
                hidden_states=latents,
                timestep=t.expand(len(latents)),
                encoder_hidden_states=context,
                pooled_projections=pooled,
            ).sample
            latents = self.scheduler.step(velocity, t, latents).prev_sample
            if callback_on_step_end is not None:
                returned = callback_on_step_end(
                    self,
                    step,
                    t,
                    _tensor_inputs({"latents": latents, "attributes": attributes}, callback_on_step_end_tensor_inputs),
                )
                latents = returned.get("latents", latents)
                if "attributes" in returned:
                    attributes = returned["attributes"]
                    context, pooled = self.attribute_encoder(attributes)
                if len(latents) != len(attributes):
                    raise ValueError(
                        f"the step-end callback left {len(latents)} latents for {len(attributes)} "
                        "attribute rows: return both to drop samples"
                    )
                if not len(latents):
                    break
        if output_type == "latent":
            images = latents
        elif not len(latents):  # every sample dropped: diffusers' decoders refuse an empty batch
            images = _postprocess(self._empty_images(latents), output_type)
        else:
            shift = self.vae.config.shift_factor or 0.0
            decoded = self.vae.decode(latents / self.vae.config.scaling_factor + shift).sample
            images = _postprocess(decoded, output_type)
        self.maybe_free_model_hooks()
        return ImagePipelineOutput(images=images) if return_dict else (images,)

    def _empty_images(self, latents: torch.Tensor) -> torch.Tensor:
        """No decoded images, (0, C, H, W) at the decoder's output size (read off one decoded zero latent:
        a channelwise autoencoder's config holds no RGB decoder's sizes)."""
        probe = self.vae.decode(latents.new_zeros((1, *latents.shape[1:]))).sample
        return probe.new_zeros((0, *probe.shape[1:]))


def _tensor_inputs(tensors: dict, names) -> dict:
    """The step-end callback's ``callback_kwargs``: the named ``tensors``; an unknown name is refused."""
    unknown = sorted(set(names) - set(tensors))
    if unknown:
        raise ValueError(f"callback_on_step_end_tensor_inputs must be among {sorted(tensors)}; got {unknown}")
    return {name: tensors[name] for name in names}


def _postprocess(decoded: torch.Tensor, output_type: str):
    from diffusers.image_processor import VaeImageProcessor

    return VaeImageProcessor(vae_scale_factor=1).postprocess(decoded, output_type=output_type)
