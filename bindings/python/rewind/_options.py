"""Keyword arguments to the C option structs (rw_gen_options,
rw_run_params), starting from the library's own defaults, and the
Completion a request returns."""

import ctypes
import json


SAMPLING_KEYS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "seed",
)
GEN_KEYS = SAMPLING_KEYS + ("max_tokens", "stop", "ignore_eos", "grammar", "json_schema")
RUN_KEYS = ("n_threads", "n_ctx", "kv_f32")

_REASONS = {0: None, 1: "stop", 2: "length", 3: "error"}


def split(kwargs, *groups):
    """Splits kwargs into one dict per group of keys; an unknown key is a
    TypeError, as for any Python function."""
    out = [{} for _ in groups]
    for k, v in kwargs.items():
        for i, g in enumerate(groups):
            if k in g:
                out[i][k] = v
                break
        else:
            raise TypeError("unexpected keyword argument %r" % k)
    return out


def _text(v):
    return v.encode() if isinstance(v, str) else bytes(v)


def gen_options(lib, kw):
    """(rw_gen_options, keepalive): the struct and the buffers it points
    into, which must live as long as the struct is in use."""
    o = lib.rw_gen_options_default()
    keep = []
    for k in SAMPLING_KEYS:
        if k in kw:
            setattr(o.sampling, k, kw[k])
    if "max_tokens" in kw:
        o.max_tokens = kw["max_tokens"]
    if kw.get("ignore_eos") is not None:
        o.ignore_eos = bool(kw["ignore_eos"])
    stop = kw.get("stop")
    if stop:
        if isinstance(stop, (str, bytes)):
            stop = [stop]
        arr = (ctypes.c_char_p * len(stop))(*[_text(s) for s in stop])
        keep.append(arr)
        o.stop = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
        o.n_stop = len(stop)
    if kw.get("grammar") is not None:
        o.grammar = _text(kw["grammar"])
    schema = kw.get("json_schema")
    if schema is not None:
        o.json_schema = _text(schema if isinstance(schema, (str, bytes)) else json.dumps(schema))
    return o, keep


def run_params(lib, kw):
    r = lib.rw_run_params_default()
    for k in RUN_KEYS:
        if kw.get(k) is not None:
            setattr(r, k, kw[k])
    return r


class Completion:
    """What a generation produced: the text, the token counts and how it
    ended (finish_reason "stop": an end-of-generation token, a stop string
    or the caller stopped it; "length": max_tokens or the context)."""

    __slots__ = ("text", "prompt_tokens", "cached_tokens", "completion_tokens", "finish_reason")

    def __init__(self, text, res):
        self.text = text
        self.prompt_tokens = res.prompt_tokens
        self.cached_tokens = res.cached_tokens
        self.completion_tokens = res.completion_tokens
        self.finish_reason = _REASONS.get(res.reason, "error")

    def __str__(self):
        return self.text

    def __repr__(self):
        return "Completion(text=%r, prompt_tokens=%d, cached_tokens=%d, completion_tokens=%d, finish_reason=%r)" % (
            self.text,
            self.prompt_tokens,
            self.cached_tokens,
            self.completion_tokens,
            self.finish_reason,
        )


def decode(b):
    # Pieces are whole UTF-8 sequences; a model can still emit invalid bytes.
    return b.decode("utf-8", "replace")
