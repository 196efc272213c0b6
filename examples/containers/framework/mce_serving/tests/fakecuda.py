"""A stand-in for torch with CUDA devices, for the GPU paths on machines without one.

``fake_torch(free_mib=[…])`` is a module object to put in ``sys.modules["torch"]`` (``mock.patch.dict``):
its ``cuda`` has ``device_count``, ``mem_get_info``, ``memory_allocated``, ``memory_reserved``,
``empty_cache``, ``set_device``, ``device`` (a context manager), ``current_device`` and
``OutOfMemoryError`` (a RuntimeError, as torch's is), and ``torch.empty(nbytes, device=…)`` allocates a
block on a device the way PyTorch's caching allocator does: freeing a block (dropping its last reference)
keeps its memory reserved, so the driver's free memory comes back only with ``empty_cache()``. Asking
for more than the device has free raises OutOfMemoryError.
"""

import threading
import types

MIB = 1 << 20


class OutOfMemoryError(RuntimeError):
    pass


class FakeCuda:
    OutOfMemoryError = OutOfMemoryError

    def __init__(self, free_mib, total_mib):
        self.total = total_mib * MIB
        self.free = [f * MIB for f in free_mib]
        self.allocated = [0] * len(free_mib)
        self.reserved = [0] * len(free_mib)
        self.local = threading.local()
        self.calls = []  # ("empty_cache", allocated-per-device at the time), ("set_device", i)

    def _dev(self, device):
        if device is None:
            return self.current_device()
        if isinstance(device, int):
            return device
        s = str(device)
        if s == "cuda":
            return self.current_device()
        if s.startswith("cuda:"):
            return int(s[5:])
        raise ValueError("not a CUDA device: %r" % (device,))

    def device_count(self):
        return len(self.free)

    def current_device(self):
        return getattr(self.local, "device", 0)

    def set_device(self, i):
        self.calls.append(("set_device", i))
        self.local.device = i

    def device(self, i):
        cuda = self

        class _Ctx:
            def __enter__(self):
                self.prev = cuda.current_device()
                cuda.local.device = i

            def __exit__(self, *exc):
                cuda.local.device = self.prev
        return _Ctx()

    def mem_get_info(self, device=None):
        return self.free[self._dev(device)], self.total

    def memory_allocated(self, device=None):
        return self.allocated[self._dev(device)]

    def memory_reserved(self, device=None):
        return self.reserved[self._dev(device)]

    def empty_cache(self):
        self.calls.append(("empty_cache", list(self.allocated)))
        for i in range(len(self.free)):
            cached = self.reserved[i] - self.allocated[i]
            self.reserved[i] -= cached
            self.free[i] += cached

    # The allocator, for Block.
    def alloc(self, n, device):
        i = self._dev(device)
        cached = self.reserved[i] - self.allocated[i]
        need = max(0, n - cached)
        if need > self.free[i]:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes on device %d (%d free)"
                                   % (n, i, self.free[i]))
        self.free[i] -= need
        self.reserved[i] += need
        self.allocated[i] += n
        return i

    def dealloc(self, n, i):
        self.allocated[i] -= n  # stays reserved: PyTorch's cache


class Block:
    """n bytes of a device's memory while referenced (a tensor, as far as memory goes)."""

    def __init__(self, cuda, n, device):
        i = cuda.alloc(n, device)
        self.cuda, self.n, self.device = cuda, n, "cuda:%d" % i

    def __del__(self):
        if hasattr(self, "device"):  # not when the allocation failed
            self.cuda.dealloc(self.n, int(self.device[5:]))


def fake_torch(free_mib, total_mib=16384):
    t = types.ModuleType("torch")
    t.cuda = FakeCuda(free_mib, total_mib)
    t.OutOfMemoryError = OutOfMemoryError
    t.empty = lambda n, device="cuda": Block(t.cuda, n, device)
    return t
