"""Where a job computes: the CPU, or the GPU its scheduler granted.

Kept apart from :mod:`condeval.core.training` so that jobs which only run models (feature
extraction, generation, attention-mask sampling) do not import Lightning, a few seconds of
start-up per job on the 2-core machine.
"""

from __future__ import annotations


def device_of(*arrays):
    """The torch device of the first tensor among ``arrays``; the CPU when none is a tensor.

    Parameters
    ----------
    *arrays : Tensor, ndarray or None
        Inputs of a computation that may run on a GPU.

    Returns
    -------
    torch.device
    """
    import torch

    return next((a.device for a in arrays if isinstance(a, torch.Tensor)), torch.device("cpu"))


def select_accelerator(requested: str = "auto") -> str:
    """Lightning accelerator name: ``"gpu"`` if CUDA is available else ``"cpu"``.

    Parameters
    ----------
    requested : {"auto", "cpu", "gpu", "cuda"}
        ``"auto"`` picks; an explicit ``"gpu"``/``"cuda"`` without CUDA raises.
    """
    import torch  # here, so that the Snakefile can read JOB_ENVIRONMENT without torch

    requested = requested.lower()
    if requested == "auto":
        return "gpu" if torch.cuda.is_available() else "cpu"
    if requested == "cpu":
        return "cpu"
    if requested in ("gpu", "cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("accelerator 'gpu' requested but torch.cuda.is_available() is False")
        return "gpu"
    raise ValueError(f"unknown accelerator {requested!r}; expected 'auto', 'cpu' or 'gpu'")


def check_device(device, name: str = "device"):
    """``device`` as a ``torch.device``, refused by ``name`` when it asks for CUDA that torch does not see
    (rather than torch's "Torch not compiled with CUDA enabled" deep inside a model's ``.to``)."""
    import torch

    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{name}={device!r} is not a torch device ({error})") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={device!r}, but torch sees no CUDA device here")
    return resolved


#: The precisions a config may ask a model to run in; ``auto`` is bfloat16 on a GPU, float32 on a CPU.
DTYPES = ("auto", "bfloat16", "float16", "float32")


def torch_dtype(name: str | None, device=None):
    """The ``torch.dtype`` a model runs in on ``device``, from a config's ``dtype`` value.

    Parameters
    ----------
    name : {"auto", "bfloat16", "float16", "float32"} or None
        ``None`` and ``"auto"`` give bfloat16 on CUDA (half the memory of float32, the range of it)
        and float32 elsewhere; the others are taken as they are, on any device.
    device : str or torch.device, optional
        Where the model runs (default: the CPU).
    """
    import torch

    name = name or "auto"
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is none of {DTYPES}")
    if name == "auto":
        return torch.bfloat16 if torch.device(device or "cpu").type == "cuda" else torch.float32
    return getattr(torch, name)


def weight_dtypes(model) -> list[str]:
    """The precisions ``model``'s weights are held in (a module, or a pipeline's modules), e.g. ``["bfloat16"]``."""
    import torch

    modules = [model] if isinstance(model, torch.nn.Module) else list(getattr(model, "components", {}).values())
    parameters = (p for m in modules if isinstance(m, torch.nn.Module) for p in m.parameters())
    return sorted({str(parameter.dtype).removeprefix("torch.") for parameter in parameters})


def log_precision(model, source) -> list[str]:
    """Log, naming ``source``, the precisions ``model``'s weights were loaded in (a job's log shows what the
    config's ``dtype`` gave); returns them."""
    import logging

    dtypes = weight_dtypes(model)
    logging.getLogger(__name__).info("%s: weights in %s", source, ", ".join(dtypes))
    return dtypes


def accelerator_for_gpus(gpus: int) -> str:
    """Lightning accelerator of a workflow job granted ``gpus`` GPUs (its ``gpu`` resource).

    Zero keeps the CPU; one or more asks for CUDA and raises if the job landed on a node
    without it, rather than silently training on the CPU.
    """
    return select_accelerator("gpu" if int(gpus) > 0 else "cpu")


def device_for_gpus(gpus: int) -> str | None:
    """Torch device of a workflow job granted ``gpus`` GPUs: ``"cuda"``, or ``None`` for the CPU path."""
    return "cuda" if accelerator_for_gpus(gpus) == "gpu" else None


#: Environment the workflow gives its jobs. glibc hands every freed block over 32 MB back to the
#: system, so a job that allocates large activations at every step (the latent DQR's (batch,
#: directions, width) tensors: 67 MB at 256 x 1024 x 64) faults the same pages in again each
#: time; keeping such blocks in the heap makes that training step about 2x faster
#: (``benchmarks/bench_allocator.py``). glibc reads these only when a process starts.
JOB_ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": str(256 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
}
