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

#include "models/model.h"

#include "base/dtype.h"
#include "base/threadpool.h"
#include "kernels/matmul.h"

/* Weights of one dense transformer block; optional pieces are NULL / data NULL. */
typedef struct {
    const float *attn_norm;          /* [n_embd] */
    rw_matrix wq, wk, wv, wo;       /* q: n_embd -> n_head*hd_k; k: -> n_head_kv*hd_k; v: -> n_head_kv*hd_v; o: n_head*hd_v -> n_embd */
    const float *bq, *bk, *bv, *bo;  /* biases (qwen2; optional for llama) */
    const float *q_norm, *k_norm;    /* [hd_k] per-head RMS norm weights (qwen3) */
    const float *ffn_norm;           /* [n_embd] */
    rw_matrix ffn_gate, ffn_up;     /* n_embd -> n_ff */
    rw_matrix ffn_down;             /* n_ff -> n_embd */
} mdl_dense_layer;

/* Scratch of one forward pass: token-major rows, allocated for n_cap tokens. */
typedef struct {
    int64_t n_cap;
    float *x;    /* [n][n_embd] residual stream */
    float *xn;   /* [n][n_embd] normed input of a sublayer */
    float *q;    /* [n][n_head*hd_k] */
    float *k;    /* [n][n_head_kv*hd_k] */
    float *v;    /* [n][n_head_kv*hd_v] */
    float *att;  /* [n][n_head*hd_v] attention output before wo */
    float *tmp;  /* [n][n_embd] sublayer output */
    float *gate; /* [n][n_ff] */
    float *up;   /* [n][n_ff] */
    float *rope_cs; /* [n][n_rot] cos/sin pairs per token position */
    int64_t ctx_cap; /* positions the attention scratch holds per thread */
    int threads_cap; /* threads it holds scratch for */
    float *scores;  /* [threads_cap][ctx_cap] attention weights of one query head per thread */
} mdl_scratch;

/* One forward call as the layer functions see it. */
typedef struct {
    int64_t n;         /* tokens in this call */
    int64_t pos0;      /* position of the first one */
    rw_threadpool *pool;
} mdl_batch;

typedef struct mdl_arch mdl_arch;

struct rw_model {
    const rw_gguf *g;               /* borrowed, outlives the model */
    const mdl_arch *arch;
    rw_model_hparams hp;
    const rw_gguf_tensor *tok_embd; /* ne = {n_embd, n_vocab} */
    const float *output_norm;       /* [n_embd] */
    rw_matrix output;              /* n_embd -> n_vocab (token_embd when tied) */
    const float *rope_freqs;        /* [n_rot/2] divisors of the rotary frequencies, or NULL */
    mdl_dense_layer *layers;        /* [n_layer], owned */
    mdl_scratch sc;                 /* owned, grown on demand */
    void *ext;                      /* architecture-private data (hybrid layers), owned; freed by arch->free_ext */
};

struct rw_model_seq {
    const rw_model *m;
    rw_kv_cache *kv; /* owned */
    float *rec;      /* recurrent state of the hybrid layers (arch->rec_state_floats), owned, zero at start */
    size_t rec_floats;
};

/* An architecture: how to read it and how to run one layer. */
struct mdl_arch {
    const char *name;                /* general.architecture */
    rw_rope_kind rope_kind;
    bool qk_norm;                    /* attn_q_norm / attn_k_norm required */
    bool qkv_bias;                   /* attn_q/k/v biases required (else optional) */
    bool moe;                        /* FFN is a mixture of experts: no feed_forward_length needed */
    rw_status (*read_hparams)(const rw_gguf *g, const mdl_arch *arch, rw_model_hparams *hp, rw_error *err);
    rw_status (*bind)(rw_model *m, rw_error *err);
    rw_status (*layer)(rw_model *m, rw_model_seq *s, int il, const mdl_batch *b, rw_error *err);
    /* Hybrid architectures only (NULL otherwise): floats of recurrent state
     * one sequence carries, and the release of m->ext. */
    size_t (*rec_state_floats)(const rw_model *m);
    void (*free_ext)(rw_model *m);
};

/* registry.c; one descriptor per architecture file (llama.c, qwen2.c, ...). */
const mdl_arch *mdl_arch_find(const char *name);
extern const mdl_arch mdl_arch_llama, mdl_arch_qwen2, mdl_arch_qwen3, mdl_arch_qwen35, mdl_arch_qwen35moe,
    mdl_arch_qwen3next, mdl_arch_granitehybrid;

/* forward.c */
void mdl_scratch_free(mdl_scratch *sc);

/* hparams.c: the keys shared by the dense transformers. */
rw_status mdl_read_dense_hparams(const rw_gguf *g, const mdl_arch *arch, rw_model_hparams *hp, rw_error *err);

/* bind.c: tensor lookup with shape and type checks. A missing optional
 * tensor leaves the output NULL / data NULL and returns RW_OK. */
rw_status mdl_bind_matrix(const rw_model *m, const char *name, int64_t n_in, int64_t n_out, bool required,
                          rw_matrix *out, rw_error *err);
rw_status mdl_bind_vector(const rw_model *m, const char *name, int64_t n, bool required, const float **out,
                          rw_error *err);
/* Binds token_embd, output_norm, output (or ties it), rope_freqs. */
rw_status mdl_bind_common(rw_model *m, rw_error *err);
/* Binds layer il of a dense transformer (llama, qwen2, qwen3). */
rw_status mdl_bind_dense_layer(rw_model *m, int il, rw_error *err);
rw_status mdl_bind_dense(rw_model *m, rw_error *err);

/* dense.c: one llama/qwen2/qwen3 block, x += attn(norm(x)); x += ffn(norm(x)). */
rw_status mdl_dense_layer_forward(rw_model *m, rw_model_seq *s, int il, const mdl_batch *b, rw_error *err);

/* attn.c: the attention sublayer reading m->sc.xn, writing m->sc.tmp. */
rw_status mdl_attention(rw_model *m, rw_model_seq *s, int il, const mdl_dense_layer *L, const mdl_batch *b,
                        rw_error *err);

/* ffn.c: SwiGLU FFN reading m->sc.xn, writing m->sc.tmp. */
rw_status mdl_ffn_swiglu(rw_model *m, const mdl_dense_layer *L, const mdl_batch *b, rw_error *err);

/* y[r] = W x[r] for n rows (x stride n_in, y stride n_out), weights in
 * place (a weight matrix is a GGUF tensor with ne = {n_in, n_out}). */
static inline rw_status mdl_matmul(const rw_matrix *w, const float *x, int64_t n, float *y, rw_threadpool *pool,
                                   rw_error *err) {
    return rw_matmul(w, x, w->n_in, n, y, w->n_out, pool, err);
}

#endif
