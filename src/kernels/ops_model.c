/* ops_model.c - reference attention of one query head (ops_model.h), and
 * the tier dispatch. */
#include "kernels/ops_model.h"

#include <math.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/ops_int.h"
#include "kernels/quant.h"

void rw_swiglu_avx512(float *g, const float *u, int64_t n);
void rw_swiglu_avx2(float *g, const float *u, int64_t n);
void rw_attn_head_avx2(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                       float scale, float *scores, float *out);
void rw_attn_head_avx512(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                         float scale, float *scores, float *out);

static float elem(const void *base, bool f16, int64_t i) {
    return f16 ? rw_f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* Element i of page p past offset off (elements). */
static float pelem(const void *const *pages, int64_t p, bool f16, int64_t off, int64_t i) {
    return elem(pages[p], f16, off + i);
}

/* rw_dot_ggml (simd_avx512_int.h) of n elements of x (f32 or f16) and y:
 * element i onto lane i % 64 by fma up to the last multiple of 64,
 * rw_reduce64_ref, then the rest fused onto the float sum (f32) or added in
 * double (f16). */
static float dot_ggml_ref(const void *x, bool f16, const float *y, int64_t n) {
    float a[64] = {0};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i++) a[i % 64] = fmaf(elem(x, f16, i), y[i], a[i % 64]);
    const float red = rw_reduce64_ref(a);
    if (!f16) {
        float sum = red;
        for (int64_t i = np; i < n; i++) sum = fmaf(elem(x, f16, i), y[i], sum);
        return sum;
    }
    double sum = (double)red;
    for (int64_t i = np; i < n; i++) sum += (double)(elem(x, f16, i) * y[i]);
    return (float)sum;
}

/* The specification of every tier (the AVX-512 twin's arithmetic): scores
 * dot_ggml_ref(K row j, q) * scale; softmax numerators with ggml's vector
 * expf in 16-element blocks (zeros past n_pos), each block summed by
 * rw_reduce16_ref, the blocks in double, times (float)(1 / sum); output i
 * the dot of V row i with the weights over n_pos rounded up to 64 (element
 * j onto lane j % 64 by fma, rw_reduce64_ref). Pages hold a multiple of 64
 * positions (or there is one), so lanes run on across them. */
void rw_attn_head_paged_ref(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                            float scale, float *scores, float *out) {
    const int64_t P = kv->page_len;
    /* a sliding window (kv->first > 0): keys from the 64-block b0 holding
     * `first`, those before `first` with weight exactly 0 (as the AVX-512
     * twin; blocks before b0 are not read) */
    const int64_t first = kv->first > 0 ? kv->first : 0, b0 = first & ~(int64_t)63;
    const size_t esz = f16 ? 2 : 4;
    for (int64_t j = b0; j < n_pos; j++) {
        const void *kj = (const char *)kv->k_pages[j / P] + (size_t)(kv->k_off + (j % P) * hd_k) * esz;
        scores[j] = dot_ggml_ref(kj, f16, q, hd_k) * scale;
    }
    float mx = -INFINITY;
    for (int64_t j = first; j < n_pos; j++)
        if (scores[j] > mx) mx = scores[j];
    if (kv->sinks && kv->sinks[0] > mx) mx = kv->sinks[0];
    double sum = 0.0;
    for (int64_t j = b0; j < n_pos; j += 16) {
        float e[16];
        for (int l = 0; l < 16; l++) {
            e[l] = j + l < n_pos && j + l >= first ? rw_exp_ggml(scores[j + l] - mx) : 0.0f;
            if (j + l < n_pos) scores[j + l] = e[l];
        }
        sum += (double)rw_reduce16_ref(e);
    }
    if (kv->sinks) sum += (double)expf(kv->sinks[0] - mx); /* the sink's share of the denominator, after the sum */
    const float inv = (float)(1.0 / sum);
    for (int64_t j = b0; j < n_pos; j++) scores[j] *= inv;
    for (int i = 0; i < hd_v; i++) {
        float a[64] = {0};
        for (int64_t j = b0; j < n_pos; j++)
            a[j % 64] = fmaf(pelem(kv->v_pages, j / P, f16, kv->v_off, i * kv->v_stride + j % P), scores[j], a[j % 64]);
        out[i] = rw_reduce64_ref(a);
    }
}

void rw_attn_head_paged(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                        float scale, float *scores, float *out) {
#if defined(__x86_64__)
    if (rw_kernel_tier_is_avx512(rw_kernel_tier_current())) {
        rw_attn_head_avx512(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
        return;
    }
    if (rw_kernel_tier_current() == RW_TIER_AVX2) {
        rw_attn_head_avx2(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
        return;
    }
#endif
    if (rw_ops_use_neon() && !kv->sinks) /* sinks (gpt-oss): the reference, same bits */
        rw_attn_head_neon(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
    else rw_attn_head_paged_ref(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
}

/* The contiguous buffers as one page. */
static rw_attn_pages one_page(const void *const *k, const void *const *vt, int64_t n_pos, int64_t v_stride) {
    return (rw_attn_pages){.k_pages = k, .v_pages = vt, .page_len = n_pos > 0 ? n_pos : 1, .v_stride = v_stride};
}

void rw_attn_head_ref(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos,
                      int hd_k, int hd_v, float scale, float *scores, float *out) {
    const rw_attn_pages kv = one_page(&k, &vt, n_pos, v_stride);
    rw_attn_head_paged_ref(q, &kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
}

void rw_attn_head(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos, int hd_k,
                  int hd_v, float scale, float *scores, float *out) {
    const rw_attn_pages kv = one_page(&k, &vt, n_pos, v_stride);
    rw_attn_head_paged(q, &kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
}

void rw_swiglu_ref(float *g, const float *u, int64_t n) {
    const int64_t nv = n & ~(int64_t)15; /* the AVX-512 twin's 16-lane part: ggml's vector expf */
    for (int64_t i = 0; i < n; i++) g[i] = i < nv ? rw_silu_ggml(g[i]) * u[i] : g[i] / (1.0f + expf(-g[i])) * u[i];
}

void rw_swiglu(float *g, const float *u, int64_t n) {
#if defined(__x86_64__)
    if (rw_kernel_tier_is_avx512(rw_kernel_tier_current())) {
        rw_swiglu_avx512(g, u, n);
        return;
    }
    if (rw_kernel_tier_current() == RW_TIER_AVX2) {
        rw_swiglu_avx2(g, u, n);
        return;
    }
#endif
    if (rw_ops_use_neon()) rw_swiglu_neon(g, u, n);
    else rw_swiglu_ref(g, u, n);
}

/* y = x / sqrt(mean(x^2) + eps) * w; the sum of squares in double, as ggml. */
void rw_rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    rw_rmsnorm_groups(x, w, 0, 1, n, eps, y);
}

/* cos/sin of every rotated pair at position pos: theta_i = pos * base^(-2i/n_rot)
 * computed as a running float product (as ggml's rope cache), divided by the
 * pair's frequency factor, times freq_scale. */
void rw_rope_cache(float pos, int n_rot, float base, float freq_scale, const float *freq_factors, float *cs) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = pos;
    for (int i = 0; i < n_rot / 2; i++) {
        const float ff = freq_factors ? freq_factors[i] : 1.0f;
        const float t = freq_scale * (theta / ff);
        cs[2 * i] = cosf(t);
        cs[2 * i + 1] = sinf(t);
        theta *= theta_scale;
    }
}

void rw_rope_cache_yarn(float pos, int n_rot, float base, float freq_scale, float ext_factor, const float corr[2],
                        float attn_factor, float *cs) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float mscale = attn_factor;
    if (ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    const float span = corr[1] - corr[0] > 0.001f ? corr[1] - corr[0] : 0.001f;
    float theta = pos;
    for (int i = 0; i < n_rot / 2; i++) {
        const float interp = freq_scale * theta;
        float t = interp;
        if (ext_factor != 0.0f) {
            const float y = ((float)i - corr[0]) / span;
            const float ramp = (1 - (1 < (0 > y ? 0 : y) ? 1 : (0 > y ? 0 : y))) * ext_factor;
            t = interp * (1 - ramp) + theta * ramp;
        }
        cs[2 * i] = cosf(t) * mscale;
        cs[2 * i + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

void rw_rope(float *x, int n_rot, bool neox, const float *cs) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[a], x1 = x[b];
        /* The first product of each line is fused into the add, as the
         * compiler contracts ggml's rope (C++, FMA enabled): with it the F32
         * logits come 20% closer to llama.cpp's and fewer quantized
         * activations round the other way. */
        x[a] = fmaf(x0, c, -(x1 * s));
        x[b] = fmaf(x0, s, x1 * c);
    }
}

