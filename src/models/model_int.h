/* model_int.h - private to src/models: the model object, the architecture
 * table and the shared blocks (attention, FFN) the layer functions use.
 *
 * Data flow of one forward pass over n tokens (forward.c):
 *
 *   x[n][n_embd]  = token_embd rows                        (embed)
 *   for il:         arch->layer(m, s, il, batch)          (x updated in place)
 *   logits        = output · rmsnorm(x) * output_norm      (head)
 *
 * Batch invariance: every per-token computation (norms, RoPE, matmul rows,
 * the attention of one query over positions 0..p in increasing order) is done
 * the same way whether the token comes alone or with others, so a token's
 * logits are bitwise the same for any split of a sequence into calls, as long
 * as the matmul kernel is batch-invariant (kernels/matmul.h guarantees it).
 */
#ifndef RW_MODELS_MODEL_INT_H
#define RW_MODELS_MODEL_INT_H

#include <stdatomic.h>

#include "models/model.h"

#include "base/dtype.h"
#include "base/threadpool.h"
#include "cache/state.h"
#include "kernels/matmul.h"

/* Weights of one dense transformer block; optional pieces are NULL / data NULL. */
typedef struct {
    const float *attn_norm; /* [n_embd] */
    rw_matrix wq, wk, wv,
        wo; /* q: n_embd -> n_head*hd_k; k: -> n_head_kv*hd_k; v: -> n_head_kv*hd_v; o: n_head*hd_v -> n_embd */
    const float *bq, *bk, *bv, *bo; /* biases (qwen2; optional for llama) */
    const float *q_norm, *k_norm;   /* [hd_k] per-head RMS norm weights (qwen3) */
    const float *attn_sinks;        /* [n_head] per-head softmax sink logits (gpt-oss), or NULL */
    const float *ffn_norm;          /* [n_embd] */
    rw_matrix ffn_gate, ffn_up;     /* n_embd -> n_ff */
    rw_matrix ffn_down;             /* n_ff -> n_embd */
} rw_models__dense_layer;

/* Scratch of one forward pass: token-major rows, allocated for n_cap tokens.
 * x, xn and tmp live across sublayers. A sublayer's own buffers (attention's
 * q/k/v/att, the FFN's gate/up, an architecture's mixer buffers) live only
 * inside it, so they share one block, work: each sublayer carves its
 * buffers from the block's start, [n_cap][dim] each, and none may assume
 * anything survives into the next sublayer. This keeps the activations of a
 * 512-token chunk at the largest sublayer's need instead of the sum. */
typedef struct {
    int64_t n_cap;
    float *x;        /* [n][n_embd] residual stream */
    float *xn;       /* [n][n_embd] normed input of a sublayer */
    float *tmp;      /* [n][n_embd] sublayer output */
    float *work;     /* [n_cap][work_floats] owned; q, k, v, att, gate, up point into it */
    float *q;        /* [n][n_head*hd_k]   work at 0 */
    float *k;        /* [n][n_head_kv*hd_k] after q */
    float *v;        /* [n][n_head_kv*hd_v] after k */
    float *att;      /* [n][n_head*hd_v] attention output before wo, after v */
    float *gate;     /* [n][n_ff]          work at 0 (the FFN's) */
    float *up;       /* [n][n_ff]          after gate */
    float *rope_cs;  /* [n][n_rot] cos/sin pairs per token position */
    int64_t ctx_cap; /* positions the attention scratch holds per thread */
    int threads_cap; /* threads it holds scratch for */
    float *scores;   /* [threads_cap][ctx_cap] attention weights of one query head per thread */
    float *logits;   /* [logits_rows][n_vocab] the output head's rows bound for scattered destinations
                     * (forward.c): kept between passes, as fresh memory every decode step costs page faults */
    int64_t logits_rows;
} rw_models__scratch;

/* One sequence's rows in a pass: rows row0..row0+n-1 of the activations
 * are its tokens at positions pos0..pos0+n-1. */
typedef struct {
    rw_model_seq *s;
    int64_t row0, n, pos0;
} rw_models__seg;

/* One forward pass as the layer functions see it: a ragged batch. Per-token
 * work (matmuls, norms) runs over all n rows at once; what reads a
 * sequence's state (attention, recurrences) runs per segment. */
typedef struct {
    int64_t n; /* rows: the tokens of every segment */
    int n_seg;
    const rw_models__seg *seg; /* in row order, covering rows 0..n-1 */
    rw_threadpool *pool;
} rw_models__batch;

typedef struct rw_models__arch rw_models__arch;

struct rw_model {
    const rw_gguf *g; /* borrowed, outlives the model */
    const rw_models__arch *arch;
    rw_model_hparams hp;
    const rw_gguf_tensor *tok_embd; /* ne = {n_embd, n_vocab} */
    const float *output_norm;       /* [n_embd] */
    rw_matrix output;               /* n_embd -> n_vocab (token_embd when tied) */
    const float *rope_freqs;        /* [n_rot/2] divisors of the rotary frequencies, or NULL */
    rw_models__dense_layer *layers; /* [n_layer], owned */
    rw_models__scratch sc;          /* owned, grown on demand */
    /* floats per token the architecture's own sublayers carve from sc.work
     * (set by its bind; 0 when it only runs the dense attention and FFN) */
    int64_t arch_work_floats;
    void *ext; /* architecture-private data (hybrid layers), owned; freed by arch->free_ext */
    /* every weight matrix bound (pointers into layers / ext / output); the
     * array is owned, freed by rw_model_free. Weights are never copied: the
     * kernels read them from the GGUF mapping, and the panel form packs the
     * panel it works on into per-thread scratch (kernels/matmul.c), so a
     * model holds each weight once. */
    rw_matrix **mats;
    const char **mat_names; /* [n_mats]: each one's tensor name (in the GGUF's memory), NULL for the tied output */
    int n_mats, cap_mats;
    /* The exception: matrices and expert tensors whose stored panels take
     * exactly their bytes (rw_matmul_panels_replace_rows) are kept as
     * panels, packed at load (panels.c), their file pages given back; the
     * array and each panels buffer owned, freed by rw_model_free. */
    struct rw_models__xpanels {
        rw_matrix w;      /* the rows they replace (a 3-D expert tensor as one matrix) */
        size_t bytes;     /* of those rows */
        rw_matrix *owner; /* the bound matrix that points to them, or NULL (experts) */
        void *panels;     /* NULL until packed, or where packing failed */
    } * xpanels;
    int n_xpanels, cap_xpanels;
    /* LoRA adapters (lora.c), in the order added, owned; and the hash of
     * their tensors and scales for the fingerprint ({0, 0} without one) */
    struct rw_models__lora *loras;
    uint64_t lora_fp[2];
    /* The MTP (multi-token prediction) block, if the file has one and the
     * architecture runs it (arch->mtp_block): mtp_avail. With mtp_on (set by
     * rw_model_enable_mtp before any sequence exists) every sequence holds
     * two more states after its n_layer layers (mtp.c):
     *   layer[n_layer]     the block's attention KV, at MTP positions
     *                      0..M-1 with M <= len (it lags; catches up when
     *                      drafting);
     *   layer[n_layer + 1] the trunk's post-output_norm hidden row of every
     *                      position 0..len-1 (f32, key half and value half
     *                      of one "kv" head), the block's second input. */
    bool mtp_avail, mtp_on;
    /* sequences of the model alive (rw_model_enable_mtp refuses to change
     * their number of states under them); any thread may free one */
    atomic_int n_seqs;
    /* what the public API opened with the model (src/api: file, tokenizer,
     * template); NULL for rw_model_load. Owned by rw_model_close, which
     * frees it after rw_model_free. */
    void *api;
};

/* Most tokens one forward chunk computes at once (llama.cpp's n_ubatch). */
#define MDL_UBATCH 512

/* The sliding window of layer il's attention (hp.n_swa) or 0 for a layer
 * that sees every position: the layers il % P < P-1 of P = swa_pattern
 * slide (P = 0: all), as llama.cpp's set_swa_pattern. */
static inline int64_t rw_models__layer_window(const rw_model *m, int il) {
    const rw_model_hparams *hp = &m->hp;
    if (hp->n_swa <= 0 || il >= hp->n_layer) return 0;
    const int P = hp->swa_pattern;
    return P == 0 || il % P < P - 1 ? hp->n_swa : 0;
}

/* States a sequence of m holds: n_layer, + 2 with the MTP block on. */
static inline int rw_models__n_states(const rw_model *m) { return m->hp.n_layer + (m->mtp_on ? 2 : 0); }
/* The MTP block's KV state index (-1 without), and the hidden rows'. */
static inline int rw_models__mtp_kv_index(const rw_model *m) { return m->mtp_on ? m->hp.n_layer : -1; }
static inline int rw_models__mtp_h_index(const rw_model *m) { return m->mtp_on ? m->hp.n_layer + 1 : -1; }

/* A sequence: its token ids and one state per layer (cache/state.h). The
 * retention plan of the pass in progress (cuts, log_from) is computed by
 * seq.c before the layers run and read by the recurrent layers. */
struct rw_model_seq {
    rw_model *m; /* forward passes need the model's scratch; see model.h */
    rw_kv_type kv_type;
    int64_t max_ctx;
    rw_layer_state **layer; /* [n_layer], owned */
    int32_t *tokens;        /* [tok_cap], ids of positions 0..len-1, owned */
    int64_t len, tok_cap;
    size_t ckpt_budget; /* bytes of recurrent checkpoints kept (retention.c) */
    bool no_ckpt;       /* rw_model_seq_set_rewindable(s, false): no checkpoints, no replay log */
    int64_t plan_until; /* rw_model_seq_plan_until: the length passes are planned for while below it */
    int64_t *marks;     /* positions to keep a checkpoint at, ascending, owned */
    int n_marks, cap_marks;
    int64_t cuts[64]; /* checkpoint positions of the current pass, ascending */
    int n_cuts;
    int64_t log_from; /* recurrence inputs logged from here on in the current pass */
};

/* seq.c: the plan of a pass appending n tokens, and the retention after it. */
void rw_models__seq_plan_pass(rw_model_seq *s, int64_t n);
void rw_models__seq_retain(rw_model_seq *s);
/* Copies n tokens to positions len..len+n-1 of s's token array (the length
 * moves only when the pass succeeds). */
rw_status rw_models__seq_push_tokens(rw_model_seq *s, const int32_t *t, int64_t n, rw_error *err);
/* Every layer back to the restore point p <= n they all reach by themselves
 * (layers may be longer after a failed pass): s->len = *restored = p, and
 * tokens p..n-1 wait past the length for the caller to recompute (seq.c;
 * forward.c's rewind does, so the sequence code never runs the model). */
rw_status rw_models__seq_restore(rw_model_seq *s, int64_t n, rw_threadpool *pool, int64_t *restored, rw_error *err);
/* seq_file.c helpers: fresh layers for s's model and settings; adoption of
 * loaded layers and tokens (takes ownership). */
rw_status rw_models__seq_new_layers(const rw_model_seq *s, rw_layer_state ***out, rw_error *err);
void rw_models__seq_free_layers(const rw_model_seq *s, rw_layer_state **L);
void rw_models__seq_adopt(rw_model_seq *s, rw_layer_state **L, int32_t *tokens, int64_t n);

/* An architecture: how to read it and how to run one layer. */
struct rw_models__arch {
    const char *name; /* general.architecture */
    rw_rope_kind rope_kind;
    bool qk_norm;            /* attn_q_norm / attn_k_norm required */
    bool qkv_bias;           /* attn_q/k/v biases required (else optional) */
    bool moe;                /* FFN is a mixture of experts: no feed_forward_length needed */
    const char *output_norm; /* the final norm's tensor; NULL = output_norm.weight (lfm2 differs) */
    rw_status (*read_hparams)(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err);
    rw_status (*bind)(rw_model *m, rw_error *err);
    rw_status (*layer)(rw_model *m, int il, const rw_models__batch *b, rw_error *err);
    /* A new empty state of layer il for a sequence; NULL = a KV state for
     * every layer (the dense transformers). */
    rw_status (*new_layer_state)(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx, rw_layer_state **out,
                                 rw_error *err);
    void (*free_ext)(rw_model *m); /* release of m->ext (NULL if none) */
    /* The MTP block over the rows of b (NULL if the architecture has none):
     * row r is token tokens[r] at MTP position seg.pos0 + (r - seg.row0)
     * with trunk hidden h[r] (stride n_embd), its attention KV in
     * seg.s->layer[n_layer]; writes the block's post-norm output rows to
     * h_out (stride n_embd) and points *head at the output matrix. */
    rw_status (*mtp_block)(rw_model *m, const int32_t *tokens, const float *h, const rw_models__batch *b, float *h_out,
                           const rw_matrix **head, rw_error *err);
};

/* registry.c; one descriptor per architecture file (llama.c, qwen2.c, ...). */
const rw_models__arch *rw_models__arch_find(const char *name);
extern const rw_models__arch rw_models__arch_llama, rw_models__arch_qwen2, rw_models__arch_qwen3,
    rw_models__arch_qwen35, rw_models__arch_qwen35moe, rw_models__arch_qwen3next, rw_models__arch_granitehybrid,
    rw_models__arch_lfm2, rw_models__arch_nemotron_h;
extern const rw_models__arch rw_models__arch_gemma3, rw_models__arch_gpt_oss;

/* forward.c */
void rw_models__scratch_free(rw_models__scratch *sc);
/* Floats per token of the dense attention buffers (q, k, v, att) that start
 * sc.work; an architecture's own attention buffers go after them. */
int64_t rw_models__attn_work_floats(const rw_model_hparams *hp);
/* RW_OK when sc.work holds n rows for a sublayer (who, for the message) to
 * carve its buffers from. */
rw_status rw_models__work_ready(const rw_model *m, int64_t n, const char *who, rw_error *err);
/* Grows the pass scratch to n rows, attention over n_ctx positions. */
rw_status rw_models__scratch_reserve(rw_model *m, int64_t n, int64_t n_ctx, int n_threads, rw_error *err);
/* RoPE tables of every row of b at its segment's positions. */
void rw_models__rope_rows(rw_model *m, const rw_models__batch *b);

/* mtp.c: the trunk's post-norm hidden rows of a pass (rows of b, stride
 * n_embd) into each segment's hidden-row state (no-op with the MTP off). */
rw_status rw_models__mtp_store_hidden(rw_model *m, const rw_models__batch *b, const float *h, rw_error *err);
/* Where a rewind of every state to n leaves state il (n, or the lagging
 * MTP KV's own length if shorter). */
int64_t rw_models__state_target(const rw_model_seq *s, int il, int64_t n);

/* hparams.c: the keys shared by the dense transformers. */
rw_status rw_models__read_dense_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp,
                                        rw_error *err);
/* hparams.c: "<arch>.<name>" of every layer into out[n_layer]: an array of
 * exactly n_layer non-negative integers, or one value for all layers (the
 * hybrids' per-layer feed_forward_length, attention.head_count_kv). A
 * missing key is an error if required, else fills def. */
rw_status rw_models__per_layer_u32(const rw_gguf *g, const char *arch, const char *name, int n_layer, bool required,
                                   uint32_t def, uint32_t *out, rw_error *err);

/* bind.c: tensor lookup with shape and type checks. A missing optional
 * tensor leaves the output NULL / data NULL and returns RW_OK. */
rw_status rw_models__bind_matrix(rw_model *m, const char *name, int64_t n_in, int64_t n_out, bool required,
                                 rw_matrix *out, rw_error *err);
/* Notes a bound matrix in m->mats under its tensor's name, NULL when it has
 * none that adapters could name (rw_models__bind_matrix does it). */
rw_status rw_models__note_matrix(rw_model *m, rw_matrix *w, const char *name, rw_error *err);
/* lora.c: whether an adapter's file was truncated while mapped; frees the
 * adapters (rw_model_free). */
bool rw_models__loras_faulted(const rw_model *m);
void rw_models__loras_free(rw_model *m);
rw_status rw_models__bind_vector(const rw_model *m, const char *name, int64_t n, bool required, const float **out,
                                 rw_error *err);
/* Binds token_embd, output_norm (arch->output_norm's name), output (or ties it), rope_freqs. */
rw_status rw_models__bind_common(rw_model *m, rw_error *err);
/* Binds layer il of a dense transformer (llama, qwen2, qwen3). */
rw_status rw_models__bind_dense_layer(rw_model *m, int il, rw_error *err);
rw_status rw_models__bind_dense(rw_model *m, rw_error *err);

/* dense.c: one llama/qwen2/qwen3 block, x += attn(norm(x)); x += ffn(norm(x)). */
rw_status rw_models__dense_layer_forward(rw_model *m, int il, const rw_models__batch *b, rw_error *err);
/* dense.c: the two steps around every block's sublayers, shared by the
 * dense, qwen35 and granite blocks: m->sc.xn = rmsnorm(m->sc.x) * w and
 * m->sc.x += m->sc.tmp, over the batch's b->n rows, by rows over its pool.
 * (granite scales the residual first: its own add_scaled.) */
void rw_models__norm_rows(const rw_model *m, const float *w, const rw_models__batch *b);
void rw_models__add_residual(rw_model *m, const rw_models__batch *b);

/* attn.c: the attention sublayer reading m->sc.xn, writing m->sc.tmp. */
rw_status rw_models__attention(rw_model *m, int il, const rw_models__dense_layer *L, const rw_models__batch *b,
                               rw_error *err);

/* attn.c: stores rows k, v (strides dk, dv) of every segment in its
 * sequence's KV state of layer il, then causal attention of the rows of q
 * (stride dq) over it into att (stride n_head*hd_v), per segment; in a
 * sliding layer (rw_models__layer_window) each query sees only its window, counted
 * from its own position in its own sequence. */
rw_status rw_models__attend(rw_model *m, int il, const rw_models__batch *b, const float *q, int64_t dq, const float *k,
                            int64_t dk, const float *v, int64_t dv, float scale, float *att, rw_error *err);

/* attn.c: the attention sublayer without positional encoding (granitehybrid,
 * nemotron_h): q, k, v (+ biases, q/k norms if bound), causal GQA at the given scale,
 * Wo (+bo); reads m->sc.xn, writes m->sc.tmp. */
rw_status rw_models__attention_nopos(rw_model *m, int il, const rw_models__dense_layer *L, const rw_models__batch *b,
                                     float scale, rw_error *err);

/* mamba2.c: the Mamba2 mixer (granitehybrid, nemotron_h). Its sizes come
 * from the "<arch>.ssm.*" keys; one layer's weights are bound from
 * blk.<il>.ssm_*. */
typedef struct {
    int kc, ds, groups, heads, d_inner, hd; /* conv kernel, d_state, groups, heads, d_inner, head_dim */
    int64_t conv_ch, in_w;                  /* conv channels (d_inner + 2*groups*ds), ssm_in rows */
} rw_models__mamba2_shape;

typedef struct {
    rw_models__mamba2_shape dims;
    rw_matrix in, out;
    const float *conv_w, *conv_b; /* [C][Kc], [C] */
    const float *dt_bias, *a, *d; /* [heads] */
    const float *norm;            /* [groups][d_inner/groups] */
    rw_rec_params params;         /* the layer's recurrence, for its per-sequence states */
} rw_models__mamba2_layer;

rw_status rw_models__mamba2_dims(const rw_gguf *g, const char *arch, rw_models__mamba2_shape *d, rw_error *err);
/* Floats per token the mixer carves from m->sc.work (the bind sets
 * m->arch_work_floats to at least this). */
int64_t rw_models__mamba2_work_floats(const rw_models__mamba2_shape *d);
rw_status rw_models__mamba2_bind(rw_model *m, int il, const rw_models__mamba2_shape *d, rw_models__mamba2_layer *M,
                                 rw_error *err);
/* The mixer of layer il over the rows of b: reads m->sc.xn, writes m->sc.tmp;
 * the layer's state in every segment's sequence is a "mamba2" state made
 * from M->params. */
rw_status rw_models__mamba2(rw_model *m, int il, const rw_models__mamba2_layer *M, const rw_models__batch *b,
                            rw_error *err);

/* recurrent.c: rw_rec_state_append of layer il for every segment of bt, on
 * the segment's rows of in (stride in_stride) into its rows of out (stride
 * out_stride); short segments (decode, verify) run in parallel, one per
 * task. Stops at the first error (a failed segment's state is unchanged;
 * with parallel segments, others may have advanced). */
rw_status rw_models__rec_append(const rw_models__batch *bt, int il, const float *in, int64_t in_stride, float *out,
                                int64_t out_stride, rw_error *err);

/* experts.c: a mixture-of-experts FFN (qwen35moe, qwen3next, granitehybrid):
 *   route: softmax(router b), top-k (ties to the lower index), weights
 *   renormalised (rw_moe_route); y = sum_j w_j down_e(silu(gate_e b) * up_e b)
 *   in selection order; out = y + g * shared(b), g = sigmoid(sh_router b)
 *   where the model gates its shared expert, else 1.
 * The batch's slots go through each expert together (one grouped product
 * per projection: an expert's weights are read once per call, not once per
 * token that chose it); each slot's row is bitwise the one-row product
 * (kernels/matmul.h), and the sums run per token in selection order, so a
 * token's result never depends on the others in its batch. */
typedef struct {
    int n_expert, n_used, ff_exp, ff_shexp;                /* ff_shexp 0: no shared expert */
    rw_matrix router;                                      /* ffn_gate_inp: E -> n_expert */
    const rw_gguf_tensor *gate_exps, *up_exps, *down_exps; /* {E, Fe, Ne}, {E, Fe, Ne}, {Fe, E, Ne} */
    rw_matrix sh_gate, sh_up, sh_down;                     /* the shared expert */
    rw_matrix sh_router;                                   /* ffn_gate_inp_shexp: E -> 1, F32 (data NULL: ungated) */
} rw_models__moe;

/* panels.c: asks for w (bytes of rows at w->data, in m's GGUF; owner, or
 * NULL: the bound matrix to point to them) in stored panels that m keeps
 * in place of the rows, where they take the same bytes and the setting
 * (rw_set_stored_panels) allows; a tensor asked for twice is packed once. */
void rw_models__want_panels(rw_model *m, const rw_matrix *w, size_t bytes, rw_matrix *owner);
/* Packs what was asked for (and every bound matrix but the tied output
 * under "all"), on every core, giving the rows' pages back (rw_model_load,
 * after the architecture's bind). */
void rw_models__store_panels(rw_model *m);
/* The stored panels of the rows at data, or NULL. */
const void *rw_models__panels_of(const rw_model *m, const void *data);

/* Binds layer il's experts (M's sizes set by the caller); gated: the shared
 * expert has its ffn_gate_inp_shexp vector. */
rw_status rw_models__bind_moe(rw_model *m, int il, bool gated, rw_models__moe *M, rw_error *err);

/* Floats per token the MoE FFN takes from m->sc.work (an architecture's
 * bind raises m->arch_work_floats to at least this). */
int64_t rw_models__moe_work_floats(const rw_models__moe *M, int64_t n_embd);

/* The MoE FFN: m->sc.xn -> m->sc.tmp. */
rw_status rw_models__moe_ffn(rw_model *m, const rw_models__moe *M, const rw_models__batch *bt, rw_error *err);
/* experts.c: the experts of one 3-D tensor {n_in, n_out, n_expert} over the
 * n_slots slots of a pass (slot s = t*k + j: token t's j-th choice, expert
 * sel[s]) as one grouped product, a group per expert, the outputs in expert
 * order: row p of y is slot rows[p] (rows' first n_slots entries after the
 * call), which reads row rows[p] / k of x when x_by_token, else row p (x
 * in the same order); each row bitwise a one-row product's. t2 (or NULL):
 * a second tensor of the same rows into y2 in the same call (up beside
 * gate), its expert's rows converted once for both. rows (2 * n_slots)
 * and groups (2 * n_expert) are the caller's scratch. Shared by the MoE
 * FFN and gpt-oss's experts; rw_models__experts_positions inverts the
 * order (pos[slot] = its row). */
rw_status rw_models__experts_matmul(const rw_model *m, const rw_gguf_tensor *t, const rw_gguf_tensor *t2, int n_expert,
                                    const int32_t *sel, int64_t n_slots, int k, bool x_by_token, const float *x,
                                    int64_t x_stride, float *y, float *y2, int64_t y_stride, int32_t *rows,
                                    rw_matmul_group *groups, rw_threadpool *pool, rw_error *err);
void rw_models__experts_positions(const int32_t *order, int64_t n_slots, int32_t *pos);
/* out = sum over j < k of row rows[j] of y (rows of n) times ws[j], per
 * element the first product and then each next one added in j's order: how
 * the experts' weighted outputs are summed per token. */
void rw_models__weighted_sum(float *restrict out, const float *y, const int32_t *rows, const float *ws, int k,
                             int64_t n);

/* ffn.c: SwiGLU FFN reading m->sc.xn, writing m->sc.tmp. */
rw_status rw_models__ffn_swiglu(rw_model *m, const rw_models__dense_layer *L, const rw_models__batch *b, rw_error *err);

/* y[r] = W x[r] for n rows (x stride n_in, y stride n_out), weights in
 * place (a weight matrix is a GGUF tensor with ne = {n_in, n_out}). */
static inline rw_status rw_models__matmul(const rw_matrix *w, const float *x, int64_t n, float *y, rw_threadpool *pool,
                                          rw_error *err) {
    return rw_matmul(w, x, w->n_in, n, y, w->n_out, pool, err);
}

#endif
