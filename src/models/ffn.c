/* ffn.c - the SwiGLU feed-forward sublayer:
 *   out = Wdown (silu(Wgate xn) * (Wup xn)) */
#include "models/model_int.h"
#include "kernels/ops_model.h"

/* silu(gate) * up over the batch's n * n_ff values as one flat run, in
 * pieces of whole 16-value units: the kernels take 16 values at a time and
 * only the run's last few apart, so pieces give the one run's bits. */
typedef struct {
    float *g;
    const float *u;
    int64_t n;
} swiglu_job;

static void swiglu_units(void *ctx, int64_t u0, int64_t u1) {
    const swiglu_job *j = ctx;
    const int64_t i0 = u0 * 16, i1 = u1 * 16 < j->n ? u1 * 16 : j->n;
    rw_swiglu(j->g + i0, j->u + i0, i1 - i0);
}

rw_status rw_models__ffn_swiglu(rw_model *m, const rw_models__dense_layer *L, const rw_models__batch *b, rw_error *err) {
    rw_models__scratch *sc = &m->sc;
    rw_status st;
    /* gate and up read the same rows: one conversion, one dispatch */
    const rw_matrix *ws[2] = {&L->ffn_gate, &L->ffn_up};
    float *ys[2] = {sc->gate, sc->up};
    const int64_t yst[2] = {L->ffn_gate.n_out, L->ffn_up.n_out};
    if ((st = rw_matmul_multi(ws, ys, yst, 2, sc->xn, L->ffn_gate.n_in, b->n, b->pool, err))) return st;
    swiglu_job sj = {sc->gate, sc->up, b->n * m->hp.n_ff};
    rw_threadpool_rows(b->pool, (sj.n + 15) / 16, 256, swiglu_units, &sj);
    return rw_models__matmul(&L->ffn_down, sc->gate, b->n, sc->tmp, b->pool, err);
}
