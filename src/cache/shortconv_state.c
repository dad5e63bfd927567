/* shortconv_state.c - the "shortconv" recurrent state (lfm2's gated short
 * convolution layers): a causal depthwise conv without bias or activation,
 * whose only state is the conv window. The model computes v = B * u before
 * and C * conv(v) after; this state sees only v.
 *
 * Logged per token: v (C floats). Running a token: out = conv(v) [C] (the
 * window of each channel is its Kc-1 stored v values, oldest first, then
 * the new one; kernels/ops.h rw_conv1d_causal). No matrix state: mat_floats
 * is 0, so a checkpoint is just the (Kc-1) x C window. */
#include "cache/cache_int.h"
#include "kernels/ops.h"

static int64_t sc_scratch(const rw_rec_params *p, int64_t n, int n_threads) {
    (void)p, (void)n, (void)n_threads;
    return 1; /* none needed; one float so that the shared code's malloc never sees 0 */
}

static void sc_run(const rw_rec_params *p, float *conv, float *mat, int64_t n, const float *in, int64_t in_stride,
                   float *out, int64_t out_stride, float *scratch, rw_threadpool *pool) {
    (void)mat, (void)scratch, (void)pool;
    rw_conv1d_causal(in, in_stride, n, p->conv_channels, p->conv_kernel, p->conv_w, NULL, conv, false, out,
                     out_stride);
}

static const rec_kind shortconv_kind = {.name = "shortconv", .scratch_floats = sc_scratch, .run = sc_run};

rw_status rw_shortconv_state_new(const rw_rec_params *p, rw_layer_state **out, rw_error *err) {
    if (!p || p->conv_channels <= 0 || p->conv_kernel < 2 || p->conv_kernel > 64 || !p->conv_w || p->conv_b)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "shortconv state: inconsistent shape");
    rw_rec_params q = *p;
    q.mat_floats = 0;
    q.log_floats = p->conv_channels;
    q.out_floats = p->conv_channels;
    return rw_cache__rec_state_new(&shortconv_kind, &q, out, err);
}
