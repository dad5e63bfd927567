/* rewind.h - the public C API of rewind, an LLM inference engine whose
 * per-sequence state (attention KV caches and the recurrent states of hybrid
 * models) rewinds exactly to any token, so prompt caching, batching and
 * speculative decoding are exact.
 *
 * This is the only header an embedder includes; build with
 *     cc app.c $(pkg-config --cflags --libs rewind)
 *
 * The pieces, from the bottom up:
 *   - status codes and error records (every fallible call returns rw_status
 *     and fills an rw_error with a one-line message; the library never exits
 *     or aborts on bad input and never writes to stderr: it logs through the
 *     hook set with rw_log_set);
 *   - rw_model: a GGUF file opened with its weights, tokenizer and chat
 *     template (rw_model_open);
 *   - rw_chat_render: a conversation rendered through the model's template;
 *   - rw_generate: synchronous generation with a token callback;
 *   - rw_engine: the continuous-batching engine with the prefix cache
 *     (several requests at once from any thread; a request whose prompt
 *     starts like an earlier one reuses its state, bitwise exactly);
 *   - rw_seq: one sequence driven by hand: evaluate tokens (several
 *     sequences in one batch too), read logits, rewind, save and load a
 *     state file;
 *   - what a server built on the library needs beyond those (tokenizer and
 *     template handles, token-level requests, chat output parsing), and
 *     tools: a GGUF file read without loading a model, the disk tier's
 *     verification, process switches.
 *
 * Errors: every function that returns rw_status returns RW_OK on success.
 * On failure it returns the code it also stores in err (when err is not
 * NULL) with a one-line message, and its out-parameters hold "nothing":
 * NULL for pointers (*out, *ids, *text), 0 for counts and ids, a zeroed
 * rw_gen_result; an object it was given (a model, engine or sequence) is as
 * it was before the call unless the function says otherwise. RW_ERR_NOMEM
 * and RW_ERR_INTERNAL can come from any of them and are not listed below;
 * RW_ERR_INVALID_ARG is also what a NULL where an object is needed gives.
 *
 * Ownership: a function that returns a pointer through an out-parameter
 * gives it to the caller, who frees it with the matching *_free / *_close
 * (strings and arrays with rw_free). Borrowed pointers are marked so.
 *
 * Parameter structs (rw_model_params, rw_gen_options, rw_engine_params,
 * rw_embed_options) start with struct_size, which their *_default()
 * (inline here) and *_init() set to the size this header declares: start
 * from the default, then change fields. A later version appends fields; the library reads
 * only the first struct_size bytes of the caller's struct and takes the
 * defaults for the rest, so a program built against an older header keeps
 * working unchanged (struct_size 0, from a zeroed struct, means the first
 * sized layout). A struct_size larger than the library knows is accepted
 * when the bytes past its fields are zero (RW_ERR_UNSUPPORTED otherwise:
 * the program asks for something this older library cannot do); smaller
 * than the first layout is RW_ERR_INVALID_ARG. Structs embedded in others
 * (rw_sampling, rw_run_params) and the structs the library fills
 * (rw_gen_result, rw_engine_stats_public) never change; what they would
 * gain is appended to the sized struct around them, or comes with a new
 * function. See docs/api.md, "Compatibility".
 *
 * Threads: an rw_model may be shared by threads for the read-only calls
 * (tokenize, detokenize, chat render, the getters). Forward passes of one
 * model must not run concurrently: at most one rw_engine per model, and no
 * rw_generate / rw_seq_eval on a model while its engine is alive. rw_engine
 * calls are thread-safe. */
#ifndef REWIND_H
#define REWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's API: librewind is built with hidden visibility, so
 * the shared library exports exactly the functions marked RW_API, which are
 * the functions of this header (a test compares nm -D with it). */
#if defined(__GNUC__) || defined(__clang__)
#define RW_API __attribute__((visibility("default")))
#else
#define RW_API
#endif

/* ---- version -------------------------------------------------------- */

#define RW_VERSION_MAJOR 0
#define RW_VERSION_MINOR 25
#define RW_VERSION_PATCH 0
#define RW_VERSION_STRING "0.25.0"
/* One integer that compares: 10000 * major + 100 * minor + patch. */
#define RW_VERSION_NUMBER (RW_VERSION_MAJOR * 10000 + RW_VERSION_MINOR * 100 + RW_VERSION_PATCH)

/* The version of the library linked at run time ("0.22.0"). */
RW_API const char *rw_version(void);

/* ---- status and errors ---------------------------------------------- */

/* X(name, message): the enum, rw_status_name() and rw_status_message() are
 * all generated from this list so they cannot drift apart. */
#define RW_STATUS_MAP(X)                                                        \
    X(OK, "success")                                                           \
    X(ERR_INVALID_ARG, "invalid argument")                                     \
    X(ERR_NOMEM, "out of memory")                                              \
    X(ERR_IO, "input/output error")                                            \
    X(ERR_FORMAT, "malformed file")                                            \
    X(ERR_UNSUPPORTED, "unsupported feature")                                  \
    X(ERR_NOT_FOUND, "not found")                                              \
    X(ERR_RANGE, "value out of range")                                         \
    X(ERR_TEMPLATE, "template error")                                          \
    X(ERR_CONTEXT, "context overflow")                                         \
    X(ERR_CANCELLED, "cancelled")                                              \
    X(ERR_BUSY, "too many requests")                                           \
    X(ERR_INTERNAL, "internal error")

typedef enum {
#define RW_STATUS_ENUM(name, msg) RW_##name,
    RW_STATUS_MAP(RW_STATUS_ENUM)
#undef RW_STATUS_ENUM
        RW_STATUS_COUNT
} rw_status;

/* An error record filled by the function that failed. msg is always a
 * NUL-terminated single line (no newline). Pass NULL where the message is
 * not wanted. */
typedef struct rw_error {
    rw_status code;
    char msg[512];
} rw_error;

RW_API const char *rw_status_name(rw_status s);    /* "ERR_FORMAT" */
RW_API const char *rw_status_message(rw_status s); /* "malformed file" */

/* Frees a string or array the library returned (rw_model_tokenize's ids,
 * rw_chat_render's text, ...). NULL is fine. */
RW_API void rw_free(void *p);

/* ---- logging -------------------------------------------------------- */

typedef enum { RW_LOG_ERROR = 0, RW_LOG_WARN, RW_LOG_INFO, RW_LOG_DEBUG } rw_log_level;

/* msg is one line without a newline, valid during the call only. The hook
 * may be called from any of the library's threads (the engine's scheduler,
 * the disk writer), so it must be thread-safe and quick. */
typedef void (*rw_log_fn)(void *user, rw_log_level level, const char *msg);

/* Sets the process-wide log hook (NULL: the library stays silent, the
 * default). Messages above max_level are not formatted at all. */
RW_API void rw_log_set(rw_log_fn fn, void *user, rw_log_level max_level);

/* ---- process-wide settings ------------------------------------------ */

/* The kernel tier every matrix product and op of the process runs on:
 * "ref" (plain C), "avx2", "avx512", "amx" (AVX-512 with the many-row
 * products on Intel's AMX tiles) or "neon"; NULL or "" = the best this
 * CPU has (the default). Every tier computes the same bits, so this changes
 * speed only. Weights are packed for the tier when a model opens, so the
 * tier can change only while no model is open: call it first, from one
 * thread. Errors: RW_ERR_INVALID_ARG (an unknown name), RW_ERR_UNSUPPORTED
 * (this CPU lacks the tier), RW_ERR_BUSY (a model is open and the tier
 * would change; setting the tier in use is fine). */
RW_API rw_status rw_set_kernels(const char *tier, rw_error *err);
/* The tier in use ("avx512"); static storage. */
RW_API const char *rw_get_kernels(void);
/* The summation order of the matrix products: "auto" (the default; our
 * order, "fast", for every type) or "ggml" (llama.cpp's arithmetic bit for
 * bit; slower in many-row products); NULL = "auto". State files and cache
 * entries record it (one made under another order is refused). As
 * rw_set_kernels: only while no model is open. Errors: RW_ERR_INVALID_ARG,
 * RW_ERR_BUSY. */
RW_API rw_status rw_set_numerics(const char *numerics, rw_error *err);
/* The order in use ("auto", "fast" or "ggml"); static storage. */
RW_API const char *rw_get_numerics(void);

/* ---- models --------------------------------------------------------- */

typedef struct rw_model rw_model;

typedef struct {
    size_t struct_size; /* sizeof(rw_model_params); set by rw_model_params_default / _init */
    /* Process-wide settings, kept here for older callers: a value that is
     * not NULL goes to rw_set_kernels / rw_set_numerics before the file
     * opens (so it fails with RW_ERR_BUSY when another model is open under
     * other settings). NULL leaves the process's setting as it is. */
    const char *kernels;
    const char *numerics;
    /* A chat template (Jinja source) to use instead of the file's; NULL =
     * the file's tokenizer.chat_template, or ChatML if it has none. */
    const char *chat_template;
    /* Fields added after the first sized layout (a caller whose
     * struct_size ends before one gets its default): */
    /* Threads of the forward passes run outside an engine (rw_seq_eval,
     * rw_seq_eval_batch, rw_seq_rewind); 0 (the default) = one per
     * physical core. Results never depend on it. */
    int n_threads;
    /* LoRA adapters applied at open, in this order: n_lora entries at lora
     * (NULL / 0: none). Each is a GGUF adapter file as llama.cpp's
     * convert_lora_to_gguf.py writes it, for the model's architecture; each
     * weight it names computes W x + B (A x) * scale * alpha / rank (scale
     * alone when the file has no alpha), as llama.cpp's --lora-scaled. The
     * paths are read during rw_model_open only. A model with adapters is
     * another model for saved states and the prefix cache's disk tier. */
    const struct rw_lora_adapter *lora;
    int n_lora;
} rw_model_params;

/* One adapter of rw_model_params.lora. */
typedef struct rw_lora_adapter {
    const char *path;
    float scale; /* 1 = the adapter as trained; 0 = no effect */
} rw_lora_adapter;

/* Fills the first size bytes of *p with the defaults and sets
 * p->struct_size = size: pass sizeof *p (the program's struct, so the
 * library never writes past it). */
RW_API void rw_model_params_init(rw_model_params *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the
 * size is the program's, not the library's). */
static inline rw_model_params rw_model_params_default(void) {
    rw_model_params p;
    rw_model_params_init(&p, sizeof p);
    return p;
}

/* Opens a GGUF model: maps the file, binds the weights (checked against the
 * architecture's shapes and types), loads the tokenizer and the chat
 * template. params may be NULL (defaults). The caller frees *out with
 * rw_model_close. Errors: RW_ERR_IO (cannot open or map the file),
 * RW_ERR_FORMAT (malformed: the message names the offset or tensor),
 * RW_ERR_UNSUPPORTED (an architecture or type rewind does not run),
 * RW_ERR_TEMPLATE (the chat template does not parse), and those of
 * rw_set_kernels / rw_set_numerics for params' settings. */
RW_API rw_status rw_model_open(const char *path, const rw_model_params *params, rw_model **out, rw_error *err);
/* NULL is fine. Every engine, sequence and generation using m must be gone. */
RW_API void rw_model_close(rw_model *m);

RW_API const char *rw_model_arch(const rw_model *m); /* general.architecture, borrowed */
/* The LoRA adapters applied at open: their count, and the i-th one's path
 * (borrowed, valid until rw_model_close) and scale; RW_ERR_INVALID_ARG for
 * i out of range. */
RW_API int rw_model_lora_count(const rw_model *m);
RW_API rw_status rw_model_lora_get(const rw_model *m, int i, const char **path, float *scale, rw_error *err);
/* The architectures (general.architecture values) this build loads: the i-th
 * name, static, or NULL once i is past the last. */
RW_API const char *rw_architecture(size_t i);
RW_API int32_t rw_model_n_vocab(const rw_model *m);
RW_API int64_t rw_model_n_ctx_train(const rw_model *m);
/* Whether the token ends a generation (EOS, EOT, <|im_end|>, ...). */
RW_API bool rw_model_token_is_eog(const rw_model *m, int32_t token);

/* Tokenizes len bytes of UTF-8 text as llama.cpp does. add_special adds
 * BOS/EOS as the vocabulary asks; parse_special turns the text of control
 * tokens ("<|im_start|>") into those tokens (use it for rendered templates,
 * never for untrusted user text). *ids is the caller's (rw_free); *n_ids
 * may be 0. Errors: RW_ERR_INVALID_ARG (NULL text, ids or n_ids). */
RW_API rw_status rw_model_tokenize(const rw_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **ids, size_t *n_ids, rw_error *err);
/* The text of n tokens, NUL-terminated, *out_len bytes (caller: rw_free).
 * render_special: control tokens as their text, else dropped. out_len may
 * be NULL. Errors:
 * RW_ERR_INVALID_ARG (an id outside the vocabulary, NULL out). */
RW_API rw_status rw_model_detokenize(const rw_model *m, const int32_t *ids, size_t n, bool render_special, char **out,
                              size_t *out_len, rw_error *err);

/* ---- chat ----------------------------------------------------------- */

typedef struct {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* UTF-8 */
} rw_chat_message;

/* Renders messages through the model's chat template (Jinja with
 * transformers' semantics), ending with the assistant's generation prompt
 * when add_generation_prompt. *out is NUL-terminated (caller: rw_free).
 * Tokenize the result with parse_special = true. Errors:
 * RW_ERR_INVALID_ARG (a message without role or content, text that is not
 * UTF-8), RW_ERR_TEMPLATE (the template fails on these messages: its
 * raise_exception text, or where it went wrong). */
RW_API rw_status rw_chat_render(const rw_model *m, const rw_chat_message *msgs, size_t n_msgs, bool add_generation_prompt,
                         char **out, rw_error *err);
/* The same from a JSON array of message objects as the OpenAI API sends
 * them, with an optional JSON array of tools (NULL: none) and the template
 * variable enable_thinking (-1: undefined, 0, 1). Errors: as rw_chat_render,
 * and RW_ERR_INVALID_ARG for JSON that does not parse. */
RW_API rw_status rw_chat_render_json(const rw_model *m, const char *messages_json, const char *tools_json,
                              bool add_generation_prompt, int enable_thinking, char **out, rw_error *err);

/* ---- sampling and generation ---------------------------------------- */

typedef struct {
    float temperature;       /* <= 0: greedy (ties to the lowest id) */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    float repeat_penalty;    /* 1: off */
    uint64_t seed;           /* the request's own generator: same seed, same tokens */
} rw_sampling;

/* Greedy, every filter off. */
RW_API rw_sampling rw_sampling_default(void);

typedef struct {
    size_t struct_size;       /* sizeof(rw_gen_options); set by rw_gen_options_default / _init */
    rw_sampling sampling;
    int64_t max_tokens;       /* >= 1 */
    const char *const *stop;  /* n_stop stop strings (cut from the output), or NULL */
    int n_stop;
    bool ignore_eos;          /* keep going past end-of-generation tokens */
    /* Structured output (at most one of the two; NULL: free text): a
     * grammar in llama.cpp's GBNF syntax, or a JSON Schema (as OpenAI's
     * response_format json_schema; "{}" = any JSON value) the output must
     * match. Tokens that would break it are masked before sampling, so the
     * output is valid wherever it ends; it ends where the grammar can. A
     * grammar or schema that does not compile is RW_ERR_INVALID_ARG with
     * the place and the reason. */
    const char *grammar;
    const char *json_schema;
} rw_gen_options;

/* Fills the first size bytes of *p with the defaults and sets
 * p->struct_size = size: pass sizeof *p (the program's struct, so the
 * library never writes past it). */
RW_API void rw_gen_options_init(rw_gen_options *p, size_t size);
/* The defaults (greedy, 256 tokens), sized for this header's struct
 * (inline, so the size is the program's, not the library's). */
static inline rw_gen_options rw_gen_options_default(void) {
    rw_gen_options p;
    rw_gen_options_init(&p, sizeof p);
    return p;
}

typedef enum {
    RW_DONE_NONE = 0, /* not finished */
    RW_DONE_STOP,     /* end-of-generation token or stop string */
    RW_DONE_LENGTH,   /* max_tokens or the context reached */
    RW_DONE_ERROR,    /* the forward pass failed */
} rw_done_reason;

/* What a request produced: counts and how it ended. */
typedef struct {
    int64_t prompt_tokens;
    int64_t cached_tokens;    /* prompt tokens whose state came from the prefix cache */
    int64_t completion_tokens;
    rw_done_reason reason;
} rw_gen_result;

/* Called with each piece of new text (complete UTF-8, stop strings cut; not
 * NUL-terminated). Return false to stop the generation early (reason
 * RW_DONE_STOP; the text ends with that piece). */
typedef bool (*rw_text_fn)(void *user, const char *text, size_t len);

typedef struct {
    int n_threads;   /* 0: one per physical core */
    int64_t n_ctx;   /* positions of the sequence; 0: 4096 */
    bool kv_f32;     /* f32 KV cache (llama.cpp's goldens use it); default f16 */
} rw_run_params;

RW_API rw_run_params rw_run_params_default(void);

/* Generates up to opt->max_tokens tokens after prompt (text, tokenized with
 * parse_special, e.g. the output of rw_chat_render) and returns when done.
 * cb (may be NULL) runs on a library thread while rw_generate blocks. The
 * text of the whole answer is in *text when text is not NULL (caller:
 * rw_free). run may be NULL (defaults). The model's forward passes are the
 * caller's for the call (no engine on m meanwhile). Errors:
 * RW_ERR_INVALID_ARG (bad options, a grammar or schema that does not
 * compile), RW_ERR_CONTEXT (prompt + max_tokens > n_ctx), RW_ERR_IO (the
 * model file was truncated on disk under its mapping). A generation whose
 * forward pass fails midway still returns RW_OK, with res->reason
 * RW_DONE_ERROR and the text as far as it got. */
RW_API rw_status rw_generate(rw_model *m, const char *prompt, const rw_gen_options *opt, const rw_run_params *run,
                      rw_text_fn cb, void *user, char **text, rw_gen_result *res, rw_error *err);

/* ---- the engine: continuous batching and the prefix cache ------------ */

typedef struct rw_engine rw_engine;

#define RW_SPECULATE_MTP 1u   /* rw_engine_params.spec */
#define RW_SPECULATE_NGRAM 2u

typedef struct {
    size_t struct_size;      /* sizeof(rw_engine_params); set by rw_engine_params_default / _init */
    rw_run_params run;
    int max_running;         /* sequences generating at once; default 4 */
    int max_queued;          /* requests waiting beyond those (then RW_ERR_BUSY); default 64 */
    int64_t prefill_chunk;   /* prompt tokens per step over all sequences; default 256 */
    size_t cache_bytes;      /* the prefix cache's memory budget; 0 = off; default 256 MiB */
    const char *cache_dir;   /* a folder for the cache's disk tier, or NULL */
    size_t cache_dir_bytes;  /* its byte budget (with cache_dir); default 1 GiB */
    /* Hybrid models: recurrent-state checkpoints each sequence keeps (in
     * the prefix cache too), newest and message boundaries first; fewer
     * means less memory and more recomputation when a later prompt
     * diverges between them. 0 (the default) = up to 256 MiB a sequence:
     * every 64th position over the last 256 besides. */
    int max_checkpoints;
    /* Speculative decoding in every request, exact: greedy output is bitwise
     * what it is without it, sampled output identically distributed. spec:
     * RW_SPECULATE_MTP (the model's own multi-token-prediction block, when
     * its file has one; no rw_seq of the model may exist when the engine
     * opens) and/or RW_SPECULATE_NGRAM (drafts copied from earlier in the
     * context), 0 = none. draft: a smaller model with the same vocabulary,
     * from rw_model_open (not with RW_SPECULATE_MTP; it must outlive the
     * engine, which runs its forward passes, so it may have no engine of its
     * own). draft_max: the most tokens drafted a step (0 = 4, at most 15);
     * how many adapts to the measured acceptance and the drafts' cost
     * (none where they do not pay), unless draft_fixed: always draft_max. */
    unsigned spec;
    rw_model *draft;
    int draft_max;
    bool draft_fixed;
    /* Step-driven: no scheduler thread; the embedder calls rw_engine_step
     * in its own loop, and every callback runs inside that call. */
    bool manual;
    /* Fields added after the first sized layout (a caller whose
     * struct_size ends before one gets its default): */
    /* Seconds after a request ends before its cache entries are written to
     * the disk tier (with cache_dir; a later request that extends the same
     * prompt first makes the write unneeded). >= 0; default 1. */
    double cache_write_delay;
    /* RW_SPECULATE_NGRAM: the n-gram looked up in the context, 1..64 tokens
     * (0 = 3), and how often it must have occurred before (0 = once). */
    int ngram_n;
    int ngram_min_hits;
    /* Admission bound on the running sequences' state (KV and recurrent
     * state, the draft's included): a request waits until its state fits
     * (one runs alone whatever its size); 0 (the default) = no bound.
     * rw_model_state_bytes estimates a sequence's. */
    size_t max_state_bytes;
    /* With cache_dir: entries reach the folder only when evicted from
     * memory and at rw_engine_close, not cache_write_delay seconds after
     * their request (default false). */
    bool cache_dir_evict_only;
    /* rw_engine_close writes the pending disk-tier entries for at most
     * this many seconds (the rest are dropped; the folder stays valid);
     * 0 (the default) = 10. */
    double cache_flush_seconds;
    /* Keeps 64 MiB of state memory faulted in ahead of need (default
     * false). */
    bool prefault_states;
    /* A grammar's work per token mask and per request, in the grammar
     * matcher's work units: 0 (the default) = the library's bounds, -1 =
     * none (docs/server-security.md). */
    int64_t grammar_mask_budget;
    int64_t grammar_request_budget;
} rw_engine_params;

/* Fills the first size bytes of *p with the defaults and sets
 * p->struct_size = size: pass sizeof *p (the program's struct, so the
 * library never writes past it). */
RW_API void rw_engine_params_init(rw_engine_params *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the
 * size is the program's, not the library's). */
static inline rw_engine_params rw_engine_params_default(void) {
    rw_engine_params p;
    rw_engine_params_init(&p, sizeof p);
    return p;
}

/* Starts an engine over m (m must outlive it; it runs every forward pass
 * of m from now on). params may be NULL (defaults). The caller frees *out
 * with rw_engine_close. Errors: RW_ERR_INVALID_ARG (a setting out of range,
 * unknown spec flags, a draft with another vocabulary), RW_ERR_BUSY (m or
 * the draft already has an engine), RW_ERR_UNSUPPORTED (RW_SPECULATE_MTP on
 * a file without the block), RW_ERR_IO (cache_dir cannot be made or
 * read). */
RW_API rw_status rw_engine_open(rw_model *m, const rw_engine_params *params, rw_engine **out, rw_error *err);
/* Cancels what is still running or queued (no more callbacks after this
 * returns) and stops the engine. NULL is fine. */
RW_API void rw_engine_close(rw_engine *e);

/* An event of a request: new text, and at the end (done) the result. Runs
 * on the engine's scheduler thread: be quick, do not call the engine. */
typedef void (*rw_event_fn)(void *user, const char *text, size_t len, bool done, const rw_gen_result *res);

/* Queues a request for prompt (text, tokenized with parse_special). *id
 * (may be NULL) names it for rw_engine_cancel. Every request that is not
 * cancelled gets exactly one event with done = true; a failed submission
 * gets none. Errors: RW_ERR_CONTEXT (prompt + max_tokens > n_ctx),
 * RW_ERR_BUSY (max_queued requests wait already), RW_ERR_INVALID_ARG (bad
 * options, an empty prompt, a grammar or schema that does not compile),
 * RW_ERR_IO (the model file was truncated on disk under its mapping). */
RW_API rw_status rw_engine_submit_text(rw_engine *e, const char *prompt, const rw_gen_options *opt, rw_event_fn cb, void *user,
                           uint64_t *id, rw_error *err);
/* Queues a request for prompt token ids; otherwise as rw_engine_submit_text
 * (and RW_ERR_INVALID_ARG for an id outside the vocabulary). */
RW_API rw_status rw_engine_submit_ids(rw_engine *e, const int32_t *ids, int64_t n, const rw_gen_options *opt,
                                  rw_event_fn cb, void *user, uint64_t *id, rw_error *err);
/* After it returns the request's callback is never called again. Unknown
 * or finished ids are ignored. With a threaded engine it waits for the end
 * of the current step; with a manual one it returns at once. */
RW_API void rw_engine_cancel(rw_engine *e, uint64_t id);

/* Submits and waits: the synchronous form of rw_engine_submit_text. *text (may
 * be NULL) gets the whole answer (caller: rw_free). Safe to call from
 * several threads at once: their requests are batched together. Errors:
 * those of rw_engine_submit_text. As with rw_generate, a generation that
 * fails midway returns RW_OK with res->reason RW_DONE_ERROR. */
RW_API rw_status rw_engine_run(rw_engine *e, const char *prompt, const rw_gen_options *opt, char **text, rw_gen_result *res,
                        rw_error *err);

/* With params.manual: retires finished requests, admits queued ones and
 * runs one step (one forward pass over every running sequence and the next
 * prompt chunk), calling the requests' callbacks. Returns how many requests
 * are still running or queued (0: idle), or -1 (err set) for an engine with
 * its own thread. Call it from one thread at a time. rw_engine_run and
 * rw_generate step a manual engine themselves while they wait. A forward
 * pass that fails ends its requests with RW_DONE_ERROR; the step itself
 * still returns the count. */
RW_API int rw_engine_step(rw_engine *e, rw_error *err);

typedef struct {
    uint64_t requests_finished;
    uint64_t prompt_tokens;     /* of admitted requests */
    uint64_t cached_tokens;     /* of those, served from the prefix cache */
    uint64_t generated_tokens;
    size_t cache_bytes;         /* the prefix cache's memory tier now */
    size_t cache_disk_bytes;    /* and its disk tier */
    uint64_t cache_entries;
    uint64_t draft_tokens;      /* speculative decoding: tokens drafted */
    uint64_t accepted_tokens;   /* and of those, accepted by the model */
} rw_engine_stats_public;

RW_API void rw_engine_stats_get(rw_engine *e, rw_engine_stats_public *out);

/* ---- embeddings and reranking ---------------------------------------- */

/* How a prompt's hidden states become one vector: the numbering of GGUF's
 * <arch>.pooling_type. RW_POOLING_FILE: what the model's file declares,
 * the last token when it declares none (a generative model) or rank (a
 * reranker). */
typedef enum {
    RW_POOLING_FILE = -1,
    RW_POOLING_NONE = 0, /* no pooling: every token's vector (n * dims floats) */
    RW_POOLING_MEAN = 1,
    RW_POOLING_CLS = 2,  /* the first token's */
    RW_POOLING_LAST = 3, /* the last token's (Qwen3-Embedding) */
} rw_pooling;

/* The pooling m's file declares (<arch>.pooling_type; RW_POOLING_FILE when
 * it has none or declares rank), and the size of its vectors. */
RW_API rw_pooling rw_model_pooling(const rw_model *m);
RW_API int rw_model_n_embd(const rw_model *m);

typedef struct {
    size_t struct_size; /* sizeof(rw_embed_options); set by rw_embed_options_default / _init */
    rw_pooling pooling;
    int dimensions;  /* keep the first this many (Matryoshka), 1..n_embd; 0 = all */
    bool normalize;  /* L2-normalize (after the cut), as OpenAI's embeddings are */
    /* Optional: the logits of these tokens after the last position (a yes/no
     * reranker's answer), written to logits[n_logit_ids]. */
    const int32_t *logit_ids;
    int n_logit_ids;
    float *logits;
} rw_embed_options;

/* RW_POOLING_FILE, every dimension, normalized, no logits. */
/* Fills the first size bytes of *p with the defaults and sets
 * p->struct_size = size: pass sizeof *p (the program's struct, so the
 * library never writes past it). */
RW_API void rw_embed_options_init(rw_embed_options *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the
 * size is the program's, not the library's). */
static inline rw_embed_options rw_embed_options_default(void) {
    rw_embed_options p;
    rw_embed_options_init(&p, sizeof p);
    return p;
}

/* Runs n prompt ids through the model on the engine (batched with whatever
 * else it runs, through its prefix cache) and waits for the pooled
 * final-norm hidden state (output_norm applied, before the output head):
 * out gets dims floats (dimensions or n_embd; with RW_POOLING_NONE, n rows
 * of them). The result is bitwise the same alone, batched or after a
 * cached prefix. *cached_tokens (may be NULL): prompt tokens the prefix
 * cache served (only last-token pooling reuses prefixes). Safe from several
 * threads at once: their requests are batched together. Errors:
 * RW_ERR_CONTEXT (n > the engine's n_ctx), RW_ERR_INVALID_ARG (n < 1, an id
 * outside the vocabulary, dimensions out of range, NULL out), RW_ERR_BUSY.
 * On failure out is unspecified and *cached_tokens 0. */
RW_API rw_status rw_engine_embed(rw_engine *e, const int32_t *ids, int64_t n, const rw_embed_options *opt, float *out,
                          int64_t *cached_tokens, rw_error *err);
/* The same for a text, tokenized with the vocabulary's special tokens
 * (BOS/EOS as it asks: Qwen3-Embedding's end of text). */
RW_API rw_status rw_engine_embed_text(rw_engine *e, const char *text, const rw_embed_options *opt, float *out,
                               int64_t *cached_tokens, rw_error *err);

/* A yes/no reranker's relevance of document to query, in [0, 1]:
 * softmax over the "yes" and "no" logits after the prompt that asks it (the
 * file's tokenizer.chat_template.rerank, else Qwen3-Reranker's, with
 * instruction, NULL = its default), the query and the document kept as
 * text. As rw_engine_embed otherwise (the prompts of one query share their
 * head in the prefix cache). On failure *score is 0. */
RW_API rw_status rw_engine_rerank(rw_engine *e, const char *query, const char *document, const char *instruction,
                           double *score, rw_error *err);

/* ---- one sequence by hand, and state files -------------------------- */

typedef struct rw_seq rw_seq;

/* A sequence of up to n_ctx positions (0: 4096) on m. The caller frees
 * *out with rw_seq_free (before m is closed). Errors: RW_ERR_INVALID_ARG
 * (not a model of rw_model_open, a negative n_ctx). */
RW_API rw_status rw_seq_new(rw_model *m, int64_t n_ctx, bool kv_f32, rw_seq **out, rw_error *err);
RW_API void rw_seq_free(rw_seq *s); /* NULL is fine */

/* Runs n tokens through the model at the end of s. logits (may be NULL)
 * receives the last token's n_vocab logits. Errors: RW_ERR_INVALID_ARG (no
 * ids), RW_ERR_RANGE (an id outside the vocabulary), RW_ERR_CONTEXT (past
 * n_ctx),
 * RW_ERR_IO (the model file was truncated on disk); s is then as before. */
RW_API rw_status rw_seq_eval(rw_seq *s, const int32_t *ids, int64_t n, float *logits, rw_error *err);
RW_API int64_t rw_seq_length(const rw_seq *s);
/* Forgets every position from n on, exactly: s is bitwise what it would be
 * had it only ever seen its first n tokens. Errors: RW_ERR_RANGE (n < 0 or
 * n > its length). */
RW_API rw_status rw_seq_rewind(rw_seq *s, int64_t n, rw_error *err);
/* A state file: the tokens and every layer's state, checksummed, written
 * atomically; rw_seq_load replaces s's state with the file's (after
 * checking it belongs to this model and KV type). Errors: RW_ERR_IO
 * (cannot write or read path), RW_ERR_FORMAT (not a state file, truncated,
 * a checksum that does not match), RW_ERR_INVALID_ARG (made for another
 * model, numerics or KV type), RW_ERR_UNSUPPORTED (another file version).
 * A failed load leaves s as it was. */
RW_API rw_status rw_seq_save(const rw_seq *s, const char *path, rw_error *err);
RW_API rw_status rw_seq_load(rw_seq *s, const char *path, rw_error *err);

/* One sequence's part of rw_seq_eval_batch: n ids to run at the end of
 * seq. logits (may be NULL) receives the last token's n_vocab logits, or
 * with all_logits those of every one of the n tokens (row-major, n *
 * n_vocab floats). */
typedef struct {
    rw_seq *seq;
    const int32_t *ids;
    int64_t n;
    float *logits;
    bool all_logits;
} rw_seq_batch;
#define RW_SEQ_BATCH_MAX 64 /* sequences in one rw_seq_eval_batch */
/* Runs several sequences of one model together, in the same forward
 * passes (a ragged batch: each sees only its own positions, no padding).
 * Each sequence's logits and state are bitwise what rw_seq_eval of its
 * items alone would give. Errors: RW_ERR_INVALID_ARG (n_items outside 1..
 * RW_SEQ_BATCH_MAX, an item without ids, a sequence twice or of another
 * model), RW_ERR_RANGE (an id outside the vocabulary), RW_ERR_CONTEXT (a
 * sequence past its n_ctx), RW_ERR_IO (the model file was truncated on
 * disk); every sequence is then as before and the logits undefined. */
RW_API rw_status rw_seq_eval_batch(const rw_seq_batch *items, int n_items, rw_error *err);
/* What one sequence of m holding n_ctx positions may take in memory at
 * most (KV cache in f32 or f16, recurrent states, max_checkpoints
 * checkpoints of a hybrid model, 0 = the engine's default retention): an
 * estimate from above, for rw_engine_params.max_state_bytes; 0 when no
 * such sequence can be made (n_ctx < 1, not a model of rw_model_open). */
RW_API size_t rw_model_state_bytes(const rw_model *m, int64_t n_ctx, bool kv_f32, int max_checkpoints);

/* ==== building a server on the library ================================ *
 *
 * What `rewind serve` uses beyond the sections above, so that an embedder
 * can do what the server does: the tokenizer and the chat template of a
 * model as objects of their own (token pieces, BOS and FIM tokens, control
 * tokens), the template's variables, grammars and JSON schemas, the
 * reranker's prompt, the engine's settings and its slots, the log and the
 * error calls for the embedder's own messages. Objects are opaque handles
 * with functions; records are plain structs that a minor version never
 * changes (docs/api.md, "Compatibility"), or lead with a size field. */

/* printf-style checking of the format functions below where the compiler
 * has it. */
#if defined(__GNUC__) || defined(__clang__)
#define RW_PRINTF(fmt, first) __attribute__((format(printf, fmt, first)))
#else
#define RW_PRINTF(fmt, first)
#endif

/* ---- errors and logs for the embedder's own code --------------------- */

/* Fills err (when not NULL) with code and a printf-formatted one-line
 * message (cut at 511 bytes); returns code, so a function of the embedder
 * can `return rw_errorf(err, RW_ERR_INVALID_ARG, "bad %s", what);`. */
RW_API rw_status rw_errorf(rw_error *err, rw_status code, const char *fmt, ...) RW_PRINTF(3, 4);
/* A message through the hook of rw_log_set, as the library's own: nothing
 * when no hook is set or level is above its max_level. */
RW_API void rw_log(rw_log_level level, const char *fmt, ...) RW_PRINTF(2, 3);
/* Whether a message of this level would reach the hook (to skip building a
 * costly one). */
RW_API bool rw_log_enabled(rw_log_level level);

/* How many times, in this process, a mapped model file was found cut short
 * under its mapping (a read past its new end, caught and turned into
 * RW_ERR_IO of the request instead of a crash); for health checks. */
RW_API uint64_t rw_mapped_file_fault_count(void);

/* ---- the tokenizer --------------------------------------------------- */

/* A model's vocabulary. Read-only and thread-safe; borrowed from its model
 * (rw_model_tokenizer), valid while the model is open. */
typedef struct rw_tokenizer rw_tokenizer;

/* m's tokenizer (borrowed), or NULL for a model not from rw_model_open. */
RW_API const rw_tokenizer *rw_model_tokenizer(const rw_model *m);
/* The tokenizer of a GGUF file alone (its tokenizer.ggml.* vocabulary; a
 * vocabulary-only file will do), without its weights. The caller frees
 * *out with rw_tokenizer_close. Errors: RW_ERR_IO (cannot open the file),
 * RW_ERR_FORMAT (not GGUF, or a malformed vocabulary), RW_ERR_UNSUPPORTED
 * (a tokenizer model rewind does not have). */
RW_API rw_status rw_tokenizer_open(const char *gguf_path, rw_tokenizer **out, rw_error *err);
RW_API void rw_tokenizer_close(rw_tokenizer *t); /* NULL is fine; not for a model's (borrowed) tokenizer */

RW_API int32_t rw_tokenizer_n_vocab(const rw_tokenizer *t);
RW_API int32_t rw_tokenizer_bos(const rw_tokenizer *t); /* -1 if none */
RW_API int32_t rw_tokenizer_eos(const rw_tokenizer *t); /* -1 if none */
/* Whether the vocabulary asks for BOS at the start of a prompt. */
RW_API bool rw_tokenizer_add_bos(const rw_tokenizer *t);
/* True for tokens that end a generation (EOS, EOT, <|im_end|>, ...). */
RW_API bool rw_tokenizer_is_eog(const rw_tokenizer *t, int32_t id);

/* Fill-in-the-middle tokens by role (code infill). */
typedef enum {
    RW_FIM_PRE = 0, /* before the cursor */
    RW_FIM_SUF = 1, /* after it */
    RW_FIM_MID = 2, /* generate the middle */
    RW_FIM_PAD = 3,
    RW_FIM_REP = 4, /* a repository's name */
    RW_FIM_SEP = 5, /* between files */
    RW_FIM_COUNT
} rw_fim_role;
/* The token of a role: the file's tokenizer.ggml.fim_*_token_id (or the
 * older prefix/suffix/middle keys), else the token whose text is the role's
 * usual one (<|fim_prefix|>, <PRE>, ...); -1 when the vocabulary has none. */
RW_API int32_t rw_tokenizer_fim(const rw_tokenizer *t, rw_fim_role role);

/* The longest text of a token, in bytes: no token stands for more. */
RW_API size_t rw_tokenizer_max_token_len(const rw_tokenizer *t);
/* The offset of the first control token's text (<|im_start|>, ...) in
 * s[0..n), or -1 when there is none (to refuse such text from users). */
RW_API long rw_tokenizer_find_control(const rw_tokenizer *t, const char *s, size_t n);
/* The bytes token id stands for (spaces restored, byte tokens as their
 * byte; a control token's text only with render_special, else nothing),
 * written to buf up to cap bytes (not NUL-terminated); returns the piece's
 * full length (more than cap: retry with a larger buf). */
RW_API size_t rw_token_to_piece(const rw_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);

/* As rw_model_tokenize and rw_model_detokenize, on a tokenizer. */
RW_API rw_status rw_tokenize(const rw_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                             int32_t **ids, size_t *n_ids, rw_error *err);
RW_API rw_status rw_detokenize(const rw_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **out,
                               size_t *out_len, rw_error *err);
/* Tokenizes a rendered prompt as rw_tokenize with parse_special, except
 * that no control token is cut out where its text overlaps one of the
 * n_plain byte ranges [plain[2i], plain[2i+1]) (sorted, disjoint): the
 * messages' contents, so what a user wrote stays text. Errors: as
 * rw_tokenize. */
RW_API rw_status rw_tokenize_guarded(const rw_tokenizer *t, const char *text, size_t len, bool add_special,
                                     const size_t *plain, size_t n_plain, int32_t **ids, size_t *n_ids,
                                     rw_error *err);

/* ---- the chat template ----------------------------------------------- */

/* A parsed chat template (Jinja). Read-only and thread-safe; borrowed from
 * its model (rw_model_chat_template), valid while the model is open. */
typedef struct rw_chat_template rw_chat_template;

/* m's chat template (borrowed), or NULL for a model not from rw_model_open
 * or whose file's template does not parse (rw_model_open still succeeds:
 * rw_chat_render and rw_chat_render_json then return RW_ERR_TEMPLATE with
 * the parse error;
 * the NULL template is refused by the calls that take one). */
RW_API const rw_chat_template *rw_model_chat_template(const rw_model *m);
/* A template of the caller's own: len bytes of Jinja source (UTF-8, need not
 * be NUL-terminated). The caller frees *out with rw_chat_template_free.
 * Errors: RW_ERR_TEMPLATE (it does not parse: the message says where). */
RW_API rw_status rw_chat_template_parse(const char *src, size_t len, rw_chat_template **out, rw_error *err);
/* The chat template a GGUF file's metadata carries (tokenizer.chat_template,
 * or ChatML when it has none), without loading the weights, with the texts
 * of its BOS and EOS tokens in *bos and *eos (each may be NULL; caller:
 * rw_free; NULL when the file names no such token). The caller frees *out
 * with rw_chat_template_free. Errors: RW_ERR_IO (cannot open the file),
 * RW_ERR_FORMAT (not GGUF), RW_ERR_TEMPLATE (the template does not parse). */
RW_API rw_status rw_chat_template_load(const char *gguf_path, rw_chat_template **out, char **bos, char **eos,
                                       rw_error *err);
/* NULL is fine; not for a model's (borrowed) template. */
RW_API void rw_chat_template_free(rw_chat_template *t);
/* The template's source as parsed (line ends made \n), *len bytes (len may
 * be NULL); borrowed from t. */
RW_API const char *rw_chat_template_source(const rw_chat_template *t, size_t *len);

/* The variables a template is rendered with. Set struct_size to sizeof, or start
 * from rw_template_vars_default(): later versions add fields at the end,
 * and a caller built against an older header passes its smaller size. */
typedef struct {
    size_t struct_size;        /* sizeof(rw_template_vars) as the caller knows it */
    const char *messages_json; /* a JSON array of message objects (required) */
    const char *tools_json;    /* a JSON array, or NULL: `tools` is then undefined */
    bool add_generation_prompt;
    int enable_thinking;       /* 0 or 1, or -1 to leave the variable undefined */
    const char *bos_token;     /* NULL: undefined */
    const char *eos_token;     /* NULL: undefined */
    const char *now;           /* "YYYY-MM-DDTHH:MM:SS" seen by strftime_now; NULL = the local time */
    /* NULL, or a JSON object: each key becomes a template variable, set
     * after the ones above (so it may set enable_thinking); messages and
     * tools are not overridden (OpenAI requests' chat_template_kwargs). */
    const char *extra_json;
} rw_template_vars;

/* Fills the first size bytes of *p with the defaults (enable_thinking -1, add_generation_prompt true, the rest NULL) and sets
 * struct_size to size. */
RW_API void rw_template_vars_init(rw_template_vars *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the size is
 * the program's, not the library's). */
static inline rw_template_vars rw_template_vars_default(void) {
    rw_template_vars p;
    rw_template_vars_init(&p, sizeof p);
    return p;
}

/* Renders t with v. *out is NUL-terminated, *out_len bytes (out_len may be
 * NULL; caller: rw_free). Errors: RW_ERR_INVALID_ARG (no messages, JSON that
 * does not parse, a size this library does not know), RW_ERR_TEMPLATE (the
 * template fails: its raise_exception text, or where it went wrong). */
RW_API rw_status rw_chat_template_apply(const rw_chat_template *t, const rw_template_vars *v, char **out,
                                        size_t *out_len, rw_error *err);

/* Whether a rendered prompt (len bytes) leaves a reasoning block open for
 * the model: its last open marker has no close marker after it (open and
 * close NULL: <think> and </think>), so the output starts as reasoning. */
RW_API bool rw_chat_prompt_opens_reasoning(const char *prompt, size_t len, const char *open, const char *close);

/* The prompt a yes/no reranker reads for one document: the file's rerank
 * template tmpl ({query} and {document} replaced; see rw_engine_rerank),
 * or for tmpl NULL Qwen3-Reranker's own with instruction (NULL: its
 * default). *text is NUL-terminated, *len bytes (caller: rw_free);
 * plain[2i], plain[2i+1] are the byte ranges of the query and the document
 * in it (*n_ranges of them, sorted, at most RW_CHAT_RERANK_RANGES: plain
 * has room for twice that), for rw_tokenize_guarded. Errors:
 * RW_ERR_INVALID_ARG (NULL query or document, a template without
 * {query} or {document}). */
#define RW_CHAT_RERANK_RANGES 8
RW_API rw_status rw_chat_rerank_prompt(const char *tmpl, const char *instruction, const char *query,
                                       const char *document, char **text, size_t *len, size_t *plain,
                                       size_t *n_ranges, rw_error *err);

/* How a model writes tool calls in its output (the template tells; the
 * names are those of `rewind serve --tool-format`). */
typedef enum {
    RW_TOOL_FMT_NONE = 0,
    RW_TOOL_FMT_GENERIC = 1,
    RW_TOOL_FMT_QWEN_XML = 2,
    RW_TOOL_FMT_HERMES = 3,
    RW_TOOL_FMT_LLAMA3 = 4,
    RW_TOOL_FMT_GRANITE = 5,
    RW_TOOL_FMT_HARMONY = 6, /* gpt-oss: channels and recipients */
    RW_TOOL_FMT_DEEPSEEK = 7,
    RW_TOOL_FMT_NEMOTRON = 8,
    RW_TOOL_FMT_LFM2 = 9,
    RW_TOOL_FMT_MISTRAL = 10,
} rw_tool_format;
#define RW_TOOL_FMT_LAST RW_TOOL_FMT_MISTRAL

/* "none", "generic", "qwen-xml", "hermes", "llama3", "granite", "harmony",
 * "deepseek", "nemotron", "lfm2", "mistral" (static); parse returns false
 * for an unknown name (and leaves *out as it was). */
RW_API const char *rw_tool_format_name(rw_tool_format f);
RW_API bool rw_tool_format_parse(const char *name, rw_tool_format *out);

/* ---- a chat request's prompt: template capabilities, preparation ----- */

/* What a chat template shows about its model's output and what it renders.
 * A fixed record: a minor version never changes it (a capability found
 * later comes with a function of its own). */
typedef struct {
    rw_tool_format tool_format;           /* the call format (as llama.cpp detects it); GENERIC when unknown */
    char think_open[32], think_close[32]; /* the think markers; "<think>", "</think>" when none shown */
    bool has_think;                       /* the template shows think markers */
    bool reads_enable_thinking;           /* it has an enable_thinking switch */
    bool reads_reasoning_effort;          /* it reads reasoning_effort (gpt-oss) */
    bool no_think_switch;                 /* thinking is turned off by "/no_think" in a message (Nemotron) */
    bool tool_ids_9;                      /* tool call ids must be 9 alphanumerics (Mistral) */
    /* found by rendering probe conversations */
    bool system_role;    /* renders a system message (Gemma's refuses it) */
    bool tool_calls;     /* renders an assistant message's tool_calls */
    bool parallel_calls; /* renders several calls in one message (Llama 3.x refuses) */
    bool tool_results;   /* renders tool messages */
} rw_chat_caps;

/* t's capabilities: read from its source (markers, variables), then from
 * probe renders (a system message, a tool call, two calls, a tool result).
 * Costs a few renders: compute once per template and keep. rw_chat_prepare
 * adapts a conversation to what t lacks. out is always filled (a NULL t
 * gives every capability false and the GENERIC format). */
RW_API void rw_chat_template_caps(const rw_chat_template *t, rw_chat_caps *out);

/* A chat request as OpenAI's API sends it, to be made what the template
 * expects (rw_chat_prepare). Set struct_size to sizeof, or start from
 * rw_chat_request_default(): fields are only added at the end. The strings
 * are read during the call only. */
typedef struct {
    size_t struct_size;        /* sizeof(rw_chat_request) as the caller knows it */
    const char *messages_json; /* a JSON array of message objects (required) */
    const char *tools_json;    /* a JSON array of tools, or NULL / "null": none */
    bool add_generation_prompt;
    /* chat_template_kwargs: a JSON object whose every key becomes a template
     * variable (after the others, so it may set enable_thinking), or NULL */
    const char *kwargs_json;
    int enable_thinking; /* 0 or 1, or -1: undefined (unless kwargs sets it) */
    /* NULL, or "none", "minimal", "low", "medium", "high": the variable
     * reasoning_effort; "none" also sets enable_thinking = 0 where the
     * template has that switch and neither kwargs nor enable_thinking said
     * otherwise */
    const char *reasoning_effort;
    const char *bos_token, *eos_token; /* the template's bos_token / eos_token; NULL: undefined */
} rw_chat_request;

/* Fills the first size bytes of *p with the defaults (add_generation_prompt
 * true, enable_thinking -1, the rest NULL) and sets struct_size to size. */
RW_API void rw_chat_request_init(rw_chat_request *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the size is
 * the program's, not the library's). */
static inline rw_chat_request rw_chat_request_default(void) {
    rw_chat_request p;
    rw_chat_request_init(&p, sizeof p);
    return p;
}

/* A prepared conversation: the messages normalized (role "developer" as
 * "system", content parts joined, tool-call arguments as objects, tool
 * results named, ids shortened where caps ask) and adapted to what the
 * template lacks (caps: a refused system role folded into the first user
 * message, calls or results it does not render written as text, several
 * calls split where only one per message renders), with every template
 * variable. For a caller that renders it more than once or looks at it
 * first; rw_chat_render_request does both steps at once. */
typedef struct rw_chat_prepared rw_chat_prepared;

/* Prepares req for a template of capabilities caps (from
 * rw_chat_template_caps; NULL: adapt nothing). The caller frees *out with
 * rw_chat_prepared_free; on failure *out is NULL. Errors:
 * RW_ERR_INVALID_ARG (NULL req, messages_json or out; JSON that does not
 * parse; a message of an unknown role or shape, the message naming the
 * field as OpenAI does: "messages.[2].content: ..."; kwargs that are not an
 * object; a size this library does not know). */
RW_API rw_status rw_chat_prepare(const rw_chat_caps *caps, const rw_chat_request *req, rw_chat_prepared **out,
                                 rw_error *err);
RW_API void rw_chat_prepared_free(rw_chat_prepared *p); /* NULL is fine */
/* The prepared messages: a JSON array (compact), *len bytes (len may be
 * NULL); borrowed from p. */
RW_API const char *rw_chat_prepared_messages(const rw_chat_prepared *p, size_t *len);
/* The variables to render p with (rw_chat_template_apply); borrowed from p,
 * its strings too. A caller may copy it and change fields (now, or a
 * messages_json of its own). */
RW_API const rw_template_vars *rw_chat_prepared_vars(const rw_chat_prepared *p);

/* Prepares req (rw_chat_prepare) and renders it with t. *out is
 * NUL-terminated, *out_len bytes (out_len may be NULL; caller: rw_free);
 * on failure *out is NULL. Errors: those of rw_chat_prepare and of
 * rw_chat_template_apply. */
RW_API rw_status rw_chat_render_request(const rw_chat_template *t, const rw_chat_caps *caps,
                                        const rw_chat_request *req, char **out, size_t *out_len, rw_error *err);

/* ---- grammars and JSON schemas --------------------------------------- */

/* Whether len bytes of GBNF (llama.cpp's syntax; the start rule root, NULL:
 * "root") compile: what rw_gen_options.grammar would accept. Errors:
 * RW_ERR_INVALID_ARG with "gbnf line L col C: why". */
RW_API rw_status rw_grammar_check(const char *gbnf, size_t len, const char *root, rw_error *err);
/* How text_len bytes of text stand to the grammar (gbnf and root as
 * rw_grammar_check): *prefix: they start some sentence of it (or are one);
 * *complete: they are a whole sentence (an output may end there). A
 * generation's text under a grammar is always a prefix; whether it is
 * complete tells if a token limit cut it short. Either pointer may be NULL.
 * Errors: those of rw_grammar_check (then both are false). */
RW_API rw_status rw_grammar_match(const char *gbnf, size_t len, const char *root, const char *text, size_t text_len,
                                  bool *prefix, bool *complete, rw_error *err);
/* A JSON Schema's GBNF (the subset docs/structured-outputs.md lists), to
 * compose a larger grammar: its start rule is named rule (NULL: "root";
 * [a-zA-Z0-9-]+) and every helper rule "<rule>-...". max_ws bounds the
 * whitespace between JSON tokens: 0 = the default (none, a space, or a
 * newline and up to 20 spaces or tabs), < 0 = none (compact JSON), n > 0 =
 * up to n bytes. *gbnf is NUL-terminated (caller: rw_free). Errors:
 * RW_ERR_INVALID_ARG ("schema at /json/pointer: why"), RW_ERR_UNSUPPORTED
 * (a keyword outside the subset). */
RW_API rw_status rw_schema_to_gbnf(const char *schema, size_t len, const char *rule, int max_ws, char **gbnf,
                                   rw_error *err);
/* GBNF for any JSON object (OpenAI's response_format json_object), rule and
 * max_ws as above. */
RW_API rw_status rw_json_object_gbnf(const char *rule, int max_ws, char **gbnf, rw_error *err);

/* ---- the engine's settings and slots --------------------------------- */

/* The model an engine runs (borrowed). */
RW_API rw_model *rw_engine_get_model(const rw_engine *e);

/* The settings an engine runs with, as rw_engine_setting reads them (the
 * values rw_engine_params gave it, after defaults). New keys are added at
 * the end. */
typedef enum {
    RW_ENGINE_N_CTX = 0,           /* positions per sequence */
    RW_ENGINE_MAX_RUNNING = 1,     /* sequences at once (its slots) */
    RW_ENGINE_MAX_QUEUED = 2,      /* requests waiting beyond those */
    RW_ENGINE_PREFILL_CHUNK = 3,   /* prompt tokens per step */
    RW_ENGINE_CACHE_BYTES = 4,     /* the prefix cache's memory budget (0: off) */
    RW_ENGINE_CACHE_DIR_BYTES = 5, /* its disk tier's budget (0: no disk tier) */
    RW_ENGINE_MAX_STATE_BYTES = 6, /* running sequences' state before admission waits (0: no bound) */
    RW_ENGINE_MAX_CHECKPOINTS = 7, /* hybrid models' checkpoints a sequence keeps (0: the default) */
    RW_ENGINE_DRAFT_MAX = 8,       /* speculative decoding's most drafted tokens a step (0: none) */
    RW_ENGINE_SETTING_COUNT
} rw_engine_setting;
/* The value of a setting; -1 for a key this library does not know or a
 * NULL engine. */
RW_API int64_t rw_engine_setting_get(const rw_engine *e, rw_engine_setting key);

/* A slot is one of the max_running places a request runs in: a request
 * admitted takes the lowest free one, and when it ends its sequence goes to
 * the prefix cache, which the slot then "holds" (its tokens: a later
 * request that shares them reuses their state). A fixed record: a minor
 * version never changes it. */
typedef struct {
    bool busy;        /* a request runs in it */
    uint64_t request; /* that request's id (busy), else 0 */
    int64_t n_prompt; /* the prompt length of the request running there, or of the last one */
    int64_t n_tokens; /* busy: tokens in its sequence at the last step's end; idle: tokens the slot holds */
} rw_engine_slot;

/* A snapshot of the slots: out[i] for each slot i < max_running (returns
 * how many; out has room for rw_engine_setting_get(e,
 * RW_ENGINE_MAX_RUNNING) of them); head (may be
 * NULL) gets the first max_head tokens each slot holds (a busy one: its
 * prompt's) at head[i * max_head], n_head[i] how many. */
RW_API int rw_engine_slots(rw_engine *e, rw_engine_slot *out, int32_t *head, int max_head, int64_t *n_head);
/* Writes the state slot holds to path (a state file as rw_seq_save's): the
 * longest prefix of its tokens the prefix cache restores exactly;
 * *n_saved: tokens written, *n_bytes: the file's size. Runs on the
 * scheduler between steps; the caller waits. Errors: RW_ERR_RANGE (no such
 * slot), RW_ERR_BUSY (a request runs in it), RW_ERR_NOT_FOUND (it holds
 * nothing the cache still has), RW_ERR_IO, RW_ERR_UNSUPPORTED (a manual
 * engine, or no prefix cache). */
RW_API rw_status rw_engine_slot_save(rw_engine *e, int slot, const char *path, int64_t *n_saved, size_t *n_bytes,
                                     rw_error *err);
/* Loads a state file into the prefix cache; the slot then holds its tokens
 * (*n_restored of them; *n_bytes: the file's size), and the next request
 * whose prompt shares them starts from that state, its output bitwise what
 * it is without. Errors: RW_ERR_FORMAT (corrupt, or longer than n_ctx),
 * RW_ERR_INVALID_ARG (another model's or KV type's), RW_ERR_IO (missing),
 * each changing nothing; others as rw_engine_slot_save's. */
RW_API rw_status rw_engine_slot_restore(rw_engine *e, int slot, const char *path, int64_t *n_restored,
                                        size_t *n_bytes, rw_error *err);
/* The slot forgets what it holds (*n_erased tokens); the prefix cache's
 * entries, shared by every slot, leave by its own eviction. Errors:
 * RW_ERR_RANGE, RW_ERR_BUSY. */
RW_API rw_status rw_engine_slot_erase(rw_engine *e, int slot, int64_t *n_erased, rw_error *err);

/* ---- the engine's full statistics ------------------------------------ */

/* Everything `rewind serve`'s /metrics shows of an engine: the counters of
 * rw_engine_stats_get and what is behind them (the prefix cache's tiers and
 * why requests missed it, the state pool, latency histograms,
 * speculation). The records inside rw_engine_stats are fixed (a minor
 * version never changes them); rw_engine_stats itself is sized and grows
 * at its end. */

/* A fixed-bucket histogram (Prometheus style: counts[i] = observations <=
 * bounds[i], not cumulative; counts[n_bounds] = the rest). */
#define RW_HIST_MAX 16
typedef struct {
    int n_bounds;
    double bounds[RW_HIST_MAX];
    uint64_t counts[RW_HIST_MAX + 1];
    double sum;
    uint64_t count;
} rw_histogram;

/* The process's pool of recurrent-state buffers (hybrid models), now. */
typedef struct {
    size_t mapped_bytes;  /* slabs and big buffers in use or free (ready slabs aside) */
    size_t ready_bytes;   /* slabs faulted in ahead of need */
    size_t free_bytes;    /* free buffers, waiting for reuse */
    size_t trimmed_bytes; /* of those, given back to the system */
    size_t unused_bytes;  /* the newest slab's rest, never used yet */
} rw_state_pool_stats;

/* Why a request recomputed prompt tokens beyond its new tail. Later
 * versions may add reasons (below RW_PC_REASON_MAX). */
typedef enum {
    RW_PC_HIT = 0,         /* nothing recomputed that the cache had */
    RW_PC_NO_ENTRY,        /* no stored sequence shares a prefix */
    RW_PC_CKPT_TOO_FAR,    /* a shared prefix exists but its nearest exact restore point is further back */
    RW_PC_EVICTED,         /* the entry had been evicted (and not found on disk) */
    RW_PC_DISK_INVALID,    /* the disk copy failed validation and was removed */
    RW_PC_DIFFERENT_MODEL, /* nothing shared, and the disk tier holds files of another model */
} rw_pcache_reason;
#define RW_PC_REASON_MAX 8 /* the room in rw_engine_stats.recompute_reasons */

/* "hit", "no_entry", "checkpoint_too_far", "evicted", "disk_invalid",
 * "different_model" (static); "?" for a value this library does not know. */
RW_API const char *rw_pcache_reason_name(rw_pcache_reason r);

/* The prefix cache's counters. */
typedef struct {
    uint64_t lookups, hits_memory, hits_disk;
    uint64_t tokens_memory, tokens_disk, tokens_recomputed;
    uint64_t evictions, disk_writes, disk_invalid;
    uint64_t disk_write_errors;  /* files that could not be written (full disk, read-only folder...) */
    uint64_t disk_read_errors;   /* files that could not be read (not validation: I/O) */
    uint64_t disk_skipped;       /* files left alone: another model's or configuration's, or too long */
    uint64_t disk_evictions;     /* files removed for the disk budget */
    uint64_t disk_pending;       /* writes queued or running */
    uint64_t entries, disk_entries;
    uint64_t bytes_kv_and_state; /* memory entries: their sequences (the two below and bookkeeping), every
                                    KV page and checkpoint counted once however many entries share it */
    uint64_t bytes_kv;           /*   of which attention KV */
    uint64_t bytes_recurrent;    /*   of which recurrent states, checkpoints and logs */
    uint64_t bytes_unshared;     /* what bytes_kv_and_state would be with every entry counted alone */
    uint64_t bytes_logits;       /* memory entries: last logits */
    uint64_t bytes_disk;
} rw_pcache_stats;

/* An engine's statistics: counters since it opened, levels now. */
typedef struct {
    size_t struct_size;         /* the bytes filled (see rw_engine_stats_full) */
    int running;                /* sequences in the batch now (a finished one until it is released) */
    int queued;                 /* requests waiting for a slot */
    uint64_t requests_finished; /* final events sent */
    uint64_t requests_cancelled;
    uint64_t prompt_tokens;     /* prompt tokens of admitted requests */
    uint64_t cached_tokens;     /* of those, served from the prefix cache (memory + disk) */
    uint64_t prefill_tokens;    /* prompt tokens computed by forward passes */
    uint64_t generated_tokens;
    uint64_t steps;             /* forward passes */
    uint64_t step_tokens;       /* tokens over all forward passes */
    size_t kv_bytes;            /* state storage of the running sequences (0 when none runs) */
    uint64_t held_for_memory;   /* admissions deferred by the state budget (steps with requests waiting) */
    uint64_t idle_trims;        /* times the idle engine gave memory back (2 s after its last step) */
    uint64_t trimmed_bytes;     /* state-pool bytes given back by those */
    rw_state_pool_stats pool;   /* the process's recurrent-state pool now */
    rw_histogram ttft;          /* seconds from submit to the first token */
    rw_histogram itl;           /* seconds between two tokens of a request */
    rw_histogram batch_size;    /* sequences per forward pass */
    bool cache_enabled;
    rw_pcache_stats cache;      /* the prefix cache's counters (zero without one) */
    uint64_t recompute_reasons[RW_PC_REASON_MAX]; /* requests per rw_pcache_reason */
    /* speculative decoding, summed over sequences: verify passes (one per
     * sequence per step, drafting or not), drafted and accepted draft tokens,
     * tokens output by those steps (acceptance = accepted / drafted, tokens
     * per verify pass = spec_emitted / spec_verify) */
    bool spec_enabled;
    uint64_t spec_verify, spec_drafted, spec_accepted, spec_emitted;
    uint64_t spec_draft_cached; /* draft-state tokens restored from the prefix cache */
    uint64_t spec_ngram_drafted, spec_ngram_accepted; /* of the drafted and accepted, n-gram drafts */
} rw_engine_stats;

/* Fills the first size bytes of *out (pass sizeof *out: the program's
 * struct, so the library never writes past it) with e's statistics at one
 * moment, and out->struct_size with the bytes filled: the smaller of size
 * and the library's struct (fields past it are zeroed). Errors:
 * RW_ERR_INVALID_ARG (NULL e or out, size smaller than the first layout);
 * *out is then as it was. */
RW_API rw_status rw_engine_stats_full(rw_engine *e, rw_engine_stats *out, size_t size, rw_error *err);

/* ---- token-level requests -------------------------------------------- */

/* What the engine does for the server's completions: prompt token ids in;
 * out, events with the new tokens' ids and text, their log-probabilities
 * and alternatives; every sampling setting, logit bias, a grammar that may
 * start after a reasoning block, and restore points at message boundaries
 * for the prefix cache. */

/* A token's log-probability (natural log, of the model's distribution:
 * log-softmax of its logits, before bias, penalties and filters; under a
 * grammar, renormalised over the tokens it allows). */
typedef struct {
    int32_t token;
    float logprob;
} rw_token_logprob;
#define RW_MAX_TOP_LOGPROBS 20

/* A logit bias: added to the token's logit before sampling (-INFINITY bans
 * the token). */
typedef struct {
    int32_t token;
    float bias;
} rw_logit_bias;

/* A token-level request. Set struct_size to sizeof, or start from
 * rw_request_params_default(): fields are only ever added at the end, and a
 * caller built against an older header passes its smaller size (the fields
 * it does not know keep their defaults). Strings and arrays are copied at
 * submission. */
typedef struct {
    size_t struct_size; /* sizeof(rw_request_params) as the caller knows it */
    /* sampling, as rw_sampling, and: */
    float temperature;       /* <= 0: greedy (ties to the lowest id) */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    float repeat_penalty;    /* 1: off */
    int32_t penalty_last_n;  /* the penalties count the last n tokens (0: every generated one) */
    int32_t min_keep;        /* top-p and min-p keep at least this many (0 or 1: one) */
    uint64_t seed;           /* the request's own generator */
    const rw_logit_bias *logit_bias; /* n_logit_bias of them, or NULL */
    int32_t n_logit_bias;
    /* stopping */
    int64_t max_tokens;      /* >= 0 (0: only the prompt is computed); prompt + max_tokens <= the engine's n_ctx */
    const char *const *stop; /* n_stop non-empty stop strings (cut from the output), or NULL */
    int n_stop;
    bool ignore_eos;         /* keep going past end-of-generation tokens */
    /* n_marks prompt positions to keep exact restore points at (chat
     * message boundaries: the prefix cache can then reuse a conversation up
     * to any of them), or NULL */
    const int64_t *marks;
    int n_marks;
    /* -1: none; 0..RW_MAX_TOP_LOGPROBS: each token's log-probability and
     * that many alternatives in the events */
    int n_logprobs;
    /* A GBNF grammar the output must match (NULL: free text); tokens that
     * would break it are masked before sampling. grammar_root: its start
     * rule (NULL: "root"); grammar_after: a text after which it holds (a
     * reasoning block's close, "</think>"), NULL: from the first token. */
    const char *grammar;
    const char *grammar_root;
    const char *grammar_after;
    /* control tokens in the output's text as their text (a format whose
     * markers are control tokens, as gpt-oss's <|channel|>), else dropped */
    bool render_special;
    /* Each prompt token's log-probability given those before it, and
     * n_prompt_top (0..RW_MAX_TOP_LOGPROBS) alternatives, in one event
     * (rw_token_event's prompt_logprobs): scoring a text. The prompt is
     * then computed whole (not restored from the prefix cache); the values
     * are bitwise those the same tokens get as generated tokens. */
    bool prompt_logprobs;
    int32_t n_prompt_top;
} rw_request_params;

/* Fills the first size bytes of *p with the defaults (greedy, every filter off, 256 tokens, no logprobs) and sets
 * struct_size to size. */
RW_API void rw_request_params_init(rw_request_params *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the size is
 * the program's, not the library's). */
static inline rw_request_params rw_request_params_default(void) {
    rw_request_params p;
    rw_request_params_init(&p, sizeof p);
    return p;
}

/* An event of a token-level request: the tokens generated since the last
 * one and their text, and at the end (done) the totals. Pointers are valid
 * during the callback only. size is sizeof(rw_token_event) as the library
 * fills it: a later version may add fields at the end, never change these. */
typedef struct {
    size_t size;
    const char *text;       /* new text: complete UTF-8, stop strings cut (not NUL-terminated) */
    size_t text_len;
    const int32_t *tokens;  /* tokens generated since the last event */
    int n_tokens;
    /* with n_logprobs >= 0: logprobs[i] for tokens[i], and top[i * n_top
     * ...] its n_top most likely alternatives */
    const float *logprobs;
    const rw_token_logprob *top;
    int n_top;
    bool done;
    rw_done_reason finish;  /* when done */
    int64_t prompt_tokens;
    int64_t cached_tokens;      /* prompt tokens whose state came from the prefix cache */
    int64_t cached_tokens_disk; /* of those, from its disk tier */
    int64_t completion_tokens;
    const char *error;      /* finish RW_DONE_ERROR: why, one line */
    /* With prompt_logprobs, in the first event after the prompt is computed
     * (once; NULL in the others): prompt_logprobs[i] for prompt token i
     * given tokens 0..i-1 (NaN for i = 0: nothing precedes it), and
     * prompt_top[i * n_prompt_top ...] its alternatives (token 0's unset),
     * for the prompt_tokens tokens. */
    const float *prompt_logprobs;
    const rw_token_logprob *prompt_top;
    int n_prompt_top;
    /* with prompt_logprobs: each prompt token's rank, 1 + the tokens more
     * likely than it (1: the most likely); 0 for token 0 */
    const int32_t *prompt_ranks;
} rw_token_event;

/* Runs on the engine's scheduler thread (in rw_engine_step for a manual
 * engine): be quick; it may call rw_engine_cancel for other requests but
 * must not wait for the engine. */
typedef void (*rw_token_event_fn)(void *user, const rw_token_event *ev);

/* Queues a request for n prompt token ids (copied). *id (may be NULL) names
 * it for rw_engine_cancel. Every request not cancelled gets exactly one
 * event with done; a failed submission gets none. Errors: RW_ERR_CONTEXT
 * (n + max_tokens > n_ctx; the message has the numbers), RW_ERR_INVALID_ARG
 * (an id outside the vocabulary, a setting out of range, a size this
 * library does not know, a grammar that does not compile), RW_ERR_BUSY
 * (the queue is full), RW_ERR_IO (the model file was truncated on disk). */
RW_API rw_status rw_engine_submit_tokens(rw_engine *e, const int32_t *ids, int64_t n, const rw_request_params *p,
                                         rw_token_event_fn cb, void *user, uint64_t *id, rw_error *err);

/* ---- chat output: tool calls and reasoning --------------------------- */

/* A parser of one generated chat message, streaming: feed it the text as it
 * comes and it says what is content, what is reasoning (a think block) and
 * which tool calls the model wrote, in the model's own format
 * (rw_tool_format), holding back only what might still be a marker. */

typedef enum {
    RW_REASONING_NONE = 0,     /* think blocks stay in the content */
    RW_REASONING_DEEPSEEK = 1, /* think blocks become reasoning (llama-server's "deepseek") */
} rw_reasoning_format;

/* What an event is; later versions may add kinds (ignore unknown ones). */
typedef enum {
    RW_CHAT_EV_CONTENT = 0,    /* text, len: a piece of the content */
    RW_CHAT_EV_REASONING = 1,  /* text, len: a piece of the reasoning */
    RW_CHAT_EV_CALL_BEGIN = 2, /* index, id, name: a tool call starts (name complete) */
    RW_CHAT_EV_CALL_ARGS = 3,  /* index, text, len: a piece of its arguments (a JSON object's text, in order) */
    RW_CHAT_EV_CALL_END = 4,   /* index: its arguments are complete */
} rw_chat_event_kind;

/* A fixed record: a minor version never changes it. */
typedef struct {
    rw_chat_event_kind kind;
    const char *text; /* not NUL-terminated; valid during the callback only */
    size_t len;
    int index;        /* calls: 0, 1, ... within this output */
    const char *id;   /* CALL_BEGIN: NUL-terminated, valid during the callback */
    const char *name; /* CALL_BEGIN: NUL-terminated, valid during the callback */
} rw_chat_event;

/* Called for each event, in order. A status other than RW_OK stops the
 * parser: feed / finish return it (the parser must then only be freed). */
typedef rw_status (*rw_chat_event_fn)(void *user, const rw_chat_event *ev);

typedef struct rw_chat_output rw_chat_output;

/* A parser's settings. Set struct_size to sizeof, or start from
 * rw_chat_output_params_default(): fields are only added at the end. */
typedef struct {
    size_t struct_size; /* sizeof(rw_chat_output_params) as the caller knows it */
    rw_tool_format tool_format;
    rw_reasoning_format reasoning;
    const char *think_open, *think_close; /* NULL: "<think>", "</think>" (copied) */
    bool in_reasoning;      /* the prompt opened the think block (rw_chat_prompt_opens_reasoning) */
    const char *tools_json; /* the request's tools (an OpenAI JSON array), or NULL: qwen-xml converts
                               parameter values by their schemas (copied) */
    const char *id_prefix;  /* tool call ids: id_prefix + 24 hex digits; NULL: "call_" (copied) */
    uint64_t id_seed;       /* the ids' random part comes from this (fresh randomness, or a constant
                               for reproducible ids) */
    bool stream_args;       /* a call's arguments as they come (CALL_ARGS pieces), else in one piece */
    bool cut;               /* the token limit cut the output (as rw_chat_output_set_cut) */
    int max_calls;          /* > 0: calls after this many are dropped, and all text after the last one
                               (OpenAI's parallel_tool_calls false: max_calls 1) */
} rw_chat_output_params;

/* Fills the first size bytes of *p with the defaults (RW_TOOL_FMT_NONE, RW_REASONING_DEEPSEEK, the rest 0 / NULL) and sets
 * struct_size to size. */
RW_API void rw_chat_output_params_init(rw_chat_output_params *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the size is
 * the program's, not the library's). */
static inline rw_chat_output_params rw_chat_output_params_default(void) {
    rw_chat_output_params p;
    rw_chat_output_params_init(&p, sizeof p);
    return p;
}

/* A parser for one generated message (caller: rw_chat_output_free).
 * Errors: RW_ERR_INVALID_ARG (a size this library does not know, an unknown
 * format, tools_json that does not parse). */
RW_API rw_status rw_chat_output_open(const rw_chat_output_params *p, rw_chat_output **out, rw_error *err);
RW_API void rw_chat_output_free(rw_chat_output *p); /* NULL is fine */
/* Feeds the next piece of generated text; events for what is now certain go
 * to fn. Errors: the callback's status, RW_ERR_NOMEM. */
RW_API rw_status rw_chat_output_feed(rw_chat_output *p, const char *text, size_t len, rw_chat_event_fn fn, void *user,
                                     rw_error *err);
/* The generation ended: text held back is resolved (an unfinished call or
 * marker becomes content, an unclosed think block stays reasoning). Feed
 * no more after this. */
RW_API rw_status rw_chat_output_finish(rw_chat_output *p, rw_chat_event_fn fn, void *user, rw_error *err);
/* The token limit cut the generation (call before finish): a call left
 * incomplete and a trailing piece of call markup are then dropped instead
 * of given back as content; a streamed call already begun is closed. */
RW_API void rw_chat_output_set_cut(rw_chat_output *p, bool cut);
/* Calls complete so far (finish_reason "tool_calls"). */
RW_API int rw_chat_output_n_calls(const rw_chat_output *p);
/* With max_calls: that many calls are complete, so nothing more the model
 * writes will be sent (the generation can stop). */
RW_API bool rw_chat_output_calls_done(const rw_chat_output *p);
/* Whether the think block is open now (reasoning is being generated). */
RW_API bool rw_chat_output_in_reasoning(const rw_chat_output *p);

/* A whole message parsed at once (fixed records). */
typedef struct {
    char *id, *name;
    char *arguments; /* a JSON object's text (compact) */
} rw_chat_tool_call;

typedef struct {
    char *content; /* NUL-terminated, "" when none */
    size_t content_len;
    char *reasoning; /* NULL when there was no reasoning */
    size_t reasoning_len;
    rw_chat_tool_call *calls;
    int n_calls;
} rw_chat_parsed;

/* The whole generated text at once: what the events of feed + finish
 * give, gathered. The caller frees *out with rw_chat_parsed_free (on
 * failure *out is zeroed). Errors: as rw_chat_output_open. */
RW_API rw_status rw_chat_output_parse_all(const rw_chat_output_params *p, const char *text, size_t len,
                                          rw_chat_parsed *out, rw_error *err);
RW_API void rw_chat_parsed_free(rw_chat_parsed *m); /* NULL is fine */

/* ---- embedding requests with a callback ------------------------------ */

/* The one event of an embedding request. Pointers are valid during the
 * callback only. size is sizeof(rw_embed_event) as the library fills it: a
 * later version may add fields at the end, never change these. */
typedef struct {
    size_t size;
    const float *embedding; /* [n_rows][n_embd], the final-norm hidden state pooled, not normalized; NULL
                               on error */
    int64_t n_rows;         /* 1, or the prompt's length with RW_POOLING_NONE */
    int n_embd;
    const float *logits;    /* [n_logits]: those of the logit_ids asked for, in that order */
    int n_logits;
    int64_t prompt_tokens;
    int64_t cached_tokens;  /* prompt tokens whose state came from the prefix cache */
    const char *error;      /* NULL, or why it failed (one line; no embedding then) */
} rw_embed_event;

/* Runs on the engine's scheduler thread, as rw_token_event_fn. */
typedef void (*rw_embed_event_fn)(void *user, const rw_embed_event *ev);

/* Queues an embedding request for n prompt ids (copied): the asynchronous
 * form of rw_engine_embed (its pooling: RW_POOLING_FILE = the file's, the
 * last token's when it declares none), with the logits of n_logit_ids
 * tokens after the last position (copied; may be 0). *id (may be NULL)
 * names it for rw_engine_cancel. Every request not cancelled gets exactly
 * one event; a failed submission gets none. Errors: RW_ERR_CONTEXT (n >
 * n_ctx), RW_ERR_INVALID_ARG (n < 1, an id outside the vocabulary, an
 * unknown pooling), RW_ERR_BUSY. */
RW_API rw_status rw_engine_submit_embedding(rw_engine *e, const int32_t *ids, int64_t n, rw_pooling pooling,
                                            const int32_t *logit_ids, int n_logit_ids, rw_embed_event_fn cb,
                                            void *user, uint64_t *id, rw_error *err);

/* ==== tools: model files, the disk tier, process settings ============ *
 *
 * What the rewind program's other commands use: reading a GGUF file's
 * metadata and tensors without loading a model, checking a prefix cache's
 * disk tier, and the process-wide switches kept for comparisons. */

/* ---- reading a GGUF file --------------------------------------------- */

/* A GGUF file mapped and validated (header, metadata, tensor table, every
 * tensor inside the file), not loaded as a model: any architecture, or a
 * vocabulary-only file. Read-only; may be shared by threads. */
typedef struct rw_model_file rw_model_file;

/* A metadata value's type: GGUF's type codes. */
typedef enum {
    RW_META_UINT8 = 0,
    RW_META_INT8 = 1,
    RW_META_UINT16 = 2,
    RW_META_INT16 = 3,
    RW_META_UINT32 = 4,
    RW_META_INT32 = 5,
    RW_META_FLOAT32 = 6,
    RW_META_BOOL = 7,
    RW_META_STRING = 8,
    RW_META_ARRAY = 9,
    RW_META_UINT64 = 10,
    RW_META_INT64 = 11,
    RW_META_FLOAT64 = 12,
} rw_meta_type;

/* One metadata value (or an array's element), read-only and borrowed from
 * the file (valid until rw_model_file_close). The field of its type is
 * set, the others are 0: u for the unsigned types and bool, i for the
 * signed ones, f for float32 (widened exactly) and float64, str / str_len
 * for a string (not NUL-terminated, any bytes), elem_type / n_elems for
 * an array (its elements through rw_meta_elem). */
typedef struct {
    rw_meta_type type;
    uint64_t u;
    int64_t i;
    double f;
    const char *str;
    uint64_t str_len;
    rw_meta_type elem_type;
    uint64_t n_elems;
    const void *impl; /* the library's: where the elements are */
} rw_meta_value;

/* One tensor of the table, borrowed from the file. */
typedef struct {
    const char *name;     /* NUL-terminated */
    const char *type;     /* the weight type's name: "f32", "q8_0", ... */
    uint32_t n_dims;      /* 1..4 */
    uint64_t ne[4];       /* elements per dimension, ne[0] contiguous; unused ones are 1 */
    uint64_t offset;      /* of its data, from the start of the file (its part's, in a split model) */
    uint64_t nbytes;
    bool readable;        /* rw_model_file_read_rows can convert its type to float */
} rw_tensor_info;

/* Maps and validates path. The caller frees *out with
 * rw_model_file_close. Errors: RW_ERR_IO (cannot open or map it),
 * RW_ERR_FORMAT (not GGUF or malformed: the message names the offset),
 * RW_ERR_UNSUPPORTED (a GGUF version or tensor type rewind does not
 * read). */
RW_API rw_status rw_model_file_open(const char *path, rw_model_file **out, rw_error *err);
RW_API void rw_model_file_close(rw_model_file *f); /* NULL is fine */
RW_API uint32_t rw_model_file_version(const rw_model_file *f);
RW_API uint32_t rw_model_file_alignment(const rw_model_file *f);
RW_API uint64_t rw_model_file_data_offset(const rw_model_file *f); /* where the tensor data starts */
RW_API uint64_t rw_model_file_size(const rw_model_file *f);        /* bytes (of every part of a split model) */
/* The metadata entries in file order: the i-th one's key (borrowed,
 * NUL-terminated) with its value in *value, or NULL (and *value zeroed)
 * once i is past the last. */
RW_API size_t rw_model_file_n_meta(const rw_model_file *f);
RW_API const char *rw_model_file_meta(const rw_model_file *f, size_t i, rw_meta_value *value);
/* The value of key: true, or false (and *value zeroed) when absent. */
RW_API bool rw_model_file_find_meta(const rw_model_file *f, const char *key, rw_meta_value *value);
/* The i-th element of an array value: true, or false (and *out zeroed)
 * when arr is not an array or i is past its end (false for a NULL out). */
RW_API bool rw_meta_elem(const rw_meta_value *arr, uint64_t i, rw_meta_value *out);
/* "uint8", "string", "array", ...; "?" for a value outside the enum. */
RW_API const char *rw_meta_type_name(rw_meta_type t);
/* The tensors in file order: the i-th in *out (true), or false (and *out
 * zeroed) once i is past the last (false for a NULL out). */
RW_API size_t rw_model_file_n_tensors(const rw_model_file *f);
RW_API bool rw_model_file_tensor(const rw_model_file *f, size_t i, rw_tensor_info *out);
/* The index of the tensor named name, or -1. */
RW_API int64_t rw_model_file_find_tensor(const rw_model_file *f, const char *name);
/* Rows [row, row + n_rows) of tensor i (a row: ne[0] elements; the rows
 * of all higher dimensions in order) converted to float into out (n_rows *
 * ne[0] floats), exactly as the model's kernels read them. Errors:
 * RW_ERR_RANGE (no tensor i, rows past the last), RW_ERR_UNSUPPORTED (a
 * type without a float conversion: rw_tensor_info.readable is false),
 * RW_ERR_IO (the file was truncated under its mapping); out is then
 * undefined. */
RW_API rw_status rw_model_file_read_rows(const rw_model_file *f, size_t i, uint64_t row, uint64_t n_rows, float *out,
                                         rw_error *err);

/* A split model (llama.cpp's gguf-split: files PREFIX-00001-of-0000N.gguf
 * to PREFIX-0000N-of-0000N.gguf, each some of the tensors, the first also
 * the metadata) opens from its first part, here and in rw_model_open:
 * the others are found beside it by name and presented as one model, the
 * first part's metadata and every part's tensors in part order. Another
 * part is refused (RW_ERR_INVALID_ARG, naming the first); a part missing,
 * unreadable or numbered otherwise is an error naming it.
 * rw_model_file_version, _alignment and _data_offset describe the first
 * part, rw_model_file_size is the bytes of all. */
RW_API uint32_t rw_model_file_n_parts(const rw_model_file *f); /* 1 for one file, 0 for NULL */
/* The part (from 0) holding tensor i; 0 past the last. */
RW_API uint32_t rw_model_file_tensor_part(const rw_model_file *f, size_t i);
/* Writes the model of in (one file or a split model's first part) as parts
 * OUT_PREFIX-00001-of-0000N.gguf.., byte for byte as llama.cpp's
 * gguf-split: every max_tensors tensors a new part, or (max_tensors 0)
 * a new part before the tensor that would take the part's tensor data
 * (each padded to 32 bytes) past max_bytes; exactly one of the two is
 * nonzero (else RW_ERR_INVALID_ARG). The first part holds the metadata,
 * every part split.no, split.count and split.tensors.count. Each part is
 * written to its name + ".tmp" and renamed. *n_parts (may be NULL) gets
 * N. */
RW_API rw_status rw_model_file_split(const char *in, const char *out_prefix, uint32_t max_tensors, uint64_t max_bytes,
                                     uint32_t *n_parts, rw_error *err);
/* Writes the split model whose first part is first_part as one file out,
 * as gguf-split --merge: the first part's metadata (split.count set to 0)
 * and every tensor in part order. RW_ERR_INVALID_ARG when first_part is
 * not a split model. */
RW_API rw_status rw_model_file_merge(const char *first_part, const char *out, rw_error *err);

/* ---- a model's texts ------------------------------------------------- */

typedef enum {
    RW_MODEL_TEXT_BOS = 0,        /* the chat template's bos_token text */
    RW_MODEL_TEXT_EOS = 1,        /* its eos_token text */
    RW_MODEL_TEXT_RERANK_PROMPT = 2, /* tokenizer.chat_template.rerank: the reranker's prompt */
} rw_model_text;
/* The text (borrowed, valid while m is open), or NULL when the file has
 * none or what is not a value of the enum. */
RW_API const char *rw_model_text_get(const rw_model *m, rw_model_text what);

/* ---- the disk tier ---------------------------------------------------- */

/* Reads and fully verifies (checksums, the model and KV type they were
 * made for, their tokens) every file that an engine of m with params
 * (cache_dir, run.n_ctx, run.kv_f32, draft: as rw_engine_open would use
 * them) would read from its disk tier, and removes those that fail; the
 * folder may be in use by running engines meanwhile. *n_ok, *n_invalid
 * (removed) and *n_unreadable (could not be read; left) count them (each
 * may be NULL). Errors: RW_ERR_INVALID_ARG (no cache_dir, not a model of
 * rw_model_open), RW_ERR_IO (the folder cannot be read); the counts are
 * then 0. */
RW_API rw_status rw_cache_verify(rw_model *m, const rw_engine_params *params, int *n_ok, int *n_invalid,
                                 int *n_unreadable, rw_error *err);

/* ---- importance matrices ---------------------------------------------- */

/* llama-imatrix's statistics of a model's weights, from the model's own
 * passes: for each weight matrix of its blocks, per input column, the sum
 * of the squares of the activations that reached it and how many rows that
 * was (per expert for an expert tensor), from the products of at least 16
 * rows. rw_quantize_params.imatrix (llama-quantize --imatrix) weighs the
 * quantizers by them. rw_imatrix_begin starts collecting from every
 * evaluation of m's sequences that the calling thread runs
 * (rw_seq_eval_batch, ...) until rw_imatrix_end, one collector per thread
 * at a time; process_output: output.weight too (llama-imatrix
 * --process-output). rw_imatrix_save writes what was collected so far in
 * llama-imatrix's GGUF layout (dataset: the calibration text's name for
 * imatrix.datasets, or NULL; chunk_count and chunk_size as the caller ran
 * them); RW_ERR_INVALID_ARG when nothing was collected. `rewind imatrix`
 * is made of them. */
typedef struct rw_imatrix_collector rw_imatrix_collector;
RW_API rw_status rw_imatrix_begin(rw_model *m, bool process_output, rw_imatrix_collector **out, rw_error *err);
RW_API rw_status rw_imatrix_save(const rw_imatrix_collector *c, const char *path, const char *dataset,
                                 uint32_t chunk_count, uint32_t chunk_size, rw_error *err);
RW_API void rw_imatrix_end(rw_imatrix_collector *c); /* NULL is fine */

/* ---- quantizing a model file ------------------------------------------- */

typedef struct {
    size_t struct_size;    /* sizeof(rw_quantize_params); set by rw_quantize_params_default / _init */
    int n_threads;         /* 0: the physical cores; the file is the same for any */
    bool pure;             /* every converted weight of the base type (llama-quantize --pure) */
    bool allow_requantize; /* convert weights already quantized, through f32 (else refused) */
    /* A tensor type name ("q8_0", "f16", ...) instead of the mix's for
     * output.weight (and a tied token embedding), and for the token
     * embedding: llama-quantize's --output-tensor-type and
     * --token-embedding-type (taken as given, with or without pure). NULL:
     * the mix's. */
    const char *output_type;
    const char *token_embd_type;
    /* llama-imatrix's importance matrix file (GGUF or the legacy .dat):
     * the K-quants, Q4_0..Q5_1 and IQ4_NL/IQ4_XS fit each row weighting its
     * columns by it, as llama-quantize --imatrix, with the same file; its
     * name, dataset and size are recorded in the metadata as
     * llama-quantize records them. NULL: none. (Added after the first
     * version: an older program's smaller struct leaves it NULL.) */
    const char *imatrix;
    /* llama-quantize's --tensor-type overrides: "PATTERN=TYPE ..." (white
     * space between items, as its --tensor-type-file): the first pattern
     * (a regular expression, lowercased; \d and \w as ECMAScript's) found
     * in a tensor's name gives its type instead of the mix's (then the
     * fallback for rows its blocks do not divide). NULL: none. (Added
     * after the first version, as imatrix.) */
    const char *tensor_types;
} rw_quantize_params;

/* Every field 0 / NULL: the mix's types, the physical cores. */
/* Fills the first size bytes of *p with the defaults and sets
 * p->struct_size = size: pass sizeof *p (the program's struct, so the
 * library never writes past it). */
RW_API void rw_quantize_params_init(rw_quantize_params *p, size_t size);
/* The defaults, sized for this header's struct (inline, so the
 * size is the program's, not the library's). */
static inline rw_quantize_params rw_quantize_params_default(void) {
    rw_quantize_params p;
    rw_quantize_params_init(&p, sizeof p);
    return p;
}

/* Writes the model of in_path (a GGUF file, typically F32, F16 or BF16) to
 * out_path (atomically: via out_path.tmp) with its weights converted to
 * type, llama-quantize's file-type names: F32 F16 BF16 Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K
 * IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4_MOE (case-insensitive). The file is the
 * one llama-quantize writes from the same input, type and options without
 * an importance matrix: the same type per tensor (the mixes' rules and
 * fallbacks), the same quantized bytes, the same metadata. p may be NULL
 * (the defaults). Errors: RW_ERR_INVALID_ARG (an unknown type or tensor
 * type), RW_ERR_UNSUPPORTED (a weight that cannot be converted, a split
 * file), RW_ERR_IO / RW_ERR_FORMAT (the files). */
RW_API rw_status rw_quantize_file(const char *in_path, const char *out_path, const char *type,
                                  const rw_quantize_params *p, rw_error *err);
/* The type names rw_quantize_file takes: the i-th, static, or NULL once i
 * is past the last. */
RW_API const char *rw_quantize_type(size_t i);

/* ---- process settings ------------------------------------------------- */

/* Switches that give the same results either way, for comparisons and
 * tests, set before any model opens (like rw_set_kernels): packed weight
 * panels (the AVX2 and AVX-512 kernels' re-laid-out copy of a matrix, made
 * at rw_model_open; default on) and the AVX2 tier's use of AVX-VNNI where
 * the CPU has it (default on). Errors: RW_ERR_BUSY (a model is open). */
RW_API rw_status rw_set_packed_panels(bool on, rw_error *err);
RW_API rw_status rw_set_avx_vnni(bool on, rw_error *err);
/* Where the one-row K-quant kernels (decode's Q4_K, Q5_K, Q6_K products,
 * 16 weight rows streamed at once) prefetch the weights: "l1", "l2" or
 * "auto" (the default: the faster on this CPU, l2 on AMD Zen 4).
 * The same results either way. Errors: RW_ERR_INVALID_ARG (another name),
 * RW_ERR_BUSY (a model is open). */
RW_API rw_status rw_set_weight_prefetch(const char *where, rw_error *err);
/* The level in use: "l1" or "l2" (auto resolved for this CPU). Static. */
RW_API const char *rw_get_weight_prefetch(void);
/* Which weights a model keeps as stored panels, where the kernels have a
 * form of exactly the weights' bytes (the AVX-512 tier's Q4_K, Q5_K and
 * Q6_K, our numerics): "experts" (the default: a mixture of experts'
 * tensors, whose few rows a token each in a prefill the panels serve
 * best), "all" (every matrix but the tied output: faster decoding and
 * batches of a few rows, but each matrix is repacked when the model opens,
 * about a second a GB on a core where plain loading only maps the file) or
 * "off". Packed when the model opens, on every core; the file's pages of
 * the packed weights are given back, so memory stays one copy. The same
 * results either way. Errors: RW_ERR_INVALID_ARG (another name),
 * RW_ERR_BUSY (a model is open). */
RW_API rw_status rw_set_stored_panels(const char *which, rw_error *err);
/* The setting in use: "experts", "all" or "off". Static. */
RW_API const char *rw_get_stored_panels(void);
/* Installs a process-wide SIGBUS handler so that a model file cut short
 * while mapped makes the requests that read it fail with RW_ERR_IO
 * (rw_mapped_file_fault_count counts it) instead of killing the process;
 * any other SIGBUS goes to the handler installed before. For programs:
 * call once, before starting threads; calling again does nothing. Errors:
 * RW_ERR_IO (sigaction failed). */
RW_API rw_status rw_install_fault_guard(rw_error *err);

#ifdef __cplusplus
}
#endif

#endif
