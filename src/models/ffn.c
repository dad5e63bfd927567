/* ffn.c - the SwiGLU feed-forward sublayer:
 *   out = Wdown (silu(Wgate xn) * (Wup xn)) */
#include "models/model_int.h"
#include "kernels/ops_model.h"

rw_status rw_models__ffn_swiglu(rw_model *m, const rw_models__dense_layer *L, const rw_models__batch *b, rw_error *err) {
    rw_models__scratch *sc = &m->sc;
    rw_status st;
    /* gate and up read the same rows: one conversion, one dispatch */
    const rw_matrix *ws[2] = {&L->ffn_gate, &L->ffn_up};
    float *ys[2] = {sc->gate, sc->up};
    const int64_t yst[2] = {L->ffn_gate.n_out, L->ffn_up.n_out};
    if ((st = rw_matmul_multi(ws, ys, yst, 2, sc->xn, L->ffn_gate.n_in, b->n, b->pool, err))) return st;
    rw_swiglu(sc->gate, sc->up, b->n * m->hp.n_ff);
    return rw_models__matmul(&L->ffn_down, sc->gate, b->n, sc->tmp, b->pool, err);
}
