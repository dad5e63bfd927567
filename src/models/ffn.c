/* ffn.c - the SwiGLU feed-forward sublayer:
 *   out = Wdown (silu(Wgate xn) * (Wup xn)) */
#include "models/model_int.h"
#include "kernels/ops_model.h"

rw_status mdl_ffn_swiglu(rw_model *m, const mdl_dense_layer *L, const mdl_batch *b, rw_error *err) {
    mdl_scratch *sc = &m->sc;
    rw_status st;
    if ((st = mdl_matmul(&L->ffn_gate, sc->xn, b->n, sc->gate, b->pool, err)) ||
        (st = mdl_matmul(&L->ffn_up, sc->xn, b->n, sc->up, b->pool, err)))
        return st;
    rw_swiglu(sc->gate, sc->up, b->n * m->hp.n_ff);
    return mdl_matmul(&L->ffn_down, sc->gate, b->n, sc->tmp, b->pool, err);
}
