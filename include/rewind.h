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
 *   - rw_seq: one sequence driven by hand: evaluate tokens, read logits,
 *     rewind, save and load a state file.
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
#define RW_VERSION_MINOR 22
#define RW_VERSION_PATCH 0
#define RW_VERSION_STRING "0.22.0"
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
 * "ref" (plain C), "avx2", "avx512" or "neon"; NULL or "" = the best this
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
} rw_model_params;

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

#ifdef __cplusplus
}
#endif

#endif
