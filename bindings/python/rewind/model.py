"""Model: a GGUF file opened with its weights, tokenizer and chat template;
tokenization, chat rendering, and synchronous or streamed generation."""

import contextlib
import ctypes
import json
import os
import queue
import threading
import weakref

from . import _ffi, _options, errors
from ._options import Completion, decode


class Model:
    """A model opened from a GGUF file (rw_model_open).

    Close it with close() or a with-block; every engine, sequence and stream
    made from it is closed first. The read-only calls (tokenize, detokenize,
    render_chat, the properties) may run from any thread at once. Forward
    passes of one model never run concurrently: generate(), stream() and
    Seq.eval() wait for each other, and fail with BusyError while an Engine
    is open on the model (the engine runs its passes; use the engine)."""

    def __init__(self, path, *, kernels=None, numerics=None, chat_template=None, lora=(), library=None):
        """lora: LoRA adapter files applied at open, in order: each a path
        (scale 1) or a (path, scale) pair, as rewind's --lora-scaled."""
        lib = _ffi.load(library)
        p = lib.rw_model_params_default()
        adapters = [(a, 1.0) if isinstance(a, (str, bytes, os.PathLike)) else tuple(a) for a in lora]
        if adapters:
            arr = (_ffi.rw_lora_adapter * len(adapters))(
                *[_ffi.rw_lora_adapter(os.fsencode(a), float(s)) for a, s in adapters])
            p.lora = arr  # alive until rw_model_open returns (it reads the paths then)
            p.n_lora = len(adapters)
        if kernels is not None:
            p.kernels = kernels.encode()
        if numerics is not None:
            p.numerics = numerics.encode()
        if chat_template is not None:
            p.chat_template = chat_template.encode()
        h = ctypes.c_void_p()
        err = _ffi.rw_error()
        st = lib.rw_model_open(os.fsencode(path), ctypes.byref(p), ctypes.byref(h), ctypes.byref(err))
        _ffi.check(st, err)
        self._lib = lib
        self._h = h.value
        self.path = os.fspath(path)
        self._forward = threading.RLock()  # held by a forward pass of this model
        self._engine = None  # the Engine running this model's passes, if any
        self._children = weakref.WeakSet()  # engines, sequences, streams: closed before the model

    @property
    def lora(self):
        """The LoRA adapters applied at open: [(path, scale)], in order."""
        out = []
        for i in range(self._lib.rw_model_lora_count(self._h)):
            path, scale, err = ctypes.c_char_p(), ctypes.c_float(), _ffi.rw_error()
            _ffi.check(self._lib.rw_model_lora_get(self._h, i, ctypes.byref(path), ctypes.byref(scale),
                                                   ctypes.byref(err)), err)
            out.append((os.fsdecode(path.value), scale.value))
        return out

    # ---- lifetime ----------------------------------------------------------

    def close(self):
        """Closes the model, after everything made from it. Idempotent."""
        if self._h is None:
            return
        for c in sorted(list(self._children), key=lambda c: c._close_order):
            c.close()
        h, self._h = self._h, None
        self._lib.rw_model_close(h)

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
            raise ValueError("the model is closed")
        return self._h

    @contextlib.contextmanager
    def _forward_pass(self, what, engine_ok=False):
        """Holds the model for one forward pass (or anything using its
        sequence thread pool) of the calling thread."""
        h = self._handle()
        with self._forward:
            if self._engine is not None and not engine_ok:
                raise errors.BusyError(
                    "%s: the model has an open Engine, which runs its forward passes (use it, or close it)" % what
                )
            yield h

    # ---- metadata ----------------------------------------------------------

    @property
    def arch(self):
        """general.architecture ("qwen3")."""
        return self._lib.rw_model_arch(self._handle()).decode()

    @property
    def n_vocab(self):
        return self._lib.rw_model_n_vocab(self._handle())

    @property
    def n_embd(self):
        """The size of the model's hidden states (its embeddings)."""
        return self._lib.rw_model_n_embd(self._handle())

    @property
    def n_ctx_train(self):
        """The context length the model was trained with."""
        return self._lib.rw_model_n_ctx_train(self._handle())

    def is_eog(self, token):
        """Whether the token ends a generation (EOS, EOT, <|im_end|>, ...)."""
        return self._lib.rw_model_token_is_eog(self._handle(), token)

    def __repr__(self):
        if self._h is None:
            return "<rewind.Model %r (closed)>" % self.path
        return "<rewind.Model %r arch=%s n_vocab=%d>" % (self.path, self.arch, self.n_vocab)

    # ---- tokens ------------------------------------------------------------

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of text (str or UTF-8 bytes), as llama.cpp tokenizes.
        parse_special turns control-token text into those tokens: use it
        for rendered templates, never for untrusted text."""
        b = text.encode() if isinstance(text, str) else bytes(text)
        ids = _ffi.c_int32_p()
        n = ctypes.c_size_t()
        err = _ffi.rw_error()
        st = self._lib.rw_model_tokenize(
            self._handle(), b, len(b), add_special, parse_special, ctypes.byref(ids), ctypes.byref(n), ctypes.byref(err)
        )
        try:
            _ffi.check(st, err)
            return ids[: n.value]
        finally:
            self._lib.rw_free(ids)

    def detokenize_bytes(self, ids, render_special=False):
        """The bytes of tokens (a token may hold part of a UTF-8 character)."""
        ids = list(ids)
        arr = (ctypes.c_int32 * len(ids))(*ids)
        out = ctypes.c_void_p()
        n = ctypes.c_size_t()
        err = _ffi.rw_error()
        st = self._lib.rw_model_detokenize(
            self._handle(), arr, len(ids), render_special, ctypes.byref(out), ctypes.byref(n), ctypes.byref(err)
        )
        text = _ffi.take_string(out.value, n.value)
        _ffi.check(st, err)
        return text

    def detokenize(self, ids, render_special=False):
        """The text of tokens; invalid UTF-8 becomes U+FFFD."""
        return decode(self.detokenize_bytes(ids, render_special))

    # ---- chat --------------------------------------------------------------

    def render_chat(self, messages, add_generation_prompt=True, tools=None, enable_thinking=None):
        """Renders a conversation through the model's chat template.

        messages: a list of {"role": ..., "content": ...} dicts (or
        (role, content) pairs), as the OpenAI API sends them: tool calls and
        content parts are fine. tools: a list of OpenAI tool objects.
        enable_thinking: the template variable (None leaves it undefined).
        Tokenize the result with parse_special=True."""
        msgs = [{"role": m[0], "content": m[1]} if isinstance(m, (tuple, list)) else m for m in messages]
        plain = tools is None and enable_thinking is None and all(
            set(m) == {"role", "content"} and isinstance(m["content"], str) for m in msgs
        )
        out = ctypes.c_void_p()
        err = _ffi.rw_error()
        if plain:  # rw_chat_render: no JSON on the way
            arr = (_ffi.rw_chat_message * len(msgs))(
                *[_ffi.rw_chat_message(m["role"].encode(), m["content"].encode()) for m in msgs]
            )
            st = self._lib.rw_chat_render(
                self._handle(), arr, len(msgs), add_generation_prompt, ctypes.byref(out), ctypes.byref(err)
            )
        else:
            think = -1 if enable_thinking is None else int(bool(enable_thinking))
            st = self._lib.rw_chat_render_json(
                self._handle(),
                json.dumps(msgs).encode(),
                None if tools is None else json.dumps(tools).encode(),
                add_generation_prompt,
                think,
                ctypes.byref(out),
                ctypes.byref(err),
            )
        text = _ffi.take_string(out.value)
        _ffi.check(st, err)
        return text.decode()

    # ---- generation --------------------------------------------------------

    def generate(self, prompt, *, on_text=None, **kwargs):
        """Generates after prompt (text, tokenized with parse_special, e.g.
        render_chat's output) and returns a Completion.

        Options (the library's defaults where not given): max_tokens (256),
        temperature (0: greedy), top_k, top_p, min_p, presence_penalty,
        frequency_penalty, repeat_penalty, seed, stop (a string or a list),
        ignore_eos, grammar (GBNF), json_schema (a dict or JSON text);
        run options: n_threads, n_ctx, kv_f32.
        on_text(piece) is called with each new piece of text (on a library
        thread, while generate blocks); returning False stops the
        generation. It must not start a forward pass of this model
        (generate, Seq.eval): that waits for this generation, which waits
        for the callback."""
        gen, run = _options.split(kwargs, _options.GEN_KEYS, _options.RUN_KEYS)
        failure = []

        def cb(user, ptr, n):
            try:
                return on_text(decode(ctypes.string_at(ptr, n))) is not False
            except BaseException as e:  # stop, and raise it in the caller's thread
                failure.append(e)
                return False

        c = self._generate(prompt, gen, run, _ffi.rw_text_fn(cb) if on_text else _ffi.rw_text_fn())
        if failure:
            raise failure[0]
        return c

    def chat(self, messages, *, tools=None, enable_thinking=None, **kwargs):
        """render_chat(messages) then generate(): the assistant's answer."""
        return self.generate(self.render_chat(messages, True, tools, enable_thinking), **kwargs)

    def stream(self, prompt, **kwargs):
        """As generate(), but returns a Stream: an iterator of text pieces as
        they are made. Close it (or leave its with-block) to stop early."""
        gen, run = _options.split(kwargs, _options.GEN_KEYS, _options.RUN_KEYS)
        return Stream(self, prompt, gen, run)

    def _generate(self, prompt, gen, run, cb):
        if not isinstance(prompt, (str, bytes)):
            raise TypeError("prompt must be text; an Engine takes token ids")
        p = prompt.encode() if isinstance(prompt, str) else prompt
        opts, keep = _options.gen_options(self._lib, gen)
        rp = _options.run_params(self._lib, run)
        text = ctypes.c_void_p()
        res = _ffi.rw_gen_result()
        err = _ffi.rw_error()
        with self._forward_pass("generate") as h:
            st = self._lib.rw_generate(
                h, p, ctypes.byref(opts), ctypes.byref(rp), cb, None, ctypes.byref(text), ctypes.byref(res),
                ctypes.byref(err)
            )
        del keep
        t = _ffi.take_string(text.value)
        _ffi.check(st, err)
        if res.reason == 3:
            raise errors.InternalError("the forward pass failed", status="ERR_INTERNAL")
        return Completion(decode(t), res)

    # ---- what runs on the model ---------------------------------------------

    def seq(self, n_ctx=0, kv_f32=False):
        """A new Seq on this model (see Seq)."""
        from .seq import Seq

        return Seq(self, n_ctx, kv_f32)

    def engine(self, **params):
        """A new Engine on this model (see Engine)."""
        from .engine import Engine

        return Engine(self, **params)

    def imatrix(self, process_output=False):
        """Collects llama-imatrix's statistics of this model's weights from
        the Seq evaluations this thread runs while the returned Imatrix is
        open (a context manager); .save(path, dataset=None, chunks=0,
        chunk_size=0) writes them in llama-imatrix's GGUF layout, for
        rewind.quantize(..., imatrix=path)."""
        return Imatrix(self, process_output)


class Imatrix:
    """An importance matrix being collected (Model.imatrix)."""

    def __init__(self, model, process_output):
        self._lib = model._lib
        h = ctypes.c_void_p()
        err = _ffi.rw_error()
        _ffi.check(self._lib.rw_imatrix_begin(model._handle(), process_output, ctypes.byref(h), ctypes.byref(err)),
                   err)
        self._h, self._model = h.value, model  # the model outlives the collector

    def save(self, path, dataset=None, chunks=0, chunk_size=0):
        err = _ffi.rw_error()
        _ffi.check(self._lib.rw_imatrix_save(self._h, os.fsencode(path), dataset.encode() if dataset else None,
                                             chunks, chunk_size, ctypes.byref(err)), err)

    def close(self):
        h, self._h = self._h, None
        if h:
            self._lib.rw_imatrix_end(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


_END = object()


class Stream:
    """The pieces of one generation, as an iterator (Model.stream).

    The generation runs on a thread of its own; iterate from one thread.
    After the last piece, .completion holds the Completion; close() stops
    the generation early (finish_reason "stop")."""

    _close_order = 0

    def __init__(self, model, prompt, gen, run):
        self._q = queue.Queue()
        self._stop = threading.Event()
        self._finished = False
        self._error = None
        self.completion = None
        self.text = ""
        self._cb = _ffi.rw_text_fn(self._on_text)  # kept alive while the C side may call it
        self._thread = threading.Thread(target=self._run, args=(model, prompt, gen, run), daemon=True,
                                        name="rewind-stream")
        model._children.add(self)
        _live_streams.add(self)
        self._thread.start()

    def _on_text(self, user, ptr, n):
        if self._stop.is_set():
            return False
        self._q.put(ctypes.string_at(ptr, n))
        return True

    def _run(self, model, prompt, gen, run):
        try:
            self.completion = model._generate(prompt, gen, run, self._cb)
        except BaseException as e:
            self._error = e
        finally:
            self._q.put(_END)

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        item = self._q.get()
        if item is _END:
            self._finished = True
            self._thread.join()
            if self._error is not None:
                raise self._error
            raise StopIteration
        piece = decode(item)
        self.text += piece
        return piece

    def close(self):
        """Stops the generation (if it still runs) and waits for its end."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        self._finished = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if not getattr(self, "_finished", True):
            try:
                self.close()
            except Exception:
                pass


_live_streams = weakref.WeakSet()
