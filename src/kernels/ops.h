/* ops.h - every kernel the models need besides matmul: norms, RoPE variants,
 * activations, softmax, causal GQA attention over a KV cache, the causal
 * depthwise conv1d with carried state, the gated delta rule (Qwen3.5 /
 * Qwen3-Next DeltaNet), the Mamba2 SSD scan, MoE routing, and f16 rows.
 *
 * The dense-transformer ops that came first (rw_rmsnorm, rw_rope_cache,
 * rw_rope, rw_swiglu, rw_attn_head) live in kernels/ops_model.h, which this
 * header includes, so a model needs only this one.
 *
 * Conventions
 *   - Raw f32 pointers with explicit sizes and strides (in elements). No
 *     kernel allocates; scratch, where needed, is passed in and its size is
 *     stated. Sizes are trusted: the caller (a model, which has validated its
 *     hyperparameters) passes consistent ones.
 *   - Formulas and rounding follow llama.cpp's CPU backend (ggml) where that
 *     is cheap, since the goldens come from it; each function says where it
 *     differs. Plain C is compiled with -std=c17, i.e. without FMA
 *     contraction, so "a * b + c" rounds twice as written.
 *   - Tiers: a function named *_ref is the specification in plain C. The
 *     unsuffixed name dispatches on rw_kernel_tier_current() (kernels/
 *     matmul.h): the AVX-512 tier uses 16-lane versions that follow ggml's
 *     vector code (its expf, its dot-product order), the AVX2 tier 8-lane
 *     versions that compute the same bits, and the *_ref specification
 *     writes that arithmetic out lane by lane (ops_int.h's rw_exp_ggml,
 *     rw_reduce16_ref): every tier gives the reference's bits
 *     (tests/kernels/test_ops*.c check it). Kernels without a *_ref twin
 *     have one implementation.
 *   - Batch invariance: every kernel computes a token's result with the same
 *     operations in the same order whatever else is in the call (how many
 *     tokens, which heads), so prefill, decode and replay agree bit for bit.
 *     Recurrences process tokens strictly one after another: n calls of one
 *     token give the same state and outputs as one call of n tokens.
 */
#ifndef RW_KERNELS_OPS_H
#define RW_KERNELS_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "kernels/ops_model.h"
#include "kernels/quant.h"

/* ==== Norms ============================================================ */

/* Grouped RMS norm: n_groups consecutive groups of gs values, each
 * normalised on its own (as rw_rmsnorm: sum of squares in double, mean
 * rounded to float, 1/sqrtf(mean + eps)), then times a weight:
 *   y[g*gs + i] = x[g*gs + i] * scale_g * w[g*w_stride + i]
 * w_stride 0 shares one weight vector of gs values between the groups (q/k
 * norm per head); w_stride gs gives every element its own weight (granite's
 * grouped ssm_norm). y may equal x. The groups' sums of squares are taken
 * eight at a time, interleaved (each group's adds in order: the same bits as
 * one at a time), so rows of a batch are best normed in one call. */
void rw_rmsnorm_groups(const float *x, const float *w, int64_t w_stride, int n_groups, int gs, float eps, float *y);

/* L2 norm: y = x / max(sqrt(sum x^2), eps) over n values, the sum in double
 * and the root and max in float (ggml_l2_norm). y may equal x. */
void rw_l2norm(const float *x, int n, float eps, float *y);
/* rw_l2norm of n_rows rows of n values, row r at x + r * stride (and y + r *
 * stride), each row's bits as rw_l2norm's (the rows' sums interleaved). */
void rw_l2norm_rows(const float *x, int64_t stride, int64_t n_rows, int n, float eps, float *y);

/* Gated RMS norm of DeltaNet outputs, per group of gs values:
 *   y = (x * scale_g) * w[i] * silu(z)      (w shared by the groups)
 * i.e. rmsnorm(x)*w then times silu(z), rounded in that order (qwen35.cpp
 * build_norm_gated). silu as rw_silu. y may equal x (not z). */
void rw_rmsnorm_gated_ref(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y);
void rw_rmsnorm_gated(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y);

/* ==== Activations and softmax ========================================== */

/* silu(x) = x / (1 + exp(-x)) over n values, in place allowed (y == x).
 * exp is ggml's vector expf for the first 16 * floor(n / 16) values, libm
 * expf for the rest (the AVX-512 tier's 16-lane blocks and tail; as
 * rw_swiglu), in every tier. */
void rw_silu_ref(const float *x, float *y, int64_t n);
void rw_silu(const float *x, float *y, int64_t n);

/* GEGLU in place: g[i] = gelu(g[i]) * u[i] with the tanh GELU
 * 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) as llama.cpp's CPU backend
 * computes it (ggml_vec_geglu_f32 with GGML_GELU_FP16): x <= -10 gives 0,
 * x >= 10 gives x, else x is rounded to a half and looked up in a table of
 * the GELU of every half, rounded to a half (about 1e-3 relative error,
 * which is what llama.cpp's goldens carry). The AVX-512 tier converts with
 * F16C and gathers from the same table: the reference's bits (the AVX2 and
 * NEON tiers run the reference). */
void rw_geglu_ref(float *g, const float *u, int64_t n);
void rw_geglu(float *g, const float *u, int64_t n);

/* Squared ReLU in place (Nemotron-H's MLP): x[i] = r * r with r = x[i] > 0 ?
 * x[i] : 0 (NaN and -0 give 0), as ggml_relu then ggml_sqr: one product,
 * the same bits in every tier. */
void rw_relu_sq_ref(float *x, int64_t n);
void rw_relu_sq(float *x, int64_t n);

/* swiglu-oai (gpt-oss) in place, as llama.cpp's CPU backend: x = min(g,
 * limit), y = clamp(u, -limit, limit), g = x / (1 + expf(alpha * -x)) *
 * (y + 1), libm expf; one plain-C implementation for every tier. */
void rw_swiglu_oai(float *g, const float *u, int64_t n, float alpha, float limit);

/* sigmoid(x) = 1 / (1 + expf(-x)), libm expf as ggml's scalar loop. */
void rw_sigmoid(const float *x, float *y, int64_t n);

/* softplus(x) = x > 20 ? x : logf(1 + expf(x)), exactly ggml's formula
 * (log of 1 + e^x, not log1p). */
float rw_softplus1(float x);
void rw_softplus(const float *x, float *y, int64_t n);

/* Softmax over n values: m = max x, e_i = exp(x_i - m), sum of e_i in
 * double, y_i = e_i * (float)(1 / sum) (ggml_soft_max with scale 1 and no
 * mask). Every tier uses ggml's vector expf for each full 16-lane block
 * (the block's e_i summed in float by _mm512_reduce_add_ps's tree before
 * the double sum) and libm expf for the tail, as ggml_vec_soft_max_f32.
 * y may equal x. */
void rw_softmax_ref(const float *x, float *y, int64_t n);
void rw_softmax(const float *x, float *y, int64_t n);

/* ==== RoPE ============================================================== */

/* Multi-section RoPE cache (ggml's mrope/IMROPE cache): like rw_rope_cache,
 * but pair i takes its angle from one of four position streams pos[0..3]
 * (t, h, w, extra), each advanced by the same running float product
 * theta *= base^(-2/n_rot). With sect = i % (s0+s1+s2+s3):
 *   interleaved (IMROPE, Qwen3.5): h if sect%3==1 && sect<3*s1,
 *                                  w if sect%3==2 && sect<3*s2,
 *                                  t if sect%3==0 && sect<3*s0, else extra;
 *   contiguous (MROPE):            t below s0, h below s0+s1, w below
 *                                  s0+s1+s2, else extra.
 * Text tokens use pos = {p, p, p, 0}: with sections that cover every pair
 * (Qwen3.5's [11,11,10,0] for n_rot 64) this equals rw_rope_cache at p bit
 * for bit. Apply with rw_rope(x, n_rot, true, cs) (NEOX pairing).
 * freq_factors may be NULL; cs holds n_rot floats. */
void rw_rope_cache_multi(const float pos[4], const int sections[4], bool interleaved, int n_rot, float base,
                         float freq_scale, const float *freq_factors, float *cs);

/* ==== Attention ========================================================= */

/* The KV cache of one layer of one sequence, as cache/kv.h stores it: pages
 * of page_len positions; in page p, K head g, row r at k_pages[p] +
 * g*k_head_stride + r*hd_k, V transposed, value dimension i of head g at
 * v_pages[p] + g*v_head_stride + i*v_stride + r. page_len is a multiple of 64
 * (see rw_attn_pages in ops_model.h), or at least every position (one page:
 * a contiguous cache). Elements are f32 or, with f16, raw IEEE halves
 * (converted exactly to f32: unlike llama.cpp without flash attention, q
 * and the probabilities are not rounded to f16 on that path). */
typedef struct {
    const void *const *k_pages, *const *v_pages;
    int64_t page_len;      /* positions per page */
    int64_t k_head_stride; /* elements between KV heads of K within a page */
    int64_t v_head_stride; /* elements between KV heads of Vt within a page */
    int64_t v_stride;      /* elements between value dimensions within a page */
    bool f16;
    /* > 0: sliding-window attention, the query at position p sees only
     * positions p-window+1..p (rw_attn_pages.first); 0: all of 0..p */
    int64_t window;
    /* NULL, or one sink logit per query head ([n_head]; rw_attn_pages.sinks) */
    const float *sinks;
} rw_attn_kv;

/* Causal GQA attention of n_q new tokens at positions pos0..pos0+n_q-1 of one
 * sequence over a cache holding at least pos0+n_q positions. Query t, head h
 * (q + t*q_stride + h*hd_k) attends to positions 0..pos0+t (with kv->window,
 * only the last kv->window of them) of KV head
 * h / (n_head/n_head_kv) (scores scaled by `scale`, usually 1/sqrt(hd_k);
 * granite passes its own); the result goes to out + t*out_stride + h*hd_v.
 * Every head's result is bitwise what rw_attn_head gives for it. One task per
 * (token, KV head) on pool (NULL = this thread), each computed
 * independently, so any n_q, any split and any thread count give the same
 * bits. scratch: rw_attn_scratch_floats(rw_threadpool_size(pool), n_head,
 * n_head_kv, pos0 + n_q) floats. */
int64_t rw_attn_scratch_floats(int n_threads, int n_head, int n_head_kv, int64_t n_ctx);
void rw_attn_causal(const rw_attn_kv *kv, const float *q, int64_t q_stride, int64_t pos0, int64_t n_q, int n_head,
                    int n_head_kv, int hd_k, int hd_v, float scale, float *out, int64_t out_stride, float *scratch,
                    rw_threadpool *pool);

/* ==== Causal depthwise conv1d with carried state ======================== */

/* n_t tokens through a depthwise causal conv of kernel K over C channels.
 * x: token t's C inputs at x + t*x_stride. w: C rows of K taps (w[c*K + k],
 * k = K-1 multiplies the current token: ggml's ssm_conv1d {K, C}). state:
 * C rows of K-1 previous inputs, oldest first (state[c*(K-1) + j], the layout
 * of llama.cpp's conv state; zeros at sequence start), updated in place.
 *   y[c] = sum_{k<K} w[c][k] * window_c[k]    (float, k ascending, as ggml)
 *          + bias[c] if bias (granite's conv bias; NULL for none)
 *   then silu(y) if silu.
 * Output t at y + t*y_stride (C values; may alias x only if y_stride ==
 * x_stride and y == x). */
void rw_conv1d_causal(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w, const float *bias,
                      float *state, bool silu, float *y, int64_t y_stride);
/* The same with each tap added by one fma (sum = fma(w, x, sum)), as
 * llama.cpp's CPU build computes Mamba2's conv (checked on the nemotron_h
 * Q8_0 fixture, whose logits move in 8 rows with the unfused taps); its
 * DeltaNet conv (qwen35, qwen3next goldens) is the unfused one. */
void rw_conv1d_causal_fused(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w,
                            const float *bias, float *state, bool silu, float *y, int64_t y_stride);
/* Either of the two (fused or not) with the channels spread over pool in
 * runs of whole 16-channel units, the last run holding the row's tail, so
 * that each channel's taps and the SiLU's vector and tail parts are those of
 * one call: the same bits. */
void rw_conv1d_causal_pool(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w,
                           const float *bias, float *state, bool silu, bool fused, float *y, int64_t y_stride,
                           rw_threadpool *pool);

/* ==== Gated delta rule (DeltaNet) ======================================= */

/* One value head of the gated delta rule over n_t tokens (specs/qwen35.md
 * §4.4; llama.cpp's fused GATED_DELTA_NET op). S is the head's dk x dv state,
 * stored transposed as llama.cpp does: S[i][j] at S[j*dk + i] (i key index,
 * j value index; dk == dv in every model but the kernel does not need it).
 * Per token t (q_t at q + t*q_stride, likewise k, v; scalars g[t*g_stride],
 * beta[t*beta_stride]; q and k already L2-normalised, q NOT scaled):
 *   S      *= expf(g)                         (g is the log-decay, <= 0)
 *   d[j]    = (v[j] - sum_i S[i][j] k[i]) * beta
 *   S[i][j] = fma(k[i], d[j], S[i][j])
 *   o[j]    = (sum_i S[i][j] q[i]) * scale    (scale = 1/sqrt(dv) in ggml)
 * each sum in ggml_vec_dot_f32's AVX-512 order: element i by fma onto lane
 * i % 64 up to the last multiple of 64, the lanes reduced (rw_reduce64_ref),
 * then the rest fused on one by one.
 * o_t at o + t*o_stride (dv values). scratch: dv floats. */
void rw_delta_rule_head_ref(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                            int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                            const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                            float *scratch);
void rw_delta_rule_head(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                        const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                        float *scratch);

/* All nv value heads of a layer, one task per head on pool (NULL = serial).
 * Token t's inputs: q heads at q + t*qk_stride + kh*dk (likewise k), v at
 * v + t*v_stride + h*dv, g[t*nv + h], beta[t*nv + h]; output o + t*o_stride +
 * h*dv. Value head h uses key head h % nk when tiled (qwen35, qwen35moe: GGUF
 * tiled order) or h / (nv/nk) otherwise (qwen3next). states: nv heads of
 * dk*dv floats, head h at states + h*dk*dv. scratch: n_threads * dv floats. */
void rw_delta_rule(float *states, int nv, int nk, bool tiled, int dk, int dv, int64_t n_t, const float *q,
                   const float *k, int64_t qk_stride, const float *v, int64_t v_stride, const float *g,
                   const float *beta, float scale, float *o, int64_t o_stride, float *scratch, rw_threadpool *pool);

/* ==== Mamba2 (SSD) scan ================================================= */

/* One head of the Mamba2 selective scan over n_t tokens, as llama.cpp's
 * ssm_scan (scalar A per head). state: hd rows of ds values (state[i*ds + s],
 * llama.cpp's {d_state, head_dim, n_head} layout), updated in place. Token t:
 * x at x + t*x_stride (hd values), raw dt scalar dt[t*dt_stride], B and C at
 * B + t*bc_stride, C + t*bc_stride (ds values of this head's group).
 *   dtp    = softplus(dt + dt_bias)                (rw_softplus1; float add)
 *   dA     = expf(dtp * A)
 *   for i: xdt = x[i] * dtp
 *          state[i][s] = state[i][s]*dA + B[s]*xdt
 *          y[i] = sum_s state[i][s] * C[s]       (float: fma onto lane s % 64 up
 *                 to the last multiple of 64, rw_reduce64_ref, the rest added)
 *          y[i] = y[i] + x[i]*D                  (skip term; D = 0 for none)
 * y_t at y + t*y_stride. */
void rw_ssm_scan_head_ref(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                          const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B, const float *C,
                          int64_t bc_stride, float D, float *y, int64_t y_stride);
void rw_ssm_scan_head(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride, const float *dt,
                      int64_t dt_stride, float dt_bias, float A, const float *B, const float *C, int64_t bc_stride,
                      float D, float *y, int64_t y_stride);

/* All n_head heads of a Mamba2 layer, one task per head on pool. Token t:
 * x + t*x_stride + h*hd, dt[t*dt_stride + h], B + t*bc_stride + g*ds,
 * C + t*bc_stride + g*ds with group g = h / (n_head/n_group), y + t*y_stride +
 * h*hd. dt_bias, A, D: n_head values each (dt_bias or D may be NULL = 0).
 * states: head h at states + h*hd*ds. */
void rw_ssm_scan(float *states, int n_head, int n_group, int hd, int ds, int64_t n_t, const float *x,
                 int64_t x_stride, const float *dt, int64_t dt_stride, const float *dt_bias, const float *A,
                 const float *B, const float *C, int64_t bc_stride, const float *D, float *y, int64_t y_stride,
                 rw_threadpool *pool);

/* ==== MoE routing ======================================================= */

/* Routes one token: p = softmax(logits over n_expert) (rw_softmax), picks the
 * k largest p (ties go to the lower expert index; ids in decreasing p), and
 * writes weights w_j = p[ids_j], divided by max(sum_j p[ids_j],
 * 6.103515625e-5) when normalize (the sum in double, as ggml_sum_rows; the
 * Qwen MoE rule), then times scale (1 for none). probs: n_expert floats of
 * scratch (holds p afterwards). 1 <= k <= n_expert. */
/* Routes one token as gpt-oss does: the k largest logits (ties to the lower
 * index, ids in decreasing order), weights = rw_softmax over those k logits
 * only (llama.cpp's softmax-weight gating). 1 <= k <= n_expert. */
void rw_moe_route_topk_softmax(const float *logits, int n_expert, int k, int32_t *ids, float *weights);

void rw_moe_route(const float *logits, int n_expert, int k, bool normalize, float scale, int32_t *ids,
                  float *weights, float *probs);

/* ==== f16 rows (KV cache) =============================================== */

/* n values between f32 and IEEE half, round to nearest even (rw_f32_to_f16,
 * exact inverse rw_f16_to_f32); dst_stride / src_stride in elements (1 for
 * contiguous rows; the capacity for a transposed V column). The AVX-512
 * tier uses F16C for stride 1, bit-identical except that NaN payloads are
 * kept instead of becoming 0x7e00. */
void rw_f32_to_f16_row(const float *src, rw_f16 *dst, int64_t dst_stride, int64_t n);
void rw_f16_to_f32_row(const rw_f16 *src, int64_t src_stride, float *dst, int64_t n);

#endif
