"""GPUs, used as SageMaker's model servers use them (PyTorch's CUDA devices; nothing here acts on a CPU-only host).

* Device choice. ``context.system_properties["gpu_id"]`` is a device index: in single-model mode each worker
  process gets ``worker index mod device count`` (round-robin, as SageMaker's model servers assign it); in
  multi-model mode each model gets the device with the most free memory (``torch.cuda.mem_get_info``) when
  it is loaded. Without a CUDA device it is None, as before.
* Out of memory. ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError``, a RuntimeError), or a
  RuntimeError saying "CUDA out of memory", raised by a load or an invocation answers 507, after the
  allocator's cache is emptied, so that a multi-model manager frees room (unloads a model) and retries.
* Release. PyTorch's caching allocator keeps freed memory reserved until ``torch.cuda.empty_cache()``: the
  driver (NVML, and so mce) sees none of it come back without that call. ``release`` collects garbage and
  then empties the cache; call it once the last reference to the model is gone.
* Measure. ``snapshot`` reads the allocator's view (``memory_allocated``, ``memory_reserved``) and the
  driver's (``mem_get_info``) of one device; a model's footprint is the difference around its load.

torch is imported only for the PyTorch framework; for the others it is used only when the user's code has
imported it already (the scikit-learn image has no torch). ``device_count`` is asked, never
``is_available``: in recent PyTorch the first reads NVML and leaves CUDA uninitialised, so a process that
forks workers afterwards may still do so.
"""

import collections
import contextlib
import gc
import logging
import sys

log = logging.getLogger("mce_serving")

def torch_module(load=True):
    """The torch module: imported when load is true, else only when something imported it already; or None."""
    t = sys.modules.get("torch")
    if t is None and load:
        try:
            import torch as t
        except ImportError:
            return None
    return t


def cuda(load=True):
    """torch.cuda when torch is there and sees at least one CUDA device, else None."""
    t = torch_module(load)
    c = getattr(t, "cuda", None) if t is not None else None
    if c is None:
        return None
    try:
        return c if c.device_count() > 0 else None
    except Exception:  # a torch without CUDA support, a broken driver: CPU only
        return None


def device_count(load=True):
    c = cuda(load)
    return c.device_count() if c is not None else 0


def for_worker(index, load=True):
    """The device of worker process number index (0-based): index mod the device count; None without one."""
    n = device_count(load)
    return index % n if n else None


def most_free(load=True):
    """The device with the most free memory in the driver's view (the lowest index on a tie); None without one."""
    c = cuda(load)
    if c is None:
        return None
    free = [c.mem_get_info(i)[0] for i in range(c.device_count())]
    return max(range(len(free)), key=lambda i: (free[i], -i))


def use(device):
    """A context manager making device the current CUDA device of this thread (so that "cuda" means it);
    a no-op for None."""
    c = cuda(load=False)
    if device is None or c is None:
        return contextlib.nullcontext()
    return c.device(device)


Snapshot = collections.namedtuple("Snapshot", "allocated reserved free total")


def snapshot(device):
    """The memory of device: the caching allocator's allocated and reserved bytes (this process) and the
    driver's free and total bytes (every process). None for no device."""
    c = cuda(load=False)
    if device is None or c is None:
        return None
    free, total = c.mem_get_info(device)
    return Snapshot(c.memory_allocated(device), c.memory_reserved(device), free, total)


Footprint = collections.namedtuple("Footprint", "device bytes allocated reserved driver")


def footprint(device, before, after):
    """What a load took on device, from the snapshots around it: allocator allocated and reserved deltas and
    the driver's used delta; bytes, the one counted against the budget, is the largest of them (at least 0)."""
    if before is None or after is None:
        return None
    allocated = after.allocated - before.allocated
    reserved = after.reserved - before.reserved
    driver = before.free - after.free
    return Footprint(device, max(allocated, reserved, driver, 0), allocated, reserved, driver)


def release():
    """Collects garbage, then gives the allocator's cached blocks back to the driver. Call it after the last
    reference to what is freed is dropped (an exception being handled keeps its frames' tensors alive)."""
    gc.collect()
    c = cuda(load=False)
    if c is not None:
        try:
            c.empty_cache()
        except Exception:
            log.exception("torch.cuda.empty_cache failed")


def _oom_classes():
    t = torch_module(load=False)
    if t is None:
        return ()
    found = []
    for owner in (t, getattr(t, "cuda", None)):
        cls = getattr(owner, "OutOfMemoryError", None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def is_oom(exc):
    """Whether exc, or an exception it was raised from (``raise … from``), is a CUDA out-of-memory error."""
    classes = _oom_classes()
    for _ in range(8):
        if exc is None:
            return False
        if classes and isinstance(exc, classes):
            return True
        if isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc):
            return True
        exc = exc.__cause__
    return False


def describe(snap):
    if snap is None:
        return "-"
    return "allocator allocated %d, reserved %d bytes; driver free %d of %d bytes" % snap
