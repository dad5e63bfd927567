/* ops_conv.c - causal depthwise conv1d with carried state (ops.h).
 *
 * Token by token: the window of channel c is its K-1 stored inputs (oldest
 * first) followed by the new input; the taps are summed in float from the
 * oldest, as ggml_ssm_conv does over its concatenated [state | inputs]
 * buffer, so calling once per token or once per run gives the same bits.
 * The fused form adds each product with one fma (rw_conv1d_causal_fused). */
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

/* Kernel 4 (every model here), with the tap count known to the compiler so
 * it vectorises across channels; the same operations in the same order. */
static void conv_k4(const float *xt, int C, const float *w, const float *bias, bool fused, float *state, float *yt) {
    for (int c = 0; c < C; c++) {
        float *st = state + (int64_t)c * 3;
        const float *wc = w + (int64_t)c * 4;
        const float xc = xt[c], s0 = st[0], s1 = st[1], s2 = st[2];
        float sum = 0.0f;
        if (fused) {
            sum = fmaf(s0, wc[0], sum);
            sum = fmaf(s1, wc[1], sum);
            sum = fmaf(s2, wc[2], sum);
            sum = fmaf(xc, wc[3], sum);
        } else {
            sum += s0 * wc[0];
            sum += s1 * wc[1];
            sum += s2 * wc[2];
            sum += xc * wc[3];
        }
        st[0] = s1, st[1] = s2, st[2] = xc;
        yt[c] = bias ? sum + bias[c] : sum;
    }
}

static void conv(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w, const float *bias,
                 bool fused, float *state, bool silu, float *y, int64_t y_stride) {
    const int ns = K - 1;
#if defined(__x86_64__)
    /* AVX-512 and AVX2: channels 16 or 8 at a time through all the tokens first */
    const int run = K != 4                ? 0
                    : rw_ops_use_avx512() ? rw_conv_k4_avx512(x, x_stride, n_t, C, w, bias, fused, state, y, y_stride)
                    : rw_ops_use_avx2()   ? rw_conv_k4_avx2(x, x_stride, n_t, C, w, bias, fused, state, y, y_stride)
                                          : 0;
#else
    const int run = 0;
#endif
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride;
        float *yt = y + t * y_stride;
        if (K == 4) {
            conv_k4(xt + run, C - run, w + (int64_t)run * 4, bias ? bias + run : NULL, fused, state + (int64_t)run * 3,
                    yt + run);
            if (silu) rw_silu(yt, yt, C);
            continue;
        }
        for (int c = 0; c < C; c++) {
            float *st = state + (int64_t)c * ns;
            const float *wc = w + (int64_t)c * K;
            const float xc = xt[c]; /* read before yt[c] is written (y may be x) */
            float sum = 0.0f;
            for (int k = 0; k < ns; k++) sum = fused ? fmaf(st[k], wc[k], sum) : sum + st[k] * wc[k];
            sum = fused ? fmaf(xc, wc[ns], sum) : sum + xc * wc[ns];
            for (int k = 0; k + 1 < ns; k++) st[k] = st[k + 1];
            if (ns > 0) st[ns - 1] = xc;
            yt[c] = bias ? sum + bias[c] : sum;
        }
        if (silu) rw_silu(yt, yt, C);
    }
}

void rw_conv1d_causal(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w, const float *bias,
                      float *state, bool silu, float *y, int64_t y_stride) {
    conv(x, x_stride, n_t, C, K, w, bias, false, state, silu, y, y_stride);
}

void rw_conv1d_causal_fused(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w,
                            const float *bias, float *state, bool silu, float *y, int64_t y_stride) {
    conv(x, x_stride, n_t, C, K, w, bias, true, state, silu, y, y_stride);
}

typedef struct {
    const float *x, *w, *bias;
    int64_t x_stride, n_t, y_stride;
    int C, K;
    float *state, *y;
    bool silu, fused;
} conv_job;

static void conv_units(void *ctx, int64_t u0, int64_t u1) {
    const conv_job *j = ctx;
    const int c0 = (int)u0 * 16, c1 = u1 * 16 < j->C ? (int)u1 * 16 : j->C;
    conv(j->x + c0, j->x_stride, j->n_t, c1 - c0, j->K, j->w + (int64_t)c0 * j->K, j->bias ? j->bias + c0 : NULL,
         j->fused, j->state + (int64_t)c0 * (j->K - 1), j->silu, j->y + c0, j->y_stride);
}

void rw_conv1d_causal_pool(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w,
                           const float *bias, float *state, bool silu, bool fused, float *y, int64_t y_stride,
                           rw_threadpool *pool) {
    const conv_job j = {x, w, bias, x_stride, n_t, y_stride, C, K, state, y, silu, fused};
    /* from 64 tokens (a prefill); fewer stay on the calling thread */
    const int64_t min_units = n_t >= 64 ? 2 : INT32_MAX;
    rw_threadpool_rows(pool, (C + 15) / 16, min_units, conv_units, (void *)&j);
}
