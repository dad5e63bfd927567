/* ops_model.c - reference attention of one query head (ops_model.h), and
 * the tier dispatch. */
#include "kernels/ops_model.h"

#include <math.h>
#include <string.h>

#include "kernels/matmul.h"
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

void rw_attn_head_paged_ref(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                            float scale, float *scores, float *out) {
    const int64_t P = kv->page_len;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_pos; j++) {
        float s = 0.0f;
        for (int i = 0; i < hd_k; i++) s += q[i] * pelem(kv->k_pages, j / P, f16, kv->k_off, (j % P) * hd_k + i);
        scores[j] = s * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_pos; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += (double)scores[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n_pos; j++) scores[j] *= inv;
    for (int i = 0; i < hd_v; i++) {
        float o = 0.0f;
        for (int64_t j = 0; j < n_pos; j++)
            o += scores[j] * pelem(kv->v_pages, j / P, f16, kv->v_off, i * kv->v_stride + j % P);
        out[i] = o;
    }
}

void rw_attn_head_paged(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                        float scale, float *scores, float *out) {
    if (rw_kernel_tier_current() >= RW_TIER_AVX512)
        rw_attn_head_avx512(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
    else if (rw_kernel_tier_current() == RW_TIER_AVX2)
        rw_attn_head_avx2(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
    else
        rw_attn_head_paged_ref(q, kv, f16, n_pos, hd_k, hd_v, scale, scores, out);
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
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void rw_swiglu(float *g, const float *u, int64_t n) {
    if (rw_kernel_tier_current() >= RW_TIER_AVX512) rw_swiglu_avx512(g, u, n);
    else if (rw_kernel_tier_current() == RW_TIER_AVX2) rw_swiglu_avx2(g, u, n);
    else rw_swiglu_ref(g, u, n);
}

/* y = x / sqrt(mean(x^2) + eps) * w; the sum of squares in double, as ggml. */
void rw_rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n); /* rounded to float before eps is added, as ggml */
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
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

