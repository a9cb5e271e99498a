"""Tells the trace whether the process used a GPU, so that the summary never passes host time off
as GPU time: on a GPU an op's time is its launch, and the waiting piles up wherever the program
synchronizes. torch initializes CUDA lazily, on first use; a call queued with torch's own lazy
initialization runs then (or at once when it already ran), once per process, never per op. A
process that never initializes CUDA (the CPU build, or a GPU job that stayed on the CPU) says so."""

from fqntrace import _native

_watching = False


def watch_device_use():
    """From now on every tail fqntrace writes says whether a GPU was initialized, and how many."""
    global _watching
    if _watching:
        return
    import torch

    binding = _native.load()
    binding.device_use(None, 0)
    _watching = True

    def initialized():
        try:
            kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
            binding.device_use(kind, int(torch.cuda.device_count()))
        except Exception:  # never into torch's CUDA initialization: the tail only says less
            pass

    torch.cuda._lazy_call(initialized)
