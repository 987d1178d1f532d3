"""A stub `torch` for the CPU tests of the Python tools (tests/scripts): tensors with shapes, dtypes and distinct
data pointers only, and a global simulated clock in ms (`_tick(ms)`) that fake backends advance and the stub's CUDA
events read, so a timing loop measures each backend's simulated cost. A test writes TORCH to <tmp>/torch/__init__.py
and puts <tmp> first on sys.path."""

TORCH = '''
import contextlib, itertools
__version__ = "0.0-stub"
_ptr = itertools.count(4096, 4096)
_clock = [0.0]
def _tick(ms):
    _clock[0] += ms
bfloat16, float16, float32 = "bf16", "fp16", "f32"
class T:
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ptr = tuple(shape), dtype, next(_ptr)
    def data_ptr(self):
        return self.ptr
    def transpose(self, a, b):
        s = list(self.shape)
        s[a], s[b] = s[b], s[a]
        return T(s, self.dtype)
    def float(self):
        return self
    def __sub__(self, other):
        assert self.shape == other.shape, (self.shape, other.shape)
        return self
    def abs(self):
        return self
    def max(self):
        return self
    def item(self):
        return 0.25
def manual_seed(seed):
    pass
def randn(*shape, device=None, dtype=None):
    return T(shape, dtype)
def empty_like(x):
    return T(x.shape, x.dtype)
def empty(*shape, device=None, dtype=None):
    return T(shape, dtype)
class _Stream:
    cuda_stream = 77
class _Event:
    def __init__(self, enable_timing=False):
        self.t = None
    def record(self):
        self.t = _clock[0]
    def synchronize(self):
        pass
    def elapsed_time(self, end):
        return end.t - self.t
class cuda:
    Event = _Event
    @staticmethod
    def current_stream():
        return _Stream()
    @staticmethod
    def get_device_name():
        return "Stub GPU"
    @staticmethod
    def synchronize():
        pass
class backends:
    class cudnn:
        @staticmethod
        def version():
            return 91900
'''
