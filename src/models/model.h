/* model.h - transformer models loaded from GGUF files, and their forward pass.
 *
 * A model is built from an open rw_gguf: the architecture named by
 * general.architecture picks the hyperparameter reader, the weight binder and
 * the layer function (registry.c). Weights are used in place from the GGUF
 * mapping, which must outlive the model. Every missing or invalid key, and
 * every tensor with a wrong shape or type, is an error naming it.
 *
 * A sequence (rw_model_seq) is one token stream's state: its tokens and a
 * state per layer (KV for attention, recurrent for DeltaNet/Mamba2). A
 * forward pass appends n tokens to a sequence at positions len..len+n-1 and
 * returns logits for the last token or for every token. Prefill (n > 1) and
 * decode (n = 1) run the same code per token; the result of a token does not
 * depend on how the tokens were split into calls (batch invariance, see
 * model_int.h).
 *
 * A model's forward pass is not reentrant: it uses scratch memory owned by
 * the model, so one thread at a time may run forward passes on one model.
 */
#ifndef RW_MODELS_MODEL_H
#define RW_MODELS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "cache/kv.h"
#include "cache/state.h"
#include "gguf/gguf.h"

typedef enum {
    RW_ROPE_NORM = 0, /* rotate adjacent pairs (2i, 2i+1): llama */
    RW_ROPE_NEOX = 1, /* rotate pairs (i, i + n_rot/2): qwen2, qwen3 */
} rw_rope_kind;

/* Hyperparameters read from the GGUF metadata (keys "<arch>.<name>"). */
typedef struct {
    char arch[32];        /* general.architecture */
    int64_t n_vocab;      /* rows of token_embd */
    int64_t n_ctx_train;  /* context_length */
    int n_embd;           /* embedding_length */
    int n_layer;          /* block_count */
    int n_ff;             /* feed_forward_length */
    int n_head;           /* attention.head_count */
    int n_head_kv;        /* attention.head_count_kv (default n_head) */
    int head_dim_k;       /* attention.key_length (default n_embd / n_head) */
    int head_dim_v;       /* attention.value_length (default head_dim_k) */
    float rms_eps;        /* attention.layer_norm_rms_epsilon */
    rw_rope_kind rope_kind;
    int n_rot;            /* rope.dimension_count (default head_dim_k) */
    float rope_base;      /* rope.freq_base (default 10000) */
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear and YaRN scaling, else 1 */
    /* YaRN (rope.scaling.type = yarn; yarn_ext_factor 0 = none): the ramp
     * between interpolated and extrapolated pairs from yarn_corr[0] to
     * yarn_corr[1] (rope.scaling.original_context_length, beta fast 32 and
     * slow 1 unless the file says otherwise), cos and sin times
     * yarn_attn_factor * (1 + 0.1 ln factor), as llama.cpp's CPU backend */
    float yarn_ext_factor, yarn_attn_factor, yarn_corr[2];
    /* Sliding-window attention (gemma3): the window's layers see only the
     * n_swa most recent positions and rotate with their own base, unscaled. */
    int n_swa;            /* attention.sliding_window: positions a query sees, itself included; 0 = none */
    int swa_pattern;      /* attention.sliding_window_pattern P: layer il slides iff il % P < P-1 (P 0: all) */
    float rope_base_swa;  /* rope.freq_base_swa: RoPE base of the sliding layers */
    float final_logit_softcap; /* final_logit_softcapping c: logits = c*tanh(logits/c) (0 = none) */
    bool has_rope_freqs;  /* rope_freqs.weight present (llama3 factors) */
    bool tied_output;     /* no output.weight: token_embd is the output head */
    float embedding_scale; /* embeddings are multiplied by it (granite; 0 or 1 = none) */
    float logit_scale;     /* logits are divided by it (granite; 0 or 1 = none) */
    /* pooling_type: how an embedding model's file says to pool its hidden
     * states, in the numbering GGUF files use (0 none, 1 mean, 2 CLS, 3
     * last token, 4 rank); -1 when the key is absent (a generative model). */
    int pooling_type;
} rw_model_hparams;

typedef struct rw_model rw_model;
typedef struct rw_model_seq rw_model_seq;

/* Loads the model described by g. g must stay open until rw_model_free. The
 * caller owns *out. */
rw_status rw_model_load(const rw_gguf *g, rw_model **out, rw_error *err);

/* Which weights a model keeps as stored panels (panels.c, the public
 * rw_set_stored_panels): process-wide, read when a model loads. */
typedef enum { RW_STORED_PANELS_EXPERTS = 0, RW_STORED_PANELS_ALL, RW_STORED_PANELS_OFF } rw_stored_panels;
void rw_models_set_stored_panels(rw_stored_panels mode);
rw_stored_panels rw_models_stored_panels(void);
bool rw_stored_panels_parse(const char *s, rw_stored_panels *out);
const char *rw_stored_panels_name(rw_stored_panels mode); /* static */
/* The largest stored panels m keeps (*bytes: their rows' bytes), or NULL:
 * for a read loop over weights already resident (bench model). */
const void *rw_model_largest_panels(const rw_model *m, size_t *bytes);
void rw_model_free(rw_model *m); /* no-op on NULL */

/* Applies the LoRA adapter g (lora.c has the file's layout) to every
 * matrix it names, its updates scaled by scale (times alpha / rank when the
 * file has alpha), after the adapters added before. Call before any
 * sequence or engine exists: the fingerprint changes. On success the model
 * owns g (closed by rw_model_free); on failure nothing changed and the
 * caller still owns g. Errors: RW_ERR_FORMAT (not an adapter, a pair of
 * the wrong shape), RW_ERR_UNSUPPORTED (not LoRA, a tensor the model does
 * not adapt, such as the token embedding or an expert tensor),
 * RW_ERR_INVALID_ARG (another architecture's adapter). */
rw_status rw_model_add_lora(rw_model *m, rw_gguf *g, float scale, rw_error *err);

/* The public API's data kept with a model it opened (src/api), or NULL. */
void *rw_model_api_data(const rw_model *m);
void rw_model_set_api_data(rw_model *m, void *data);

const rw_model_hparams *rw_model_get_hparams(const rw_model *m);

/* True once the model's file (or an adapter's) was found truncated under its mapping (see
 * rw_mapped_file_guard_install): every forward pass then fails with
 * RW_ERR_IO, and nothing computed from it may be kept. */
bool rw_model_weights_lost(const rw_model *m);

/* True if general.architecture arch has a forward pass here. */
bool rw_model_arch_supported(const char *arch);
/* The i-th architecture name the registry holds, NULL past the last. */
const char *rw_models__arch_name(size_t i);

/* A new empty sequence for m with its KV cache in kv_type storage, holding at
 * most max_ctx positions (0 = the model's training context). The caller owns
 * *out; free it before the model. A sequence holds its token ids and one
 * state per layer (cache/state.h); it is used by one thread at a time, and
 * forward passes on one model are serialised by the caller (see above). */
rw_status rw_model_seq_new(const rw_model *m, rw_kv_type kv_type, int64_t max_ctx, rw_model_seq **out,
                           rw_error *err);
void rw_model_seq_free(rw_model_seq *s); /* no-op on NULL */

int64_t rw_model_seq_length(const rw_model_seq *s); /* tokens processed */
int64_t rw_model_seq_max_ctx(const rw_model_seq *s);
const int32_t *rw_model_seq_tokens(const rw_model_seq *s); /* ids of positions 0..length-1 */
const rw_model *rw_model_seq_model(const rw_model_seq *s);
rw_kv_type rw_model_seq_kv_type(const rw_model_seq *s);

/* Exact rewind: forgets every token from position n on (n <= length), so
 * that the sequence is bitwise what it would be had it only ever seen tokens
 * 0..n-1. Attention layers cut back; recurrent layers replay their logged
 * inputs from a checkpoint or, further back, restore the nearest checkpoint
 * and the model recomputes the rest (uses pool; runs a forward pass on the
 * sequence's model, so the model-level serialisation applies). If memory
 * runs out part-way the sequence is left empty (length 0) and the error
 * returned. truncate = rewind with no thread pool. */
rw_status rw_model_seq_rewind(rw_model_seq *s, int64_t n, rw_threadpool *pool, rw_error *err);
rw_status rw_model_seq_truncate(rw_model_seq *s, int64_t n, rw_error *err);
/* What a rewind to n would cost, without doing it: tokens of recurrence
 * replay (no matmul) and tokens recomputed by the model. RW_ERR_RANGE if n is
 * out of range. */
rw_status rw_model_seq_rewind_cost(const rw_model_seq *s, int64_t n, int64_t *replay, int64_t *recompute);

/* Bytes of weight matrices one decode step reads: every bound matrix
 * (the output head too, the embedding table when tied), except MoE expert
 * tensors, of which a step reads only the chosen experts (not counted). */
uint64_t rw_model_matrix_bytes(const rw_model *m);

/* The costs of speculative decoding with m's own MTP block, relative to a
 * decode step, from the file's tensor sizes (engine/spec.h's adaptive
 * rule): a draft token streams the block and the output head, a catch-up
 * token the block. Both 0 for a file without the block. */
void rw_model_mtp_costs(const rw_model *m, float *draft_cost, float *catch_up_cost);

/* Retention of recurrent checkpoints and sliding-window layers' windows
 * (see models/seq.c for the policy): positions to always keep (message
 * boundaries), and the byte budget (a kept window outside the ring counts
 * at the bytes of its pages, cache/state.h rw_kv_state_window_bytes; a
 * sliding layer's dense span at one page per 64 positions). The default
 * is 256 MiB; a model whose only rewind-limited layers slide adds its
 * whole span, so that every position restores without recomputation. */
rw_status rw_model_seq_mark(rw_model_seq *s, int64_t pos, rw_error *err);
void rw_model_seq_set_checkpoint_budget(rw_model_seq *s, size_t bytes);
/* The budget as a count: at most n checkpoints (n > 0; the fine ones stay
 * whatever the count). n <= 0 leaves the budget as it is. */
void rw_model_seq_limit_checkpoints(rw_model_seq *s, int n);
/* The sequence will grow to at least n before anything rewinds it (a prompt
 * fed in chunks): until then each pass takes only the checkpoints (and the
 * replay log) the retention at length n keeps, not the ones the next pass
 * would drop again. A rewind before that still works, recomputing more.
 * Passes past n plan for their own length, as without it. Copies, clones
 * and state files do not carry it. */
void rw_model_seq_plan_until(rw_model_seq *s, int64_t n);
/* false: the sequence keeps no recurrent checkpoints at all, not even the
 * fine ones, and no replay log, from its next pass on (one that is never
 * rewound, as a benchmark's: its memory is then the states alone, as
 * llama.cpp's). A rewind still works, recomputing from the nearest
 * checkpoint kept before (position 0 at worst). Default true. */
void rw_model_seq_set_rewindable(rw_model_seq *s, bool rewindable);
/* Positions of the checkpoints held, ascending (at most cap written);
 * returns the count. 0 for models without recurrent layers. */
int rw_model_seq_checkpoints(const rw_model_seq *s, int64_t *pos, int cap);
size_t rw_model_seq_bytes(const rw_model_seq *s);               /* memory held */
/* The most memory one sequence of m holds at n_ctx positions with KV type
 * kv_type and max_checkpoints recurrent checkpoints (0: the default
 * retention): its full KV pages (a sliding-window layer's ring), its
 * recurrent states, the checkpoints the
 * retention keeps at that length (and two marks) and a replay log. An
 * estimate from above for admission budgets; 0 if a sequence cannot be
 * made. */
size_t rw_model_seq_bytes_at(const rw_model *m, rw_kv_type kv_type, int64_t n_ctx, int max_checkpoints);
/* The same split: attention KV states, and recurrent states (with their
 * checkpoints and logs); the rest (tokens, bookkeeping) in neither. */
void rw_model_seq_bytes_by_kind(const rw_model_seq *s, size_t *kv, size_t *recurrent);
/* Calls fn for every block the sequence shares by reference with its
 * clones (KV pages, recurrent checkpoints; cache/state.h each_block), with
 * kv telling which kind. Their bytes are part of rw_model_seq_bytes; an
 * owner of many sequences counts each identity once. */
void rw_model_seq_each_block(const rw_model_seq *s, void (*fn)(void *ctx, const void *block, size_t bytes, bool kv),
                             void *ctx);
/* One checkpoint of every recurrent layer and one window of every sliding-window layer */
size_t rw_model_seq_checkpoint_bytes(const rw_model_seq *s);
size_t rw_model_seq_log_bytes_per_token(const rw_model_seq *s); /* logged recurrence inputs per token */

/* Snapshots: an independent copy (clone), and making dst equal to src
 * (restore; same model and settings, dst's context large enough). Both share
 * KV pages and checkpoints with src by reference (copy-on-write: cheap, and
 * nothing done to one is seen by the other). On error dst is unchanged. */
rw_status rw_model_seq_clone(const rw_model_seq *s, rw_model_seq **out, rw_error *err);
rw_status rw_model_seq_copy(rw_model_seq *dst, const rw_model_seq *src, rw_error *err);

/* State files (models/seq_file.c): the sequence's tokens and every layer's
 * valid state with its checkpoints and log, with the model's fingerprint and
 * checksums, written atomically (temporary file, fsync, rename). Loading
 * checks everything before it replaces s's content; on any error (another
 * model, a truncated or corrupted file) s is unchanged. */
rw_status rw_model_seq_save(const rw_model_seq *s, const char *path, rw_error *err);
rw_status rw_model_seq_load(rw_model_seq *s, const char *path, rw_error *err);
/* The same through memory (the prefix cache's disk tier uses files). The
 * caller frees *data with free(). */
rw_status rw_model_seq_save_buffer(const rw_model_seq *s, uint8_t **data, size_t *len, rw_error *err);
rw_status rw_model_seq_load_buffer(rw_model_seq *s, const uint8_t *data, size_t len, rw_error *err);
/* The token ids a state file holds, after checking its magic, version and
 * model fingerprint only (RW_ERR_INVALID_ARG: made for another model; the
 * full check happens at load). The caller frees *tokens. */
rw_status rw_model_state_file_tokens(const rw_model *m, const char *path, int32_t **tokens, int64_t *n,
                                     rw_error *err);
/* 16 bytes identifying the model (architecture, hyperparameters, tensor
 * names, types and shapes) and the arithmetic its states depend on (the
 * kernel tier, the numerics mode, the revision of the activation rounding):
 * state files made under other arithmetic are refused as another model's. */
void rw_model_fingerprint(const rw_model *m, uint8_t out[16]);

typedef struct {
    const int32_t *tokens; /* n token ids, each < n_vocab */
    int64_t n;
    float *logits;         /* out: [n][n_vocab] if all_logits, else [n_vocab] (last token); may be NULL */
    bool all_logits;
    float *layer_out;      /* optional out: [n_layer][n][n_embd], residual stream after each layer */
    rw_threadpool *pool;   /* may be NULL (one thread) */
} rw_forward_args;

/* Runs the model over a->tokens appended to s at positions len..len+n-1 and
 * advances s by n. On error s keeps its previous length. */
rw_status rw_model_forward(rw_model *m, rw_model_seq *s, const rw_forward_args *a, rw_error *err);

/* One sequence's share of a batched forward pass. */
typedef struct {
    rw_model_seq *seq;     /* distinct for every item of one call */
    const int32_t *tokens; /* n token ids appended at positions len..len+n-1 of seq */
    int64_t n;             /* >= 1 */
    float *logits;         /* out: [n][n_vocab] if all_logits, else [n_vocab] (last token); may be NULL */
    bool all_logits;
    /* out: the final-norm hidden state (output_norm applied, before the
     * output head: what embedding models pool), [n][n_embd] if all_hidden,
     * else [n_embd] (last token); may be NULL. Bitwise independent of the
     * batch and the split, as the logits. */
    float *hidden;
    bool all_hidden;
} rw_batch_item;

/* Runs several sequences, each with its own length and number of new tokens,
 * through the model together (a ragged batch: no padding, each sequence sees
 * only its own positions). Every item's output is bitwise the same as a
 * rw_model_forward of that item alone. On error every sequence keeps its
 * previous length. */
rw_status rw_model_forward_batch(rw_model *m, const rw_batch_item *items, int n_items, rw_threadpool *pool,
                                 rw_error *err);

/* ---- the MTP block (multi-token prediction; models/mtp.c) ----
 *
 * Qwen3.5 files may carry one more decoder block (nextn_predict_layers):
 * from the trunk's post-output_norm hidden h_{k-1} of position k-1 and the
 * embedding of token x_k it computes, at MTP position k, logits for the
 * token x_{k+1} (h_{-1} = 0). Its own attention KV covers MTP positions
 * 0..M-1. To draft K tokens past the pending token x_L (sampled from
 * position L-1's logits): run the block at position L on (x_L, h_{L-1}),
 * take its token d_0, then feed its own post-norm output row back with d_0
 * at L+1, and so on (engine/spec.h).
 *
 * With the block enabled, a sequence keeps, behind cache/state.h's ops
 * like every layer: the trunk's hidden row of every position (so the block
 * can catch up from any point, after any rewind, snapshot or state file),
 * and the block's KV, which lags the trunk (M <= length between drafting
 * calls) and rewinds, clones and saves with the sequence. */

/* True if m has an MTP block it can run. */
bool rw_model_mtp_available(const rw_model *m);
/* Turns the MTP block on: sequences made afterwards carry its states and
 * every forward pass stores the hidden rows (a copy per token; the block
 * itself runs only in rw_model_mtp_forward). RW_ERR_UNSUPPORTED if the
 * model has no MTP block, RW_ERR_INVALID_ARG while a sequence of m exists
 * (its states would not match); no-op if already on. */
rw_status rw_model_enable_mtp(rw_model *m, rw_error *err);
bool rw_model_mtp_enabled(const rw_model *m);

/* One sequence's rows of an MTP pass: tokens at MTP positions M..M+n-1 (M =
 * rw_model_seq_mtp_length). Positions below the sequence's length must
 * carry the sequence's own tokens. h gives each row's hidden input
 * ([n][n_embd]); NULL takes the trunk's stored rows of positions
 * M-1..M+n-2 (every position must then be <= the sequence's length). */
typedef struct {
    rw_model_seq *seq;     /* distinct for every item of one call */
    const int32_t *tokens;
    int64_t n;             /* >= 1 */
    const float *h;        /* may be NULL (above) */
    float *logits;         /* out: [n][n_vocab] if all_logits, else [n_vocab] (last row); may be NULL */
    bool all_logits;
    float *h_out;          /* out: [n_embd] post-norm output of the last row (the next chained h); may be NULL */
} rw_mtp_item;

/* Runs the MTP block for several sequences together; each row's result is
 * bitwise the same whatever the batch or the split into calls. On error
 * every sequence's MTP length is as before. */
rw_status rw_model_mtp_forward(rw_model *m, const rw_mtp_item *items, int n_items, rw_threadpool *pool,
                               rw_error *err);
/* MTP positions held (0 without the block); cutting back to n <= that. */
int64_t rw_model_seq_mtp_length(const rw_model_seq *s);
rw_status rw_model_seq_mtp_rewind(rw_model_seq *s, int64_t n, rw_error *err);
/* The trunk's stored hidden row of position pos < length into out[n_embd]. */
rw_status rw_model_seq_mtp_hidden(const rw_model_seq *s, int64_t pos, float *out, rw_error *err);

/* ---- importance matrices (imatrix.c) ----
 * The statistics llama-imatrix collects (for each weight matrix of the
 * blocks, the sums of the squared activations per input column and the
 * rows counted), from every pass of m's sequences that the calling thread
 * runs between _begin and _end (one collector per thread at a time).
 * process_output: output.weight too. _save writes llama-imatrix's GGUF
 * layout (dataset: the calibration text's name, or NULL); an error when no
 * product was seen. */
typedef struct rw_model_imatrix rw_model_imatrix;
rw_status rw_model_imatrix_begin(const rw_model *m, bool process_output, rw_model_imatrix **out, rw_error *err);
size_t rw_model_imatrix_entries(const rw_model_imatrix *c);
rw_status rw_model_imatrix_save(const rw_model_imatrix *c, const char *path, const char *dataset, uint32_t chunk_count,
                                uint32_t chunk_size, rw_error *err);
void rw_model_imatrix_end(rw_model_imatrix *c); /* stops collecting and frees; no-op on NULL */

#endif
