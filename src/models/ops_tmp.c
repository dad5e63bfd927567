/* ops_tmp.c - TEMPORARY plain loops for the model's elementwise ops, until
 * the shared kernels (kernels/ops.h) land; then this file goes away.
 * The formulas follow llama.cpp's CPU ops (see the comments). */
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "models/ops_tmp.h"

/* y = x / sqrt(mean(x^2) + eps) * w; the sum of squares in double, as ggml. */
void mdl_tmp_rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n); /* rounded to float before eps is added, as ggml */
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* cos/sin of every rotated pair at position pos: theta_i = pos * base^(-2i/n_rot)
 * computed as a running float product (as ggml's rope cache), divided by the
 * pair's frequency factor, times freq_scale. */
void mdl_tmp_rope_cache(float pos, int n_rot, float base, float freq_scale, const float *freq_factors, float *cs) {
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

void mdl_tmp_rope(float *x, int n_rot, bool neox, const float *cs) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

