/* ops_model.h - attention of one query head over a KV cache head.
 *
 *   s_j   = scale * dot(q, K[j])                 j < n_pos, in increasing j
 *   p_j   = exp(s_j - max s) / sum_j exp(...)    (sum in double, as ggml)
 *   out   = sum_j p_j V[j]
 *
 * K is n_pos rows of hd_k elements, V n_pos rows of hd_v elements, both f32
 * or both f16 (raw IEEE half bits), rows contiguous. This is the causal
 * attention of a query at position n_pos-1: the caller passes the positions
 * it may see.
 *
 * Batch invariance: the result for one query depends only on q, K, V and
 * n_pos, never on which other queries are computed with it, so a model that
 * calls this per (token, head) gets the same bits in prefill and decode.
 * Tiers: rw_attn_head_ref is the specification (plain C); rw_attn_head
 * dispatches to the AVX-512 version when the kernel tier (kernels/matmul.h)
 * is avx512, which differs from the reference only by float rounding
 * (tests/kernels/test_ops_model.c states the tolerance).
 */
#ifndef RW_KERNELS_OPS_MODEL_H
#define RW_KERNELS_OPS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

/* scores: n_pos floats of scratch. out: hd_v floats. */
void rw_attn_head_ref(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                      float scale, float *scores, float *out);
void rw_attn_head(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                  float scale, float *scores, float *out);

#endif
