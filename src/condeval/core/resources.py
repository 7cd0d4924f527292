"""What a GPU job asks of a cluster, computed from the work its config gives it.

A rule's work (:class:`GpuWork`: the weights it loads, the parameters it trains, its FLOPs and its
largest batch's activations) is stated by its track from the config (model, dtype, image size,
batch, items per shard, steps); :func:`need` turns it into the resources the job requests on one
card (:class:`Card`): host memory, GPU memory and a runtime, and its **floor**, the hours its FLOPs
take at :data:`EFFICIENCY` of the card's bf16 peak. No GPU measured these rates: the runtime asked is
the floor times :data:`OVERHEAD` plus the time to read the weights, an estimate that says so
(``benchmarks/bench_paper_gpu.py`` measures the real rates on a card).

FLOPs follow the usual transformer count: a forward pass costs 2 x parameters x tokens, a training
step three forwards (:func:`forward_flops`, :func:`training_flops`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BYTES_PER_PARAMETER",
    "CARDS",
    "EFFICIENCY",
    "OVERHEAD",
    "PART_RESERVE",
    "Card",
    "GpuWork",
    "Need",
    "forward_flops",
    "training_flops",
    "need",
    "folder_parameters",
    "needs_beyond",
    "encoding_work",
    "tower_parameters",
    "vae_decode_flops",
    "unet_forward_flops",
    "image_bytes",
    "optimizer_steps",
    "mlp_parameters",
    "mlp_training_work",
    "pgd_work",
    "STEP_S",
]

#: Bytes a weight takes on the card in each sampling precision.
BYTES_PER_PARAMETER = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": 2}
#: Bytes per trained parameter: fp32 weights and gradients, Adam's two moments.
TRAINING_BYTES_PER_PARAMETER = 16
#: The floor's share of the card's dense bf16 peak.
EFFICIENCY = 0.4
#: Requested runtime over the floor (data loading, decoding, small last batches; no GPU measured it).
OVERHEAD = 3.0
#: Reading weights from a shared filesystem, bytes per second.
LOAD_BYTES_PER_S = 200e6
#: Host memory besides the weights: interpreter, torch and CUDA libraries, loader workers, a batch.
HOST_BASE_MB = 4000
#: GPU memory besides the work's: the CUDA context and cuBLAS workspaces.
CONTEXT_MB = 1500
#: Headroom on the GPU memory the work computes (allocator fragmentation).
GPU_HEADROOM = 1.2
#: The shortest runtime a job asks, minutes (start-up, imports, a first batch).
MIN_RUNTIME_MIN = 10
#: Seconds a step of a small model takes on a GPU whatever its FLOPs: kernel launches, Python and the loader bound
#: MLPs of thousands to millions of parameters, not the card's peak (an estimate no GPU has measured).
STEP_S = 0.01
#: Share of a split job's time limit kept for loading before training and saving after it.
PART_RESERVE = 0.1
MB = 2**20


@dataclass(frozen=True)
class Card:
    """One GPU as a cluster grants it: its memory and its dense bf16 peak (TF32 is half of it)."""

    name: str
    memory_mb: int
    bf16_tflops: float


#: The cards a site may name (``cluster.gpu``): memory as nvidia-smi reports it, dense bf16 peaks as NVIDIA states them.
CARDS = {
    card.name: card
    for card in (
        Card("A100-40GB", 40_960, 312.0),
        Card("A100-80GB", 81_920, 312.0),
        Card("H100-80GB", 81_559, 989.0),
        Card("H200-141GB", 143_771, 989.0),
    )
}


@dataclass(frozen=True)
class GpuWork:
    """One job's GPU work.

    Attributes
    ----------
    loaded_parameters : float
        Weights held on the card (0 when unknown: a model this run has not made yet).
    flops : float
        The job's FLOPs in all.
    dtype : str
        The precision the weights and matmuls run in (``auto`` is bfloat16 on a GPU).
    trained_parameters : float
        Parameters with gradients and optimiser state.
    activation_bytes : float
        The largest batch's live activations.
    basis : str
        Where the FLOPs come from, for the bill.
    steps : float
        Optimiser or PGD steps, each costing :data:`STEP_S` whatever its FLOPs (small models are bound by it).
    written_bytes : float
        What the job's outputs keep on the shared filesystem (its images, its model); 0 where small.
    scratch_bytes : float
        What it holds beside its outputs while it runs and removes when done (a training row cache).
    resumable : bool
        The work checkpoints as it goes and a later job continues it (training that stops at its
        deadline, :func:`condeval.core.training.job_deadline`): longer than a partition's time limit,
        it is split over several jobs instead of refused.
    """

    loaded_parameters: float
    flops: float
    dtype: str = "auto"
    trained_parameters: float = 0.0
    activation_bytes: float = 0.0
    basis: str = ""
    steps: float = 0.0
    written_bytes: float = 0.0
    scratch_bytes: float = 0.0
    resumable: bool = False


@dataclass(frozen=True)
class Need:
    """What one job asks: host memory and GPU memory (MB), runtime (minutes, each of its ``parts``), its
    floor (hours, all parts), and the disk its outputs keep and its scratch holds (MB)."""

    mem_mb: int
    gpu_mem_mb: int
    runtime: int
    floor_hours: float
    parts: int = 1
    written_mb: int = 0
    scratch_mb: int = 0

    def resources(self) -> dict[str, int]:
        """As Snakemake resources: ``mem_mb``, ``gpu_mem_mb``, ``runtime``, ``parts`` (jobs the work is
        split over, each resuming the last), and for the bill ``gpu_floor_min`` (the floor), ``written_mb``
        and ``scratch_mb`` (shared-filesystem disk; not ``disk_mb``, a node's local scratch)."""
        floor_min = math.ceil(self.floor_hours * 60)
        return {
            "mem_mb": self.mem_mb,
            "gpu_mem_mb": self.gpu_mem_mb,
            "runtime": self.runtime,
            "parts": self.parts,
            "gpu_floor_min": floor_min,
            "written_mb": self.written_mb,
            "scratch_mb": self.scratch_mb,
        }


def forward_flops(parameters: float, tokens: float) -> float:
    """FLOPs of one forward pass of a transformer of ``parameters`` over ``tokens`` tokens."""
    return 2.0 * parameters * tokens


def training_flops(parameters: float, tokens: float) -> float:
    """FLOPs of one training step (forward and backward) over ``tokens`` tokens."""
    return 3.0 * forward_flops(parameters, tokens)


def _peak_flops(card: Card, dtype: str) -> float:
    half = BYTES_PER_PARAMETER.get(dtype, 4) == 2
    return card.bf16_tflops * 1e12 * (1.0 if half else 0.5)


def need(work: GpuWork, card: Card, runtime_limit_min: int | None = None) -> Need:
    """The resources one job of ``work`` asks on ``card``.

    Parameters
    ----------
    work : GpuWork
        The job's work.
    card : Card
        The GPU the site grants.
    runtime_limit_min : int, optional
        The partition's time limit: resumable work longer than it is split into parts that each ask
        the limit and train for all but :data:`PART_RESERVE` of it.

    Returns
    -------
    Need
        Host memory (the weights pass through it on load), GPU memory (weights, training state,
        activations, context, with headroom), runtime (the FLOPs' time at the work's precision plus its
        steps at :data:`STEP_S`, times :data:`OVERHEAD`, plus reading the weights), the parts it is split into, and the floor in
        hours at bf16.
    """
    if work.dtype not in BYTES_PER_PARAMETER:
        raise ValueError(f"dtype {work.dtype!r} is not one of {sorted(BYTES_PER_PARAMETER)}")
    weight_bytes = work.loaded_parameters * BYTES_PER_PARAMETER[work.dtype]
    state_bytes = work.trained_parameters * TRAINING_BYTES_PER_PARAMETER
    gpu_bytes = (weight_bytes + state_bytes + work.activation_bytes) * GPU_HEADROOM
    compute_s = work.flops / (EFFICIENCY * _peak_flops(card, work.dtype)) + work.steps * STEP_S
    runtime = max(MIN_RUNTIME_MIN, math.ceil((OVERHEAD * compute_s + weight_bytes / LOAD_BYTES_PER_S) / 60))
    parts = 1
    if work.resumable and runtime_limit_min is not None and runtime > runtime_limit_min:
        parts = math.ceil(runtime / (runtime_limit_min * (1.0 - PART_RESERVE)))
        runtime = int(runtime_limit_min)
    return Need(
        mem_mb=HOST_BASE_MB + math.ceil(max(weight_bytes, state_bytes) / MB),
        gpu_mem_mb=CONTEXT_MB + math.ceil(gpu_bytes / MB),
        runtime=runtime,
        floor_hours=work.flops / (EFFICIENCY * card.bf16_tflops * 1e12) / 3600,
        parts=parts,
        written_mb=math.ceil(work.written_bytes / MB),
        scratch_mb=math.ceil(work.scratch_bytes / MB),
    )


def folder_parameters(folder: str | Path) -> int | None:
    """The parameters a model folder's ``*.safetensors`` hold (from their headers), None without any.

    The weights are not read: ``safe_open`` reads each file's header only.
    """
    from safetensors import safe_open

    files = sorted(Path(folder).rglob("*.safetensors")) if Path(folder).is_dir() else []
    if not files:
        return None
    total = 0
    for file in files:
        with safe_open(file, framework="numpy") as weights:
            total += sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
    return total


def needs_beyond(rule: str, requested: Need | dict, card: Card, runtime_limit_min: int) -> list[str]:
    """Why one job cannot run on ``card`` within the partition's limit: one line per excess, none if it fits.

    Parameters
    ----------
    rule : str
        The job's rule, named in each line.
    requested : Need or dict
        Its ``gpu_mem_mb`` and ``runtime`` (minutes).
    card : Card
        The site's GPU.
    runtime_limit_min : int
        The partition's time limit.
    """
    values = requested if isinstance(requested, dict) else vars(requested)
    lines = []
    gpu_mem_mb, runtime = values.get("gpu_mem_mb"), values.get("runtime")
    if isinstance(gpu_mem_mb, int) and gpu_mem_mb > card.memory_mb:
        lines.append(f"{rule} needs {gpu_mem_mb:,} MB of GPU memory; a {card.name} has {card.memory_mb:,} MB")
    if isinstance(runtime, int) and runtime > runtime_limit_min:
        lines.append(f"{rule} asks {runtime:,} min; the partition's limit is {runtime_limit_min:,} min")
    return lines


#: Live bytes per token of an inference forward pass (hidden 1-3k wide, bf16, a few tensors alive at once).
INFERENCE_BYTES_PER_TOKEN = 32 * 1024
#: Live bytes per token, layer and hidden unit of a training step in bf16 (Korthikanti et al.'s 34 s b h per layer).
TRAINING_BYTES_PER_ACTIVATION = 34
#: FLOPs of a Stable Diffusion-style VAE decoding one 512 x 512 image (the decoder's convolutions; scales with pixels).
VAE_DECODE_FLOPS_512 = 2.5e12
#: A UNet's FLOPs per forward over its parameters times latent pixels (SD 1.5's 860M UNet: about 0.8 TFLOPs at 64 x 64).
UNET_FLOPS_PER_PARAMETER_PIXEL = 0.8e12 / (0.86e9 * 64 * 64)


def tower_parameters(parameters: dict, tower: str) -> float:
    """The parameters one tower of a two-tower model runs (``image`` or ``text``): the stated ``vision``
    count and the rest; the whole model when no split is stated (an upper bound)."""
    if "vision" not in parameters:
        return parameters["loaded"]
    return parameters["vision"] if tower == "image" else parameters["loaded"] - parameters["vision"]


def encoding_work(
    encoders: list[tuple[dict | None, str, int]], items: int, batch_size: int, dtype: str = "auto"
) -> GpuWork:
    """A feature job's GPU work: ``items`` items through each encoder, given as (parameters, tower, tokens per item).

    An encoder of unknown parameters (None: one this run trains) adds no weight.
    """
    known = [(parameters, tower, tokens) for parameters, tower, tokens in encoders if parameters]
    flops = items * sum(
        forward_flops(tower_parameters(parameters, tower), tokens) for parameters, tower, tokens in known
    )
    widest = max((tokens for *_, tokens in known), default=0)
    return GpuWork(
        sum(parameters["loaded"] for parameters, *_ in known),
        flops,
        dtype,
        activation_bytes=batch_size * widest * INFERENCE_BYTES_PER_TOKEN,
        basis=f"{items:,} items x {len(known)} encoder(s)",
    )


def image_bytes(side: int, channels: int = 3) -> int:
    """Disk one stored ``side`` x ``side`` 8-bit image may take: its raw pixels (a PNG of a photograph
    takes about half; of noise, all)."""
    return side * side * channels


def vae_decode_flops(image_size: int) -> float:
    """FLOPs of decoding one ``image_size`` square image through a Stable Diffusion-style VAE."""
    return VAE_DECODE_FLOPS_512 * (image_size / 512) ** 2


def unet_forward_flops(parameters: float, latent_side: int) -> float:
    """FLOPs of one forward pass of a latent-diffusion UNet over a ``latent_side`` square latent."""
    return UNET_FLOPS_PER_PARAMETER_PIXEL * parameters * latent_side**2


def mlp_parameters(widths) -> int:
    """Weights and biases of a chain of linear layers through ``widths`` (input, hidden..., output)."""
    widths = [int(width) for width in widths]
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def optimizer_steps(rows: int, batch_size: int, epochs: int) -> int:
    """Optimiser steps of ``epochs`` passes over ``rows`` at ``batch_size`` (a last, partial batch is a step):
    what a learning-rate schedule spans and what a small model's job costs."""
    return epochs * -(-rows // batch_size)


def mlp_training_work(rows: int, epochs: int, batch_size: int, parameters: float, *, basis: str = "") -> GpuWork:
    """Training a small model of ``parameters`` on ``rows`` for ``epochs`` (an upper bound: early stopping
    may end it sooner): one step per batch, each row a single token, in float32."""
    steps = optimizer_steps(rows, batch_size, epochs)
    return GpuWork(
        parameters,
        epochs * rows * training_flops(parameters, 1),
        "float32",
        trained_parameters=parameters,
        basis=basis or f"{epochs} epochs of {rows:,} rows",
        steps=steps,
    )


def pgd_work(points: int, starts: int, steps: int, parameters: float, batch_size: int = 1024) -> GpuWork:
    """A multi-start projected gradient search (CReL's worst case): ``points`` rows of ``batch_size`` at a
    time, each from ``starts`` starting points for ``steps`` steps, through a model of ``parameters``."""
    batches = math.ceil(points / batch_size)
    return GpuWork(
        parameters,
        steps * points * starts * training_flops(parameters, 1),
        "float32",
        basis=f"{points:,} points x {starts} starts x {steps} steps",
        steps=batches * steps,
    )
