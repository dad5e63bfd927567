"""The C side: finding librewind, the structs of rewind.h, and the function
prototypes. Everything that knows the C layout lives in this file, so a
change of include/rewind.h is mirrored here and nowhere else (the tests
compare these layouts with the header when a C compiler is at hand)."""

import ctypes
import ctypes.util
import os
import subprocess
import threading

# The header version these bindings mirror. The structs below are this
# version's; a library of another major.minor may lay them out differently.
HEADER_VERSION = (0, 25)

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_float_p = ctypes.POINTER(ctypes.c_float)


class rw_error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class rw_lora_adapter(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("scale", ctypes.c_float)]


class rw_model_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kernels", ctypes.c_char_p),
        ("numerics", ctypes.c_char_p),
        ("chat_template", ctypes.c_char_p),
        ("n_threads", ctypes.c_int),
        ("lora", ctypes.POINTER(rw_lora_adapter)),
        ("n_lora", ctypes.c_int),
    ]


class rw_chat_message(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class rw_sampling(ctypes.Structure):
    _fields_ = [
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("seed", ctypes.c_uint64),
    ]


class rw_gen_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("sampling", rw_sampling),
        ("max_tokens", ctypes.c_int64),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop", ctypes.c_int),
        ("ignore_eos", ctypes.c_bool),
        ("grammar", ctypes.c_char_p),
        ("json_schema", ctypes.c_char_p),
    ]


class rw_template_vars(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("messages_json", ctypes.c_char_p),
        ("tools_json", ctypes.c_char_p),
        ("add_generation_prompt", ctypes.c_bool),
        ("enable_thinking", ctypes.c_int),
        ("bos_token", ctypes.c_char_p),
        ("eos_token", ctypes.c_char_p),
        ("now", ctypes.c_char_p),
        ("extra_json", ctypes.c_char_p),
    ]


class rw_request_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("penalty_last_n", ctypes.c_int32),
        ("min_keep", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("logit_bias", ctypes.c_void_p),
        ("n_logit_bias", ctypes.c_int32),
        ("max_tokens", ctypes.c_int64),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop", ctypes.c_int),
        ("ignore_eos", ctypes.c_bool),
        ("marks", ctypes.POINTER(ctypes.c_int64)),
        ("n_marks", ctypes.c_int),
        ("n_logprobs", ctypes.c_int),
        ("grammar", ctypes.c_char_p),
        ("grammar_root", ctypes.c_char_p),
        ("grammar_after", ctypes.c_char_p),
        ("render_special", ctypes.c_bool),
    ]


class rw_chat_output_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("tool_format", ctypes.c_int),
        ("reasoning", ctypes.c_int),
        ("think_open", ctypes.c_char_p),
        ("think_close", ctypes.c_char_p),
        ("in_reasoning", ctypes.c_bool),
        ("tools_json", ctypes.c_char_p),
        ("id_prefix", ctypes.c_char_p),
        ("id_seed", ctypes.c_uint64),
        ("stream_args", ctypes.c_bool),
        ("cut", ctypes.c_bool),
        ("max_calls", ctypes.c_int),
    ]


class rw_gen_result(ctypes.Structure):
    _fields_ = [
        ("prompt_tokens", ctypes.c_int64),
        ("cached_tokens", ctypes.c_int64),
        ("completion_tokens", ctypes.c_int64),
        ("reason", ctypes.c_int),
    ]


class rw_run_params(ctypes.Structure):
    _fields_ = [("n_threads", ctypes.c_int), ("n_ctx", ctypes.c_int64), ("kv_f32", ctypes.c_bool)]


class rw_engine_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("run", rw_run_params),
        ("max_running", ctypes.c_int),
        ("max_queued", ctypes.c_int),
        ("prefill_chunk", ctypes.c_int64),
        ("cache_bytes", ctypes.c_size_t),
        ("cache_dir", ctypes.c_char_p),
        ("cache_dir_bytes", ctypes.c_size_t),
        ("max_checkpoints", ctypes.c_int),
        ("spec", ctypes.c_uint),
        ("draft", ctypes.c_void_p),
        ("draft_max", ctypes.c_int),
        ("draft_fixed", ctypes.c_bool),
        ("manual", ctypes.c_bool),
        ("cache_write_delay", ctypes.c_double),
        ("ngram_n", ctypes.c_int),
        ("ngram_min_hits", ctypes.c_int),
        ("max_state_bytes", ctypes.c_size_t),
        ("cache_dir_evict_only", ctypes.c_bool),
        ("cache_flush_seconds", ctypes.c_double),
        ("prefault_states", ctypes.c_bool),
        ("grammar_mask_budget", ctypes.c_int64),
        ("grammar_request_budget", ctypes.c_int64),
    ]


class rw_engine_stats_public(ctypes.Structure):
    _fields_ = [
        ("requests_finished", ctypes.c_uint64),
        ("prompt_tokens", ctypes.c_uint64),
        ("cached_tokens", ctypes.c_uint64),
        ("generated_tokens", ctypes.c_uint64),
        ("cache_bytes", ctypes.c_size_t),
        ("cache_disk_bytes", ctypes.c_size_t),
        ("cache_entries", ctypes.c_uint64),
        ("draft_tokens", ctypes.c_uint64),
        ("accepted_tokens", ctypes.c_uint64),
    ]


class rw_chat_request(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("messages_json", ctypes.c_char_p),
        ("tools_json", ctypes.c_char_p),
        ("add_generation_prompt", ctypes.c_bool),
        ("kwargs_json", ctypes.c_char_p),
        ("enable_thinking", ctypes.c_int),
        ("reasoning_effort", ctypes.c_char_p),
        ("bos_token", ctypes.c_char_p),
        ("eos_token", ctypes.c_char_p),
    ]


class rw_embed_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("pooling", ctypes.c_int),
        ("dimensions", ctypes.c_int),
        ("normalize", ctypes.c_bool),
        ("logit_ids", c_int32_p),
        ("n_logit_ids", ctypes.c_int),
        ("logits", c_float_p),
    ]


class rw_quantize_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("n_threads", ctypes.c_int),
        ("pure", ctypes.c_bool),
        ("allow_requantize", ctypes.c_bool),
        ("output_type", ctypes.c_char_p),
        ("token_embd_type", ctypes.c_char_p),
        ("imatrix", ctypes.c_char_p),
        ("tensor_types", ctypes.c_char_p),
    ]


class rw_seq_batch(ctypes.Structure):
    _fields_ = [
        ("seq", ctypes.c_void_p),
        ("ids", c_int32_p),
        ("n", ctypes.c_int64),
        ("logits", c_float_p),
        ("all_logits", ctypes.c_bool),
    ]


class rw_meta_value(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("u", ctypes.c_uint64),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("str", ctypes.c_void_p),  # str_len bytes, not NUL-terminated
        ("str_len", ctypes.c_uint64),
        ("elem_type", ctypes.c_int),
        ("n_elems", ctypes.c_uint64),
        ("impl", ctypes.c_void_p),
    ]


class rw_tensor_info(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("type", ctypes.c_char_p),
        ("n_dims", ctypes.c_uint32),
        ("ne", ctypes.c_uint64 * 4),
        ("offset", ctypes.c_uint64),
        ("nbytes", ctypes.c_uint64),
        ("readable", ctypes.c_bool),
    ]


# The structs with their C names, for the layout test.
STRUCTS = {
    "rw_error": rw_error,
    "rw_model_params": rw_model_params,
    "rw_chat_message": rw_chat_message,
    "rw_sampling": rw_sampling,
    "rw_gen_options": rw_gen_options,
    "rw_gen_result": rw_gen_result,
    "rw_run_params": rw_run_params,
    "rw_engine_params": rw_engine_params,
    "rw_engine_stats_public": rw_engine_stats_public,
    "rw_embed_options": rw_embed_options,
    "rw_quantize_params": rw_quantize_params,
    "rw_chat_request": rw_chat_request,
    "rw_seq_batch": rw_seq_batch,
    "rw_meta_value": rw_meta_value,
    "rw_tensor_info": rw_tensor_info,
}

RW_SPECULATE_MTP = 1
RW_SPECULATE_NGRAM = 2

# Callbacks. ctypes takes the GIL itself when the library calls them from
# one of its own threads.
rw_log_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
rw_text_fn = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
rw_event_fn = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_bool, ctypes.POINTER(rw_gen_result)
)

_P = ctypes.c_void_p
_E = ctypes.POINTER(rw_error)
_S = ctypes.c_int  # rw_status
_PROTOTYPES = {
    "rw_version": (ctypes.c_char_p, []),
    "rw_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rw_status_message": (ctypes.c_char_p, [ctypes.c_int]),
    "rw_free": (None, [_P]),
    "rw_log_set": (None, [rw_log_fn, _P, ctypes.c_int]),
    "rw_set_kernels": (_S, [ctypes.c_char_p, _E]),
    "rw_get_kernels": (ctypes.c_char_p, []),
    "rw_set_numerics": (_S, [ctypes.c_char_p, _E]),
    "rw_get_numerics": (ctypes.c_char_p, []),
    "rw_model_params_init": (None, [ctypes.POINTER(rw_model_params), ctypes.c_size_t]),
    "rw_model_open": (_S, [ctypes.c_char_p, ctypes.POINTER(rw_model_params), ctypes.POINTER(_P), _E]),
    "rw_model_close": (None, [_P]),
    "rw_model_arch": (ctypes.c_char_p, [_P]),
    "rw_model_lora_count": (ctypes.c_int, [_P]),
    "rw_model_lora_get": (_S, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_float), _E]),
    "rw_architecture": (ctypes.c_char_p, [ctypes.c_size_t]),
    "rw_model_n_vocab": (ctypes.c_int32, [_P]),
    "rw_model_n_ctx_train": (ctypes.c_int64, [_P]),
    "rw_model_token_is_eog": (ctypes.c_bool, [_P, ctypes.c_int32]),
    "rw_model_tokenize": (
        _S,
        [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool, ctypes.c_bool, ctypes.POINTER(c_int32_p),
         ctypes.POINTER(ctypes.c_size_t), _E],
    ),
    "rw_model_detokenize": (
        _S, [_P, c_int32_p, ctypes.c_size_t, ctypes.c_bool, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t), _E]
    ),
    "rw_chat_render": (
        _S, [_P, ctypes.POINTER(rw_chat_message), ctypes.c_size_t, ctypes.c_bool, ctypes.POINTER(_P), _E]
    ),
    "rw_chat_render_json": (
        _S, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool, ctypes.c_int, ctypes.POINTER(_P), _E]
    ),
    "rw_sampling_default": (rw_sampling, []),
    "rw_gen_options_init": (None, [ctypes.POINTER(rw_gen_options), ctypes.c_size_t]),
    "rw_run_params_default": (rw_run_params, []),
    "rw_generate": (
        _S,
        [_P, ctypes.c_char_p, ctypes.POINTER(rw_gen_options), ctypes.POINTER(rw_run_params), rw_text_fn, _P,
         ctypes.POINTER(_P), ctypes.POINTER(rw_gen_result), _E],
    ),
    "rw_engine_params_init": (None, [ctypes.POINTER(rw_engine_params), ctypes.c_size_t]),
    "rw_engine_open": (_S, [_P, ctypes.POINTER(rw_engine_params), ctypes.POINTER(_P), _E]),
    "rw_engine_close": (None, [_P]),
    "rw_engine_submit_text": (
        _S, [_P, ctypes.c_char_p, ctypes.POINTER(rw_gen_options), rw_event_fn, _P, ctypes.POINTER(ctypes.c_uint64), _E]
    ),
    "rw_engine_submit_ids": (
        _S,
        [_P, c_int32_p, ctypes.c_int64, ctypes.POINTER(rw_gen_options), rw_event_fn, _P,
         ctypes.POINTER(ctypes.c_uint64), _E],
    ),
    "rw_engine_cancel": (None, [_P, ctypes.c_uint64]),
    "rw_engine_run": (
        _S, [_P, ctypes.c_char_p, ctypes.POINTER(rw_gen_options), ctypes.POINTER(_P), ctypes.POINTER(rw_gen_result), _E]
    ),
    "rw_engine_step": (ctypes.c_int, [_P, _E]),
    "rw_engine_stats_get": (None, [_P, ctypes.POINTER(rw_engine_stats_public)]),
    "rw_model_pooling": (ctypes.c_int, [_P]),
    "rw_model_n_embd": (ctypes.c_int, [_P]),
    "rw_embed_options_init": (None, [ctypes.POINTER(rw_embed_options), ctypes.c_size_t]),
    "rw_engine_embed": (
        _S, [_P, c_int32_p, ctypes.c_int64, ctypes.POINTER(rw_embed_options), c_float_p,
             ctypes.POINTER(ctypes.c_int64), _E]
    ),
    "rw_engine_embed_text": (
        _S, [_P, ctypes.c_char_p, ctypes.POINTER(rw_embed_options), c_float_p, ctypes.POINTER(ctypes.c_int64), _E]
    ),
    "rw_engine_rerank": (
        _S, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double), _E]
    ),
    "rw_seq_new": (_S, [_P, ctypes.c_int64, ctypes.c_bool, ctypes.POINTER(_P), _E]),
    "rw_seq_free": (None, [_P]),
    "rw_seq_eval": (_S, [_P, c_int32_p, ctypes.c_int64, c_float_p, _E]),
    "rw_seq_length": (ctypes.c_int64, [_P]),
    "rw_seq_rewind": (_S, [_P, ctypes.c_int64, _E]),
    "rw_seq_save": (_S, [_P, ctypes.c_char_p, _E]),
    "rw_seq_load": (_S, [_P, ctypes.c_char_p, _E]),
    "rw_seq_eval_batch": (_S, [ctypes.POINTER(rw_seq_batch), ctypes.c_int, _E]),
    "rw_model_state_bytes": (ctypes.c_size_t, [_P, ctypes.c_int64, ctypes.c_bool, ctypes.c_int]),
    # Tools (include/rewind.h, "tools"): a GGUF file read without loading a
    # model, the disk tier's verification, the process switches.
    "rw_model_file_open": (_S, [ctypes.c_char_p, ctypes.POINTER(_P), _E]),
    "rw_model_file_close": (None, [_P]),
    "rw_model_file_version": (ctypes.c_uint32, [_P]),
    "rw_model_file_alignment": (ctypes.c_uint32, [_P]),
    "rw_model_file_data_offset": (ctypes.c_uint64, [_P]),
    "rw_model_file_size": (ctypes.c_uint64, [_P]),
    "rw_model_file_n_meta": (ctypes.c_size_t, [_P]),
    "rw_model_file_meta": (ctypes.c_char_p, [_P, ctypes.c_size_t, ctypes.POINTER(rw_meta_value)]),
    "rw_model_file_find_meta": (ctypes.c_bool, [_P, ctypes.c_char_p, ctypes.POINTER(rw_meta_value)]),
    "rw_meta_elem": (ctypes.c_bool, [ctypes.POINTER(rw_meta_value), ctypes.c_uint64, ctypes.POINTER(rw_meta_value)]),
    "rw_meta_type_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rw_model_file_n_tensors": (ctypes.c_size_t, [_P]),
    "rw_model_file_tensor": (ctypes.c_bool, [_P, ctypes.c_size_t, ctypes.POINTER(rw_tensor_info)]),
    "rw_model_file_find_tensor": (ctypes.c_int64, [_P, ctypes.c_char_p]),
    "rw_model_file_read_rows": (_S, [_P, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint64, c_float_p, _E]),
    "rw_model_file_n_parts": (ctypes.c_uint32, [_P]),
    "rw_model_file_tensor_part": (ctypes.c_uint32, [_P, ctypes.c_size_t]),
    "rw_model_file_split": (
        _S, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint32), _E]
    ),
    "rw_model_file_merge": (_S, [ctypes.c_char_p, ctypes.c_char_p, _E]),
    "rw_model_text_get": (ctypes.c_char_p, [_P, ctypes.c_int]),
    "rw_cache_verify": (
        _S, [_P, ctypes.POINTER(rw_engine_params), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
             ctypes.POINTER(ctypes.c_int), _E]
    ),
    "rw_set_packed_panels": (_S, [ctypes.c_bool, _E]),
    "rw_set_avx_vnni": (_S, [ctypes.c_bool, _E]),
    "rw_set_weight_prefetch": (_S, [ctypes.c_char_p, _E]),
    "rw_get_weight_prefetch": (ctypes.c_char_p, []),
    "rw_set_stored_panels": (_S, [ctypes.c_char_p, _E]),
    "rw_get_stored_panels": (ctypes.c_char_p, []),
    "rw_install_fault_guard": (_S, [_E]),
    "rw_quantize_params_init": (None, [ctypes.POINTER(rw_quantize_params), ctypes.c_size_t]),
    "rw_quantize_file": (
        _S, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(rw_quantize_params), _E]
    ),
    "rw_quantize_type": (ctypes.c_char_p, [ctypes.c_size_t]),
    "rw_imatrix_begin": (_S, [_P, ctypes.c_bool, ctypes.POINTER(_P), _E]),
    "rw_imatrix_save": (_S, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, _E]),
    "rw_imatrix_end": (None, [_P]),
    # The server-grade calls (include/rewind.h, "Building a server on the
    # library"): declared so they can be called raw; their structs are passed
    # as pointers (c_void_p) the caller fills with ctypes of its own.
    "rw_template_vars_init": (None, [ctypes.POINTER(rw_template_vars), ctypes.c_size_t]),
    "rw_request_params_init": (None, [ctypes.POINTER(rw_request_params), ctypes.c_size_t]),
    "rw_chat_output_params_init": (None, [ctypes.POINTER(rw_chat_output_params), ctypes.c_size_t]),
    "rw_errorf": (_S, None),  # variadic: (rw_error *, rw_status, fmt, ...)
    "rw_log": (None, None),  # variadic: (level, fmt, ...)
    "rw_log_enabled": (ctypes.c_bool, [ctypes.c_int]),
    "rw_mapped_file_fault_count": (ctypes.c_uint64, []),
    "rw_model_tokenizer": (_P, [_P]),
    "rw_tokenizer_n_vocab": (ctypes.c_int32, [_P]),
    "rw_tokenizer_bos": (ctypes.c_int32, [_P]),
    "rw_tokenizer_eos": (ctypes.c_int32, [_P]),
    "rw_tokenizer_add_bos": (ctypes.c_bool, [_P]),
    "rw_tokenizer_is_eog": (ctypes.c_bool, [_P, ctypes.c_int32]),
    "rw_tokenizer_fim": (ctypes.c_int32, [_P, ctypes.c_int]),
    "rw_tokenizer_max_token_len": (ctypes.c_size_t, [_P]),
    "rw_tokenizer_find_control": (ctypes.c_long, [_P, ctypes.c_char_p, ctypes.c_size_t]),
    "rw_token_to_piece": (ctypes.c_size_t, [_P, ctypes.c_int32, ctypes.c_bool, ctypes.c_char_p, ctypes.c_size_t]),
    "rw_tokenize": (
        _S,
        [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool, ctypes.c_bool, ctypes.POINTER(c_int32_p),
         ctypes.POINTER(ctypes.c_size_t), _E],
    ),
    "rw_detokenize": (
        _S, [_P, c_int32_p, ctypes.c_size_t, ctypes.c_bool, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t), _E]
    ),
    "rw_tokenize_guarded": (
        _S,
        [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool, ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
         ctypes.POINTER(c_int32_p), ctypes.POINTER(ctypes.c_size_t), _E],
    ),
    "rw_model_chat_template": (_P, [_P]),
    "rw_chat_template_source": (ctypes.c_char_p, [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "rw_chat_template_apply": (_S, [_P, _P, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t), _E]),
    "rw_chat_prompt_opens_reasoning": (
        ctypes.c_bool, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p]
    ),
    "rw_chat_rerank_prompt": (
        _S,
        [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_P),
         ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t), _E],
    ),
    "rw_tool_format_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rw_tool_format_parse": (ctypes.c_bool, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "rw_grammar_check": (_S, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _E]),
    "rw_schema_to_gbnf": (
        _S, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P), _E]
    ),
    "rw_json_object_gbnf": (_S, [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P), _E]),
    "rw_engine_get_model": (_P, [_P]),
    "rw_engine_setting_get": (ctypes.c_int64, [_P, ctypes.c_int]),
    "rw_engine_slots": (ctypes.c_int, [_P, _P, c_int32_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]),
    "rw_engine_slot_save": (
        _S, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_size_t), _E]
    ),
    "rw_engine_slot_restore": (
        _S, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_size_t), _E]
    ),
    "rw_engine_slot_erase": (_S, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), _E]),
    "rw_engine_submit_tokens": (
        _S, [_P, c_int32_p, ctypes.c_int64, _P, _P, _P, ctypes.POINTER(ctypes.c_uint64), _E]
    ),
    "rw_chat_output_open": (_S, [_P, ctypes.POINTER(_P), _E]),
    "rw_chat_output_free": (None, [_P]),
    "rw_chat_output_feed": (_S, [_P, ctypes.c_char_p, ctypes.c_size_t, _P, _P, _E]),
    "rw_chat_output_finish": (_S, [_P, _P, _P, _E]),
    "rw_chat_output_set_cut": (None, [_P, ctypes.c_bool]),
    "rw_chat_output_n_calls": (ctypes.c_int, [_P]),
    "rw_chat_output_calls_done": (ctypes.c_bool, [_P]),
    "rw_chat_output_in_reasoning": (ctypes.c_bool, [_P]),
    "rw_chat_output_parse_all": (_S, [_P, ctypes.c_char_p, ctypes.c_size_t, _P, _E]),
    "rw_chat_parsed_free": (None, [_P]),
    "rw_engine_submit_embedding": (
        _S,
        [_P, c_int32_p, ctypes.c_int64, ctypes.c_int, c_int32_p, ctypes.c_int, _P, _P,
         ctypes.POINTER(ctypes.c_uint64), _E],
    ),
    # chat templates and tokenizers of a file without its weights, chat
    # requests prepared for a template, grammars, the full statistics: the
    # calls `rewind serve` uses (opaque structs: pointers here)
    "rw_chat_template_parse": (_S, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_P), _E]),
    "rw_chat_template_load": (
        _S, [ctypes.c_char_p, ctypes.POINTER(_P), ctypes.POINTER(_P), ctypes.POINTER(_P), _E]
    ),
    "rw_chat_template_free": (None, [_P]),
    "rw_chat_template_caps": (None, [_P, _P]),
    "rw_tokenizer_open": (_S, [ctypes.c_char_p, ctypes.POINTER(_P), _E]),
    "rw_tokenizer_close": (None, [_P]),
    "rw_chat_request_init": (None, [_P, ctypes.c_size_t]),
    "rw_chat_prepare": (_S, [_P, _P, ctypes.POINTER(_P), _E]),
    "rw_chat_prepared_free": (None, [_P]),
    "rw_chat_prepared_messages": (_P, [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "rw_chat_prepared_vars": (_P, [_P]),
    "rw_chat_render_request": (_S, [_P, _P, _P, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t), _E]),
    "rw_grammar_match": (
        _S,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
         ctypes.POINTER(ctypes.c_bool), ctypes.POINTER(ctypes.c_bool), _E],
    ),
    "rw_engine_stats_full": (_S, [_P, _P, ctypes.c_size_t, _E]),
    "rw_pcache_reason_name": (ctypes.c_char_p, [ctypes.c_int]),
}

# The header's function names, for the test that compares them with
# include/rewind.h.
FUNCTIONS = tuple(_PROTOTYPES)


def _candidates():
    """Where to look for the library, in order: REWIND_LIBRARY (a file),
    pkg-config's libdir for rewind, then the system's loader."""
    env = os.environ.get("REWIND_LIBRARY")
    if env:
        return [env]  # an explicit choice: nothing else is tried
    out = []
    try:
        libdir = subprocess.run(
            ["pkg-config", "--variable=libdir", "rewind"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        libdir = ""
    if libdir:
        out += [os.path.join(libdir, "librewind.so.0"), os.path.join(libdir, "librewind.so")]
    found = ctypes.util.find_library("rewind")
    if found:
        out.append(found)
    out.append("librewind.so.0")
    return out


_lock = threading.Lock()
_lib = None


def load(path=None):
    """Loads librewind (once per process) and returns the ctypes handle.
    path overrides the search; a second call with another path is an
    error, since one process holds one copy of the library."""
    global _lib
    with _lock:
        if _lib is not None:
            if path is not None and os.path.realpath(path) != os.path.realpath(_lib._name):
                raise RuntimeError("librewind is already loaded from %s" % _lib._name)
            return _lib
        tried = []
        for cand in [path] if path else _candidates():
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                tried.append("%s (%s)" % (cand, e))
                continue
            _declare(lib)
            _check_version(lib)
            _lib = lib
            return lib
        raise OSError(
            "cannot load librewind; set REWIND_LIBRARY to the library file, or install rewind "
            "(make install) so that pkg-config finds it. Tried: " + "; ".join(tried)
        )


def _declare(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            raise OSError("%s has no %s: not a librewind this package supports" % (lib._name, name))
        f.restype = restype
        f.argtypes = argtypes
    # The header's inline *_default() of the sized parameter structs: the
    # struct as this package declares it, filled by the library's *_init
    # with this struct's size (fields the package does not know: defaults).
    for cls in (rw_model_params, rw_gen_options, rw_engine_params, rw_embed_options, rw_template_vars,
                rw_request_params, rw_chat_output_params, rw_chat_request, rw_quantize_params):
        setattr(lib, cls.__name__ + "_default", _sized_default(getattr(lib, cls.__name__ + "_init"), cls))


def _sized_default(init, cls):
    def make():
        p = cls()
        init(ctypes.byref(p), ctypes.sizeof(p))
        return p

    return make


def _check_version(lib):
    v = lib.rw_version().decode()
    major, minor = (int(x) for x in v.split(".")[:2])
    if (major, minor) != HEADER_VERSION:
        raise OSError(
            "%s is rewind %s; these bindings mirror rewind.h %d.%d (the C structs may differ)"
            % (lib._name, v, HEADER_VERSION[0], HEADER_VERSION[1])
        )


def take_string(ptr, n=None):
    """The bytes of a string the library returned, which is then freed."""
    if not ptr:
        return b""
    try:
        return ctypes.string_at(ptr, n) if n is not None else ctypes.string_at(ptr)
    finally:
        _lib.rw_free(ptr)


def check(st, err):
    """Raises the typed error for a failed call's status and error record."""
    if st == 0:
        return
    from . import errors

    name = _lib.rw_status_name(st).decode()
    msg = err.msg.decode("utf-8", "replace") or _lib.rw_status_message(st).decode()
    raise errors.make(name, msg, st)


def status_code(name):
    """The rw_status number of a status name ("ERR_BUSY"), from the library."""
    i = 0
    while True:
        n = _lib.rw_status_name(i).decode()
        if n == name:
            return i
        if n == "ERR_UNKNOWN":
            return None
        i += 1
