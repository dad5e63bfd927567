/* mamba2_state.c - the "mamba2" recurrent state (granitehybrid's Mamba2
 * layers): the recurrence run from logged inputs.
 *
 * Logged per token: xBC before the conv (C floats) and the raw dt (heads).
 * Running a token: xBC = silu(conv(xBC) + bias) (the fused conv, as
 * llama.cpp's Mamba2 computes it); split into x (heads *
 * head_dim), B, C (groups * d_state each); the SSD scan (kernels/ops.h
 * rw_ssm_scan) gives y [heads*head_dim] (with the D skip, before the z gate
 * and the norm, which the model applies). */
#include "cache/cache_int.h"
#include "kernels/ops.h"

static int64_t mb_scratch(const rw_rec_params *p, int64_t n, int n_threads) {
    (void)n_threads;
    return n * p->conv_channels;
}

static void mb_run(const rw_rec_params *p, float *conv, float *mat, int64_t n, const float *in, int64_t in_stride,
                   float *out, int64_t out_stride, float *scratch, rw_threadpool *pool) {
    const int64_t C = p->conv_channels, DI = (int64_t)p->heads * p->head_dim, GS = (int64_t)p->groups * p->d_state;
    float *y = scratch;
    rw_conv1d_causal_pool(in, in_stride, n, (int)C, p->conv_kernel, p->conv_w, p->conv_b, conv, true, true, y, C, pool);
    rw_ssm_scan(mat, p->heads, p->groups, p->head_dim, p->d_state, n, y, C, in + C, in_stride, p->dt_bias, p->a,
                y + DI, y + DI + GS, C, p->d, out, out_stride, pool);
}

static const rec_kind mamba2_kind = {.name = "mamba2", .scratch_floats = mb_scratch, .run = mb_run};

rw_status rw_mamba2_state_new(const rw_rec_params *p, rw_layer_state **out, rw_error *err) {
    if (!p || p->heads <= 0 || p->groups <= 0 || p->heads % p->groups || p->head_dim <= 0 || p->d_state <= 0 ||
        p->conv_kernel < 1 || p->conv_channels != p->heads * p->head_dim + 2 * p->groups * p->d_state || !p->conv_w ||
        !p->a)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "mamba2 state: inconsistent shape");
    rw_rec_params q = *p;
    q.mat_floats = (int64_t)p->heads * p->head_dim * p->d_state;
    q.log_floats = p->conv_channels + (int64_t)p->heads;
    q.out_floats = (int64_t)p->heads * p->head_dim;
    return rw_cache__rec_state_new(&mamba2_kind, &q, out, err);
}
