/* ops_model.h - the dense transformer's per-token ops: RMS norm, RoPE,
 * SwiGLU, and the attention of one query head over a KV cache head.
 *
 * All follow llama.cpp's CPU backend formulas and rounding where that is
 * cheap to do, since the next matmul quantizes their outputs (see below).
 *
 * Attention:
 *   s_j   = scale * dot(q, K[j])                 j < n_pos
 *   p_j   = exp(s_j - max s) / sum_j exp(...)    (sum in double, as ggml)
 *   out_i = dot(p, Vt[i])                        i < hd_v
 *
 * K is n_pos rows of hd_k elements (contiguous), Vt is V transposed: hd_v
 * rows of n_pos elements, row i at Vt + i * v_stride (the KV cache layout,
 * cache/kv.h). Both f32, or both f16 (raw IEEE half bits). This is the
 * causal attention of a query at position n_pos-1: the caller passes the
 * positions it may see.
 *
 * The AVX-512 version computes the f32 case in the order of llama.cpp's CPU
 * backend without flash attention (ggml_vec_dot_f32 with four 16-lane
 * accumulators over 64-element steps and a pairwise reduction, softmax sums
 * per 16 lanes added in double, its vector expf), so that with an F32 cache
 * the attention output rounds as llama.cpp's: this matters because the next
 * matmul quantizes it, and one value rounded the other way moves the logits
 * visibly on quantized models.
 *
 * Batch invariance: the result for one query depends only on q, K, V and
 * n_pos, never on which other queries are computed with it, so a model that
 * calls this per (token, head) gets the same bits in prefill and decode.
 * Tiers: rw_attn_head_ref is the specification (plain C, the AVX-512
 * version's arithmetic written out lane by lane); rw_attn_head dispatches
 * to the AVX-512 or AVX2 version by the kernel tier (kernels/matmul.h),
 * each of which gives the reference's bits (tests/kernels/test_ops_model.c).
 */
#ifndef RW_KERNELS_OPS_MODEL_H
#define RW_KERNELS_OPS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

/* One KV head's keys and values split into pages of page_len positions (the
 * paged KV cache, cache/kv.h): position j lives in page j / page_len, row
 * r = j % page_len; its key at k_pages[p] + k_off + r*hd_k, value dimension
 * i at v_pages[p] + v_off + i*v_stride + r (offsets in elements). page_len
 * is a multiple of 64, so the 64-position blocks of the value sums never
 * straddle a page: every sum sees the same operations in the same order as
 * over one contiguous buffer, and the result is bitwise that of rw_attn_head
 * on the same values laid out contiguously. A single page (page_len >=
 * n_pos) may have any length: that is the contiguous case. */
typedef struct {
    const void *const *k_pages, *const *v_pages;
    int64_t page_len, k_off, v_off, v_stride;
    /* Sliding window: positions below first are masked out (0 = none). The
     * result is bitwise that of attention over 0..n_pos-1 with the scores of
     * those positions at -inf (weight exactly 0): the kernels start at the
     * 64-position block holding first and give its earlier positions weight
     * 0, so the sums keep the block structure of the unmasked case and the
     * cost is that of the window, not of n_pos. */
    int64_t first;
    /* Attention sinks (gpt-oss): NULL, or one extra logit per query head
     * that joins the softmax's max and denominator but has no value, so the
     * weights sum to less than 1 (ggml's soft_max with sinks: the max
     * includes it, expf(sink - max) is added after the numerators' sum).
     * The head computed by rw_attn_head_paged reads sinks[0]; head h of an
     * AVX-512 group (ops_int.h) reads sinks[h]. Not scaled, not masked. */
    const float *sinks;
} rw_attn_pages;

/* scores: n_pos floats of scratch. out: hd_v floats. */
void rw_attn_head_paged_ref(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                            float scale, float *scores, float *out);
void rw_attn_head_paged(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                        float scale, float *scores, float *out);
/* The contiguous case: K [n_pos][hd_k] at k, Vt rows at vt + i*v_stride. */
void rw_attn_head_ref(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos,
                      int hd_k, int hd_v, float scale, float *scores, float *out);
void rw_attn_head(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos, int hd_k,
                  int hd_v, float scale, float *scores, float *out);

/* y = x / sqrt(mean(x^2) + eps) * w over n values (y may be x). The sum of
 * squares is taken in double and the mean rounded to float before eps is
 * added, as ggml_rms_norm does. */
void rw_rmsnorm(const float *x, const float *w, int n, float eps, float *y);

/* RoPE. rw_rope_cache fills cs[2i], cs[2i+1] = cos, sin of the angle of pair
 * i < n_rot/2 at position pos: theta_i = freq_scale * pos * base^(-2i/n_rot)
 * / freq_factors[i] (factors optional), the powers formed as a running
 * float product like ggml's rope cache. rw_rope rotates the pairs of one
 * head in place: (2i, 2i+1) for normal RoPE, (i, i + n_rot/2) for NEOX;
 * elements past n_rot are left alone. */
void rw_rope_cache(float pos, int n_rot, float base, float freq_scale, const float *freq_factors, float *cs);
/* The YaRN cache, as ggml's rope_yarn: pair i's angle mixes the interpolated
 * freq_scale * theta_i and the extrapolated theta_i by ramp(i) * ext_factor,
 * ramp 1 below corr[0] falling linearly to 0 at corr[1]; cos and sin times
 * attn_factor * (1 + 0.1 ln(1 / freq_scale)). With ext_factor 0 it is
 * rw_rope_cache times attn_factor. */
void rw_rope_cache_yarn(float pos, int n_rot, float base, float freq_scale, float ext_factor, const float corr[2],
                        float attn_factor, float *cs);
void rw_rope(float *x, int n_rot, bool neox, const float *cs);

/* SwiGLU in place: g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)).
 * The AVX-512 version evaluates exp with the same vector algorithm as
 * ggml's CPU backend (values differ from libm's expf by about 1 ulp). */
void rw_swiglu_ref(float *g, const float *u, int64_t n);
void rw_swiglu(float *g, const float *u, int64_t n);

#endif
