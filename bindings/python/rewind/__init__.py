"""rewind: Python bindings for librewind, an LLM inference engine whose
per-sequence state rewinds exactly to any token (prompt caching, batching
and speculative decoding are exact).

    import rewind
    with rewind.Model("model.gguf") as m:
        prompt = m.render_chat([{"role": "user", "content": "Hello"}])
        print(m.generate(prompt, max_tokens=32).text)

Pure Python over the C library with ctypes. The library is found through
REWIND_LIBRARY (a file), then pkg-config's libdir for rewind, then the
system loader; or call rewind.load_library(path) before anything else.

Threads: a Model's read-only calls (tokenize, detokenize, render_chat,
properties) run from any thread. Forward passes of one model take turns
(generate, stream, Seq.eval); while an Engine is open on a model, it runs
them all, and Engine methods may be called from any thread. Every object
is freed by close() or its with-block (__del__ is a backstop only)."""

import atexit as _atexit
import ctypes
import os

from . import _ffi
from ._options import Completion
from .engine import Engine, EngineStats, Request
from .errors import (
    BusyError,
    CancelledError,
    ContextOverflowError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    IOFailureError,
    NotFoundError,
    OutOfMemoryError,
    RangeError,
    RewindError,
    TemplateError,
    UnsupportedError,
)
from .model import Model, Stream
from .seq import Seq

__version__ = "0.25.0"

__all__ = [
    "Model", "Stream", "Engine", "EngineStats", "Request", "Seq", "Completion",
    "RewindError", "InvalidArgumentError", "OutOfMemoryError", "IOFailureError", "FormatError",
    "UnsupportedError", "NotFoundError", "RangeError", "TemplateError", "ContextOverflowError",
    "CancelledError", "BusyError", "InternalError",
    "load_library", "library_version", "architectures", "set_log_handler", "quantize", "quantize_types",
    "gguf_split", "gguf_merge",
    "set_kernels", "kernels", "set_numerics", "numerics",
    "LOG_ERROR", "LOG_WARN", "LOG_INFO", "LOG_DEBUG",
]

LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
_LEVEL_NAMES = {0: "error", 1: "warn", 2: "info", 3: "debug"}


def load_library(path=None):
    """Loads librewind from path (or by the search above); returns its
    version. Optional: the first Model loads it otherwise."""
    return _ffi.load(path).rw_version().decode()


def library_version():
    """The version of the loaded librewind ("0.25.0")."""
    return _ffi.load().rw_version().decode()


def _names(fn):
    """The strings fn(0), fn(1), ... up to the first NULL (the header's
    static lists)."""
    out = []
    while True:
        a = fn(len(out))
        if a is None:
            return out
        out.append(a.decode())


def architectures():
    """The general.architecture values this librewind loads."""
    return _names(_ffi.load().rw_architecture)


def quantize_types():
    """The type names quantize takes ("Q4_K_M", ...), llama-quantize's."""
    return _names(_ffi.load().rw_quantize_type)


def quantize(src, dst, type, pure=False, allow_requantize=False, threads=0, output_type=None,
             token_embd_type=None, imatrix=None, tensor_types=None):
    """Writes the model file src to dst with its weights converted to type
    (one of quantize_types()), the file llama-quantize writes from the same
    input, type and options: the same per-tensor types and bytes. pure:
    every converted weight of the base type; allow_requantize: convert
    weights that are already quantized (through f32); output_type,
    token_embd_type: a tensor type ("q8_0") for the output head / the token
    embedding instead of the mix's; imatrix: llama-imatrix's importance
    matrix file (llama-quantize --imatrix); tensor_types: llama-quantize's
    --tensor-type overrides, ["PATTERN=TYPE", ...] (the first pattern
    found in a tensor's name gives its type)."""
    lib = _ffi.load()
    p = lib.rw_quantize_params_default()
    p.pure, p.allow_requantize, p.n_threads = pure, allow_requantize, threads
    p.output_type = output_type.encode() if output_type else None
    p.token_embd_type = token_embd_type.encode() if token_embd_type else None
    p.imatrix = os.fsencode(imatrix) if imatrix else None
    if isinstance(tensor_types, str):
        tensor_types = [tensor_types]
    p.tensor_types = " ".join(tensor_types).encode() if tensor_types else None
    err = _ffi.rw_error()
    _ffi.check(lib.rw_quantize_file(os.fsencode(src), os.fsencode(dst), type.encode(), ctypes.byref(p),
                                    ctypes.byref(err)), err)


def gguf_split(src, out_prefix, max_tensors=0, max_bytes=0):
    """Writes the model file src as the parts out_prefix-00001-of-0000N.gguf
    .. of a split model, as llama.cpp's gguf-split writes them: a new part
    every max_tensors tensors, or before the tensor that would take a part's
    tensor data past max_bytes (give one; neither: 128 tensors a part).
    Returns N. Opening the first part (Model, ...) opens them all."""
    if not max_tensors and not max_bytes:
        max_tensors = 128
    lib = _ffi.load()
    n = ctypes.c_uint32()
    err = _ffi.rw_error()
    _ffi.check(lib.rw_model_file_split(os.fsencode(src), os.fsencode(out_prefix), max_tensors, max_bytes,
                                       ctypes.byref(n), ctypes.byref(err)), err)
    return n.value


def gguf_merge(first_part, dst):
    """Writes the split model whose first part is first_part as the one file
    dst, as gguf-split --merge writes it."""
    lib = _ffi.load()
    err = _ffi.rw_error()
    _ffi.check(lib.rw_model_file_merge(os.fsencode(first_part), os.fsencode(dst), ctypes.byref(err)), err)


def set_kernels(tier=None):
    """Sets the process's kernel tier ("ref", "avx2", "avx512", "neon";
    None: the best this CPU has) before any Model opens: BusyError if a
    model is open and the tier would change, UnsupportedError if the CPU
    lacks it. Every tier computes the same bits."""
    lib = _ffi.load()
    err = _ffi.rw_error()
    _ffi.check(lib.rw_set_kernels(tier.encode() if tier else None, ctypes.byref(err)), err)


def kernels():
    """The kernel tier in use ("avx512")."""
    return _ffi.load().rw_get_kernels().decode()


def set_numerics(numerics=None):
    """Sets the summation order ("auto", "fast" or "ggml"; None: "auto")
    before any Model opens, as set_kernels."""
    lib = _ffi.load()
    err = _ffi.rw_error()
    _ffi.check(lib.rw_set_numerics(numerics.encode() if numerics else None, ctypes.byref(err)), err)


def numerics():
    """The summation order in use ("auto", "fast" or "ggml")."""
    return _ffi.load().rw_get_numerics().decode()


_log_cb = None  # the C callback set with rw_log_set, kept alive here


def set_log_handler(fn, max_level=LOG_INFO):
    """Routes the library's log lines to fn(level, message), level one of
    "error", "warn", "info", "debug"; None silences it (the default). fn
    is called from the library's threads: keep it thread-safe and quick,
    e.g. logging.getLogger("rewind").log(...)."""
    global _log_cb
    lib = _ffi.load()
    if fn is None:
        lib.rw_log_set(_ffi.rw_log_fn(), None, 0)
        _log_cb = None
        return

    def hook(user, level, msg):
        try:
            fn(_LEVEL_NAMES.get(level, "debug"), msg.decode("utf-8", "replace"))
        except BaseException:
            pass

    cb = _ffi.rw_log_fn(hook)
    lib.rw_log_set(cb, None, max_level)
    _log_cb = cb


@_atexit.register
def _shutdown():
    # The library's threads must not call into an interpreter that is
    # going away: stop streams and engines, and the log hook.
    from . import engine, model

    for s in list(model._live_streams):
        s.close()
    for e in list(engine._live_engines):
        e.close()
    if _ffi._lib is not None and _log_cb is not None:
        _ffi._lib.rw_log_set(_ffi.rw_log_fn(), None, 0)
