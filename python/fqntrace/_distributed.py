"""Tells the trace which process group the program runs in: the session starts before the
program calls init_process_group, so the backend (and, for a process started without RANK such
as an mp.spawn child, its rank and world size and its files' names) are filled in when it does."""

import functools

from fqntrace import _native

_watching = False


def _report_backend():
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            _native.load().set_process_group(
                str(dist.get_backend()), dist.get_rank(), dist.get_world_size()
            )
    except Exception:  # never break the program over a header field
        pass


def watch_process_group():
    """Wraps torch.distributed.init_process_group once so the backend reaches the trace."""
    global _watching
    if _watching:
        return
    import torch.distributed as dist

    if not dist.is_available():
        return
    _watching = True
    _report_backend()  # already initialized (e.g. fqntrace.profile inside a distributed job)
    c10d = dist.distributed_c10d
    original = c10d.init_process_group

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        result = original(*args, **kwargs)
        _report_backend()
        return result

    c10d.init_process_group = init_process_group
    dist.init_process_group = init_process_group
