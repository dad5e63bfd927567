/* ops_conv.c - causal depthwise conv1d with carried state (ops.h).
 *
 * Token by token: the window of channel c is its K-1 stored inputs (oldest
 * first) followed by the new input; the taps are summed in float from the
 * oldest, as ggml_ssm_conv does over its concatenated [state | inputs]
 * buffer, so calling once per token or once per run gives the same bits. */
#include "kernels/ops.h"

void rw_conv1d_causal(const float *x, int64_t x_stride, int64_t n_t, int C, int K, const float *w, const float *bias,
                      float *state, bool silu, float *y, int64_t y_stride) {
    const int ns = K - 1;
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride;
        float *yt = y + t * y_stride;
        for (int c = 0; c < C; c++) {
            float *st = state + (int64_t)c * ns;
            const float *wc = w + (int64_t)c * K;
            const float xc = xt[c]; /* read before yt[c] is written (y may be x) */
            float sum = 0.0f;
            for (int k = 0; k < ns; k++) sum += st[k] * wc[k];
            sum += xc * wc[ns];
            for (int k = 0; k + 1 < ns; k++) st[k] = st[k + 1];
            if (ns > 0) st[ns - 1] = xc;
            yt[c] = bias ? sum + bias[c] : sum;
        }
        if (silu) rw_silu(yt, yt, C);
    }
}
