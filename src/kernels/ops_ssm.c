/* ops_ssm.c - the Mamba2 selective scan (ops.h): reference, dispatch, and
 * the per-head parallel driver. State layout state[i*ds + s] per head, as
 * llama.cpp's {d_state, head_dim, n_head}.
 *
 * Per state element, as ggml's scalar loop `state = s0*dA + B*x_dt;
 * sumf += state*C` compiled by GCC, which contracts both into fmas:
 * state = fma(s0, dA, B*x_dt), sum = fma(state, C, sum) (checked against
 * llama.cpp's build on the nemotron_h fixture, where the unfused form
 * moves the Q8_0 logits of 8 rows). The SIMD tiers keep ggml's vector
 * steps for the elements before the last multiple of its step and this
 * form for the rest. */
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

void rw_ssm_scan_head_ref(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                          const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B, const float *C,
                          int64_t bc_stride, float D, float *y, int64_t y_stride) {
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride, *Bt = B + t * bc_stride, *Ct = C + t * bc_stride;
        float *yt = y + t * y_stride;
        const float dtp = rw_softplus1(dt[t * dt_stride] + dt_bias);
        const float dA = expf(dtp * A);
        for (int i = 0; i < hd; i++) {
            float *si = state + (int64_t)i * ds;
            const float xdt = xt[i] * dtp;
            /* lanes s % 64 by fma up to the last multiple of 64 (the AVX-512
             * twin's order), then the rest as ggml's scalar loop contracted by
             * GCC: fused multiply-adds */
            const int np = ds & ~63;
            float a[64] = {0};
            for (int s = 0; s < np; s++) {
                const float v = si[s] * dA + Bt[s] * xdt;
                a[s % 64] = fmaf(v, Ct[s], a[s % 64]);
                si[s] = v;
            }
            float sum = np ? rw_reduce64_ref(a) : 0.0f;
            for (int s = np; s < ds; s++) {
                const float v = fmaf(si[s], dA, Bt[s] * xdt);
                sum = fmaf(v, Ct[s], sum);
                si[s] = v;
            }
            yt[i] = sum + xt[i] * D;
        }
    }
}

void rw_ssm_scan_head(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride, const float *dt,
                      int64_t dt_stride, float dt_bias, float A, const float *B, const float *C, int64_t bc_stride,
                      float D, float *y, int64_t y_stride) {
    if (rw_ops_use_avx512())
        rw_ssm_scan_head_avx512(state, hd, ds, n_t, x, x_stride, dt, dt_stride, dt_bias, A, B, C, bc_stride, D, y,
                                y_stride);
    else if (rw_ops_use_avx2())
        rw_ssm_scan_head_avx2(state, hd, ds, n_t, x, x_stride, dt, dt_stride, dt_bias, A, B, C, bc_stride, D, y,
                              y_stride);
    else if (rw_ops_use_neon())
        rw_ssm_scan_head_neon(state, hd, ds, n_t, x, x_stride, dt, dt_stride, dt_bias, A, B, C, bc_stride, D, y,
                              y_stride);
    else
        rw_ssm_scan_head_ref(state, hd, ds, n_t, x, x_stride, dt, dt_stride, dt_bias, A, B, C, bc_stride, D, y,
                             y_stride);
}

typedef struct {
    float *states, *y;
    const float *x, *dt, *dt_bias, *A, *B, *C, *D;
    int64_t n_t, x_stride, dt_stride, bc_stride, y_stride;
    int n_head, n_group, hd, ds, piece;
} ssm_job;

/* Over many tokens a task is `piece` rows of one head's state (each row's
 * recurrence is independent of the others', so the split changes no bit),
 * which stay in L1 from token to token: a whole head of 64 x 128 states is
 * 32 KiB, and two threads on the two hardware threads of one core (as this
 * project's 2-vCPU machines measure) held 64 KiB in a 48 KiB L1. With few
 * tokens the state streams through once whatever the split, and tasks of
 * 16 rows only added their handing out: a task is then a whole head. */
enum { SSM_PIECE = 16, SSM_PIECE_FROM_TOKENS = 16 };

static void ssm_task(void *p, int64_t task, int thread) {
    const ssm_job *j = p;
    const int pieces = (j->hd + j->piece - 1) / j->piece;
    const int h = (int)(task / pieces), r0 = (int)(task % pieces) * j->piece, g = h / (j->n_head / j->n_group);
    const int rows = j->hd - r0 < j->piece ? j->hd - r0 : j->piece;
    rw_ssm_scan_head(j->states + ((int64_t)h * j->hd + r0) * j->ds, rows, j->ds, j->n_t, j->x + (int64_t)h * j->hd + r0,
                     j->x_stride, j->dt + h, j->dt_stride, j->dt_bias ? j->dt_bias[h] : 0.0f, j->A[h],
                     j->B + (int64_t)g * j->ds, j->C + (int64_t)g * j->ds, j->bc_stride, j->D ? j->D[h] : 0.0f,
                     j->y + (int64_t)h * j->hd + r0, j->y_stride);
}

void rw_ssm_scan(float *states, int n_head, int n_group, int hd, int ds, int64_t n_t, const float *x,
                 int64_t x_stride, const float *dt, int64_t dt_stride, const float *dt_bias, const float *A,
                 const float *B, const float *C, int64_t bc_stride, const float *D, float *y, int64_t y_stride,
                 rw_threadpool *pool) {
    ssm_job j = {.states = states, .y = y, .x = x, .dt = dt, .dt_bias = dt_bias, .A = A, .B = B, .C = C, .D = D,
                 .n_t = n_t, .x_stride = x_stride, .dt_stride = dt_stride, .bc_stride = bc_stride,
                 .y_stride = y_stride, .n_head = n_head, .n_group = n_group, .hd = hd, .ds = ds};
    j.piece = n_t >= SSM_PIECE_FROM_TOKENS ? SSM_PIECE : hd;
    rw_threadpool_run(pool, ssm_task, &j, (int64_t)n_head * ((hd + j.piece - 1) / j.piece));
}
