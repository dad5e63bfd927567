"""Seq: one sequence driven by hand. Evaluate tokens and read the logits,
rewind exactly to any length, save and load state files."""

import array
import ctypes
import os

from . import _ffi


class Seq:
    """A sequence of up to n_ctx positions (0: 4096) on a model (rw_seq_new);
    kv_f32 keeps the KV cache in f32 (llama.cpp's goldens use it).

    Use one Seq from one thread at a time. Sequences of one model may live
    in several threads, but their eval() and rewind() calls take turns (they
    share the model's threads), and eval() raises BusyError while an Engine
    is open on the model. Close it with close() or a with-block (the model
    closes it too)."""

    _close_order = 2

    def __init__(self, model, n_ctx=0, kv_f32=False):
        lib = model._lib
        h = ctypes.c_void_p()
        err = _ffi.rw_error()
        st = lib.rw_seq_new(model._handle(), n_ctx, kv_f32, ctypes.byref(h), ctypes.byref(err))
        _ffi.check(st, err)
        self._lib = lib
        self._h = h.value
        self.model = model
        self.n_vocab = model.n_vocab
        model._children.add(self)

    def close(self):
        h = getattr(self, "_h", None)
        if h is None:
            return
        self._h = None
        with self.model._forward:  # not while one of its calls runs in another thread
            self._lib.rw_seq_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            try:
                self.close()
            except Exception:  # at interpreter exit modules may be gone already
                pass

    def _handle(self):
        if self._h is None:
            raise ValueError("the sequence is closed")
        return self._h

    def eval(self, ids, logits=True):
        """Runs token ids through the model at the end of the sequence.
        Returns the last token's n_vocab logits as array('f') (or None with
        logits=False)."""
        ids = list(ids)
        if not ids:
            raise ValueError("eval needs at least one token")
        arr = (ctypes.c_int32 * len(ids))(*ids)
        out = array.array("f", bytes(4 * self.n_vocab)) if logits else None
        ptr = ctypes.cast(out.buffer_info()[0], _ffi.c_float_p) if logits else None
        err = _ffi.rw_error()
        with self.model._forward_pass("Seq.eval"):
            st = self._lib.rw_seq_eval(self._handle(), arr, len(ids), ptr, ctypes.byref(err))
        _ffi.check(st, err)
        return out

    def greedy(self, logits, max_tokens, stop_at_eog=True):
        """Generates greedily, token by token, from logits (the last
        eval()'s result) and returns the new ids: the ids of a generation,
        which the text-level calls do not give. Ties go to the lowest id, as
        the library's greedy sampler does. Stops after max_tokens, or after
        an end-of-generation token with stop_at_eog. The sequence then holds
        every returned id but the last."""
        out = []
        while len(out) < max_tokens:
            t = max(range(len(logits)), key=logits.__getitem__)  # the first maximum: the lowest id
            out.append(t)
            if len(out) == max_tokens or (stop_at_eog and self.model.is_eog(t)):
                break
            logits = self.eval([t])
        return out

    def __len__(self):
        """Positions evaluated so far."""
        return self._lib.rw_seq_length(self._handle())

    @property
    def length(self):
        return len(self)

    def rewind(self, n):
        """Forgets every position from n on, exactly: the sequence is then
        bitwise what it would be had it only ever seen its first n tokens."""
        err = _ffi.rw_error()
        with self.model._forward_pass("Seq.rewind", engine_ok=True):
            st = self._lib.rw_seq_rewind(self._handle(), n, ctypes.byref(err))
        _ffi.check(st, err)

    def save(self, path):
        """Writes a state file (tokens and every layer's state, checksummed,
        written atomically)."""
        err = _ffi.rw_error()
        st = self._lib.rw_seq_save(self._handle(), os.fsencode(path), ctypes.byref(err))
        _ffi.check(st, err)

    def load(self, path):
        """Replaces the sequence's state with a state file's (checked to
        belong to this model and KV type; a corrupt file is FormatError)."""
        err = _ffi.rw_error()
        st = self._lib.rw_seq_load(self._handle(), os.fsencode(path), ctypes.byref(err))
        _ffi.check(st, err)
