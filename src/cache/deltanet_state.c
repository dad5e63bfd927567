/* deltanet_state.c - the "deltanet" recurrent state (Gated DeltaNet layers of
 * qwen35, qwen35moe, qwen3next): the recurrence run from logged inputs.
 *
 * Logged per token: u = [q | k | v] before the conv (C floats), the
 * log-decay g and beta after their activations (nv each). Running a token:
 *   y = silu(conv(u)) ; q_k, k_k = l2norm per key head ; delta rule per value
 *   head (kernels/ops.h rw_delta_rule) ; out = o [nv*dv].
 * These are the calls the model's forward made before this state existed, in
 * the same order, so outputs are unchanged bit for bit. */
#include <string.h>

#include "cache/cache_int.h"
#include "kernels/ops.h"

#include <math.h>

static int64_t dn_scratch(const rw_rec_params *p, int64_t n, int n_threads) {
    /* conv output [n][C], g and beta [n][nv] each, delta-rule scratch */
    return n * p->conv_channels + 2 * n * p->nv + (int64_t)n_threads * p->dv;
}

/* Tokens [t0, t1) of the recurrence inputs: q and k l2-normed in place in
 * the conv output, g and beta gathered from the logged rows. */
typedef struct {
    const rw_rec_params *p;
    float *y, *g, *beta;
    const float *in;
    int64_t in_stride;
} dn_inputs_job;

static void dn_inputs_rows(void *ctx, int64_t t0, int64_t t1) {
    const dn_inputs_job *j = ctx;
    const rw_rec_params *p = j->p;
    const int64_t C = p->conv_channels;
    for (int64_t t = t0; t < t1; t++) {
        float *yt = j->y + t * C;
        /* the q heads then the k heads: 2 nk rows of dk, one after the other */
        rw_l2norm_rows(yt, p->dk, 2 * p->nk, p->dk, p->eps, yt);
        memcpy(j->g + t * p->nv, j->in + t * j->in_stride + C, (size_t)p->nv * sizeof(float));
        memcpy(j->beta + t * p->nv, j->in + t * j->in_stride + C + p->nv, (size_t)p->nv * sizeof(float));
    }
}

static void dn_run(const rw_rec_params *p, float *conv, float *mat, int64_t n, const float *in, int64_t in_stride,
                   float *out, int64_t out_stride, float *scratch, rw_threadpool *pool) {
    const int64_t C = p->conv_channels, KD = (int64_t)p->nk * p->dk;
    float *y = scratch, *g = y + n * C, *beta = g + n * p->nv, *dscr = beta + n * p->nv;
    rw_conv1d_causal_pool(in, in_stride, n, (int)C, p->conv_kernel, p->conv_w, p->conv_b, conv, true, false, y, C,
                          pool);
    dn_inputs_job ij = {p, y, g, beta, in, in_stride};
    rw_threadpool_rows(pool, n, 16, dn_inputs_rows, &ij);
    rw_delta_rule(mat, p->nv, p->nk, p->tiled, p->dk, p->dv, n, y, y + KD, C, y + 2 * KD, C, g, beta,
                  1.0f / sqrtf((float)p->dv), out, out_stride, dscr, pool);
}

static const rec_kind deltanet_kind = {.name = "deltanet", .scratch_floats = dn_scratch, .run = dn_run};

rw_status rw_deltanet_state_new(const rw_rec_params *p, rw_layer_state **out, rw_error *err) {
    if (!p || p->nk <= 0 || p->nv <= 0 || p->nv % p->nk || p->dk <= 0 || p->dv <= 0 || p->conv_kernel < 1 ||
        p->conv_channels != 2 * p->nk * p->dk + p->nv * p->dv || !p->conv_w)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "deltanet state: inconsistent shape");
    rw_rec_params q = *p;
    q.mat_floats = (int64_t)p->nv * p->dk * p->dv;
    q.log_floats = p->conv_channels + 2 * (int64_t)p->nv;
    q.out_floats = (int64_t)p->nv * p->dv;
    return rw_cache__rec_state_new(&deltanet_kind, &q, out, err);
}
