/* ops_deltanet.c - the gated delta rule of Gated DeltaNet layers (ops.h):
 * reference, dispatch, and the per-head parallel driver.
 *
 * State layout: M = S^T row-major, M[j][i] = S[i][j] at S[j*dk + i], so that
 * both S^T k and S^T q are dot products over contiguous rows and the rank-1
 * update adds a multiple of k to each row. This is llama.cpp's layout, which
 * keeps a saved state interchangeable with its own. */
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

void rw_delta_rule_head_ref(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                            int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                            const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                            float *scratch) {
    (void)scratch;
    const int np = dk & ~63;
    for (int64_t t = 0; t < n_t; t++) {
        const float *qt = q + t * q_stride, *kt = k + t * k_stride, *vt = v + t * v_stride;
        const float decay = expf(g[t * g_stride]), b = beta[t * beta_stride];
        float *ot = o + t * o_stride;
        /* row j of S^T needs only its own d: rows one after the other */
        for (int j = 0; j < dv; j++) {
            float *row = S + (int64_t)j * dk, a[64] = {0};
            for (int i = 0; i < dk; i++) {
                row[i] *= decay;
                if (i < np) a[i % 64] = fmaf(row[i], kt[i], a[i % 64]);
            }
            float kv = rw_reduce64_ref(a);
            for (int i = np; i < dk; i++) kv = fmaf(row[i], kt[i], kv);
            const float d = (vt[j] - kv) * b;
            for (int l = 0; l < 64; l++) a[l] = 0.0f;
            for (int i = 0; i < dk; i++) {
                row[i] = fmaf(kt[i], d, row[i]);
                if (i < np) a[i % 64] = fmaf(row[i], qt[i], a[i % 64]);
            }
            float oq = rw_reduce64_ref(a);
            for (int i = np; i < dk; i++) oq = fmaf(row[i], qt[i], oq);
            ot[j] = oq * scale;
        }
    }
}

void rw_delta_rule_head(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                        const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                        float *scratch) {
    if (rw_ops_use_avx512())
        rw_delta_rule_head_avx512(S, dk, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta,
                                  beta_stride, scale, o, o_stride, scratch);
    else if (rw_ops_use_avx2())
        rw_delta_rule_head_avx2(S, dk, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta,
                                beta_stride, scale, o, o_stride, scratch);
    else if (rw_ops_use_neon())
        rw_delta_rule_head_neon(S, dk, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta, beta_stride,
                                scale, o, o_stride, scratch);
    else
        rw_delta_rule_head_ref(S, dk, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta, beta_stride,
                               scale, o, o_stride, scratch);
}

typedef struct {
    float *states, *o, *scratch;
    const float *q, *k, *v, *g, *beta;
    int64_t n_t, qk_stride, v_stride, o_stride;
    int nv, nk, dk, dv;
    bool tiled;
    float scale;
} delta_job;

static void delta_task(void *p, int64_t task, int thread) {
    const delta_job *j = p;
    const int h = (int)task;
    const int kh = j->tiled ? h % j->nk : h / (j->nv / j->nk);
    rw_delta_rule_head(j->states + (int64_t)h * j->dk * j->dv, j->dk, j->dv, j->n_t, j->q + (int64_t)kh * j->dk,
                       j->qk_stride, j->k + (int64_t)kh * j->dk, j->qk_stride, j->v + (int64_t)h * j->dv, j->v_stride,
                       j->g + h, j->nv, j->beta + h, j->nv, j->scale, j->o + (int64_t)h * j->dv, j->o_stride,
                       j->scratch + (int64_t)thread * j->dv);
}

void rw_delta_rule(float *states, int nv, int nk, bool tiled, int dk, int dv, int64_t n_t, const float *q,
                   const float *k, int64_t qk_stride, const float *v, int64_t v_stride, const float *g,
                   const float *beta, float scale, float *o, int64_t o_stride, float *scratch, rw_threadpool *pool) {
    delta_job j = {.states = states, .o = o, .scratch = scratch, .q = q, .k = k, .v = v, .g = g, .beta = beta,
                   .n_t = n_t, .qk_stride = qk_stride, .v_stride = v_stride, .o_stride = o_stride, .nv = nv,
                   .nk = nk, .dk = dk, .dv = dv, .tiled = tiled, .scale = scale};
    rw_threadpool_run(pool, delta_task, &j, nv);
}
