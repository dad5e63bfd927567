"""Engine: continuous batching with the prefix cache. Several requests run
at once; each submit() returns a Request whose pieces and result are its
own. A request whose prompt starts like an earlier one reuses its state,
bitwise exactly."""

import ctypes
import itertools
import queue
import threading
import weakref

from . import _ffi, _options, errors
from ._options import Completion, decode

_ENGINE_KEYS = (
    "max_running",
    "max_queued",
    "prefill_chunk",
    "cache_bytes",
    "cache_dir",
    "cache_dir_bytes",
    "max_checkpoints",
    "draft_max",
    "draft_fixed",
)
_SPEC = {"mtp": _ffi.RW_SPECULATE_MTP, "ngram": _ffi.RW_SPECULATE_NGRAM}


class EngineStats:
    """Counters of an engine (rw_engine_stats_get)."""

    __slots__ = tuple(n for n, _ in _ffi.rw_engine_stats_public._fields_)

    def __init__(self, s):
        for n in self.__slots__:
            setattr(self, n, getattr(s, n))

    def __repr__(self):
        return "EngineStats(%s)" % ", ".join("%s=%d" % (n, getattr(self, n)) for n in self.__slots__)


class Engine:
    """An engine over a model (rw_engine_open). Its methods may be called
    from any thread; requests from several threads are batched together.

    Parameters (the library's defaults where not given): n_threads, n_ctx
    (positions per sequence), kv_f32, max_running, max_queued (beyond
    those, submit raises BusyError), prefill_chunk, cache_bytes (the prefix
    cache; 0 = off), cache_dir and cache_dir_bytes (its disk tier),
    max_checkpoints, speculate ("mtp", "ngram" or both, as a list), draft (a
    smaller Model with the same vocabulary), draft_max, draft_fixed, and
    manual (no scheduler thread: the engine advances only in step(), which
    Request.result() and iteration call themselves).

    While the engine is open it runs every forward pass of its model (and
    of the draft): Model.generate and Seq.eval on them raise BusyError.
    Close it with close() or a with-block; requests still running are
    cancelled."""

    _close_order = 1

    def __init__(self, model, *, n_threads=None, n_ctx=None, kv_f32=None, speculate=(), draft=None, manual=False,
                 **params):
        lib = model._lib
        p = lib.rw_engine_params_default()
        _options.split(params, _ENGINE_KEYS)  # unknown keys: TypeError
        for k, v in params.items():
            if v is not None:
                setattr(p, k, v.encode() if isinstance(v, str) else v)
        if n_threads is not None:
            p.run.n_threads = n_threads
        if n_ctx is not None:
            p.run.n_ctx = n_ctx
        if kv_f32 is not None:
            p.run.kv_f32 = kv_f32
        if isinstance(speculate, str):
            speculate = [speculate]
        for s in speculate:
            if s not in _SPEC:
                raise ValueError("speculate: %r is not one of %s" % (s, ", ".join(_SPEC)))
            p.spec |= _SPEC[s]
        if draft is not None:
            p.draft = draft._handle()
        p.manual = bool(manual)
        self._lib = lib
        self.model = model
        self.draft = draft
        self.manual = bool(manual)
        self._pending = {}  # user key -> Request, until its final event (or cancel)
        self._keys = itertools.count(1)
        self._step_lock = threading.Lock()  # rw_engine_step: one thread at a time
        self._cb = _ffi.rw_event_fn(self._on_event)  # alive as long as the engine
        h = ctypes.c_void_p()
        err = _ffi.rw_error()
        models = [model] + ([draft] if draft is not None and draft is not model else [])
        self._models = models
        # wait for forward passes in flight (generate, Seq.eval), then own them
        with model._forward_pass("Engine"):
            with draft._forward_pass("Engine (draft)") if len(models) > 1 else _nothing():
                st = lib.rw_engine_open(model._handle(), ctypes.byref(p), ctypes.byref(h), ctypes.byref(err))
                _ffi.check(st, err)
                self._h = h.value
                for m in models:
                    m._engine = self
                    m._children.add(self)
        _live_engines.add(self)

    # ---- lifetime ----------------------------------------------------------

    def close(self):
        """Cancels what still runs or waits, and stops the engine. Idempotent."""
        h = getattr(self, "_h", None)
        if h is None:
            return
        self._h = None
        self._lib.rw_engine_close(h)  # no callback after this
        for m in self._models:
            if m._engine is self:
                m._engine = None
        pending, self._pending = self._pending, {}
        for r in pending.values():
            r._cancelled()

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

    @property
    def closed(self):
        return self._h is None

    def _handle(self):
        if self._h is None:
            raise ValueError("the engine is closed")
        return self._h

    # ---- requests ----------------------------------------------------------

    def _on_event(self, user, ptr, n, done, res):
        # the scheduler thread (or step()'s caller): quick, no engine calls
        try:
            r = self._pending.get(user)
            if r is None:
                return
            if n:
                r._piece(ctypes.string_at(ptr, n))
            if done:
                del self._pending[user]
                r._finish(res.contents)
        except BaseException:  # never let an exception unwind into C
            pass

    def submit(self, prompt, **options):
        """Queues a request and returns its Request at once. prompt: text
        (tokenized with parse_special, e.g. Model.render_chat's output) or a
        list of token ids. Options as Model.generate's (max_tokens, sampling,
        stop, ignore_eos, grammar, json_schema). Raises ContextOverflowError
        (prompt + max_tokens > n_ctx), BusyError (queue full) or
        InvalidArgumentError (bad options) right away."""
        h = self._handle()
        opts, keep = _options.gen_options(self._lib, options)
        key = next(self._keys)
        req = Request(self, key)
        self._pending[key] = req  # before the call: its events may come before it returns
        rid = ctypes.c_uint64()
        err = _ffi.rw_error()
        if isinstance(prompt, (str, bytes)):
            p = prompt.encode() if isinstance(prompt, str) else prompt
            st = self._lib.rw_engine_submit_text(h, p, ctypes.byref(opts), self._cb, key, ctypes.byref(rid),
                                                 ctypes.byref(err))
        else:
            ids = list(prompt)
            arr = (ctypes.c_int32 * len(ids))(*ids)
            st = self._lib.rw_engine_submit_ids(h, arr, len(ids), ctypes.byref(opts), self._cb, key,
                                                ctypes.byref(rid), ctypes.byref(err))
        del keep
        if st:
            self._pending.pop(key, None)
            _ffi.check(st, err)
        req.id = rid.value
        return req

    def run(self, prompt, **options):
        """Submits and waits: the Completion (rw_engine_run for text). Safe
        from several threads at once: their requests are batched."""
        if not isinstance(prompt, (str, bytes)):
            return self.submit(prompt, **options).result()
        h = self._handle()
        p = prompt.encode() if isinstance(prompt, str) else prompt
        opts, keep = _options.gen_options(self._lib, options)
        text = ctypes.c_void_p()
        res = _ffi.rw_gen_result()
        err = _ffi.rw_error()
        if self.manual:
            with self._step_lock:  # rw_engine_run steps a manual engine itself
                st = self._lib.rw_engine_run(h, p, ctypes.byref(opts), ctypes.byref(text), ctypes.byref(res),
                                             ctypes.byref(err))
        else:
            st = self._lib.rw_engine_run(h, p, ctypes.byref(opts), ctypes.byref(text), ctypes.byref(res),
                                         ctypes.byref(err))
        del keep
        t = _ffi.take_string(text.value)
        _ffi.check(st, err)
        if res.reason == 3:
            raise errors.InternalError("the forward pass failed", status="ERR_INTERNAL")
        return Completion(decode(t), res)

    _POOLING = {None: -1, "none": 0, "mean": 1, "cls": 2, "last": 3}

    def embed(self, inp, *, pooling=None, dimensions=0, normalize=True):
        """The pooled final-norm hidden state of a text or a list of token
        ids (rw_engine_embed): a list of floats (pooling None = the file's,
        or "none", "mean", "cls", "last"; with "none", one list per token).
        Batched with whatever else the engine runs, through its prefix
        cache, bitwise the same either way."""
        h = self._handle()
        if pooling not in self._POOLING:
            raise ValueError("pooling must be None, 'none', 'mean', 'cls' or 'last'")
        opts = self._lib.rw_embed_options_default()
        opts.pooling, opts.dimensions, opts.normalize = self._POOLING[pooling], dimensions, normalize
        dims = dimensions or self._lib.rw_model_n_embd(self.model._handle())
        err = _ffi.rw_error()
        if isinstance(inp, (str, bytes)):
            text = inp.encode() if isinstance(inp, str) else inp
            rows = 1 if pooling != "none" else len(text) + 8  # a token has at least a byte (and BOS/EOS)
            out = (ctypes.c_float * (rows * dims))()
            st = self._embed_call(lambda: self._lib.rw_engine_embed_text(h, text, ctypes.byref(opts), out, None,
                                                                         ctypes.byref(err)))
        else:
            ids = list(inp)
            arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
            rows = 1 if pooling != "none" else len(ids)
            out = (ctypes.c_float * (rows * dims))()
            st = self._embed_call(lambda: self._lib.rw_engine_embed(h, arr, len(ids), ctypes.byref(opts), out, None,
                                                                    ctypes.byref(err)))
        _ffi.check(st, err)
        vals = list(out)
        if pooling != "none":
            return vals
        return [vals[i:i + dims] for i in range(0, len(vals), dims)]

    def rerank(self, query, document, *, instruction=None):
        """A yes/no reranker's relevance of document to query, in [0, 1]
        (rw_engine_rerank)."""
        h = self._handle()
        score = ctypes.c_double()
        err = _ffi.rw_error()
        ins = instruction.encode() if instruction else None
        st = self._embed_call(lambda: self._lib.rw_engine_rerank(h, query.encode(), document.encode(), ins,
                                                                 ctypes.byref(score), ctypes.byref(err)))
        _ffi.check(st, err)
        return score.value

    def _embed_call(self, fn):
        if self.manual:
            with self._step_lock:  # the call steps a manual engine itself
                return fn()
        return fn()

    def step(self):
        """A manual engine: one step (admit, one forward pass over every
        running sequence, callbacks). Returns how many requests still run or
        wait (0: idle)."""
        h = self._handle()
        if not self.manual:
            raise ValueError("step() is for an engine opened with manual=True")
        err = _ffi.rw_error()
        with self._step_lock:
            n = self._lib.rw_engine_step(h, ctypes.byref(err))
        if n < 0:
            _ffi.check(err.code or _ffi.status_code("ERR_INVALID_ARG"), err)
        return n

    def _cancel(self, req):
        if self._h is not None and req.id:
            self._lib.rw_engine_cancel(self._h, req.id)  # no event of it after this
        if self._pending.pop(req._key, None) is not None:
            req._cancelled()

    def stats(self):
        """The engine's counters (EngineStats)."""
        s = _ffi.rw_engine_stats_public()
        self._lib.rw_engine_stats_get(self._handle(), ctypes.byref(s))
        return EngineStats(s)


_END = object()


class Request:
    """One request of an Engine: iterate it for its text pieces as they
    come, or wait for its Completion with result(). Both may be used from
    any thread; iterate from one thread at a time."""

    def __init__(self, engine, key):
        self.engine = engine
        self.id = 0
        self._key = key
        self._q = queue.Queue()
        self._done = threading.Event()
        self._chunks = []
        self._res = None
        self.cancelled = False

    # called with the event of the request (scheduler thread)
    def _piece(self, b):
        self._chunks.append(b)
        self._q.put(b)

    def _finish(self, res):
        self._res = Completion(decode(b"".join(self._chunks)), res)
        self._done.set()
        self._q.put(_END)

    def _cancelled(self):
        self.cancelled = True
        self._done.set()
        self._q.put(_END)

    def _wait_step(self):
        """A manual engine moves only when stepped: step until an event."""
        while self._q.empty() and not self._done.is_set():
            if self.engine.step() == 0 and not self._done.is_set():
                raise errors.InternalError("the engine went idle before the request ended", status="ERR_INTERNAL")

    def __iter__(self):
        while True:
            if self.engine.manual:
                self._wait_step()
            item = self._q.get()
            if item is _END:
                self._q.put(_END)  # a second iteration ends at once
                return
            yield decode(item)

    def done(self):
        return self._done.is_set()

    @property
    def text(self):
        """The text so far."""
        return decode(b"".join(self._chunks))

    def result(self, timeout=None):
        """Waits for the end and returns the Completion. Raises
        CancelledError for a cancelled request, InternalError if its forward
        pass failed, TimeoutError after timeout seconds."""
        if self.engine.manual:
            while not self._done.is_set():
                if self.engine.step() == 0 and not self._done.is_set():
                    raise errors.InternalError("the engine went idle before the request ended", status="ERR_INTERNAL")
        elif not self._done.wait(timeout):
            raise TimeoutError("request %d still running after %s s" % (self.id, timeout))
        if self.cancelled:
            raise errors.CancelledError("request %d was cancelled" % self.id, status="ERR_CANCELLED")
        if self._res.finish_reason == "error":
            raise errors.InternalError("request %d: the forward pass failed" % self.id, status="ERR_INTERNAL")
        return self._res

    def cancel(self):
        """Cancels the request: no piece comes after this returns; result()
        raises CancelledError unless it had finished already."""
        if not self._done.is_set():
            self.engine._cancel(self)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_live_engines = weakref.WeakSet()
