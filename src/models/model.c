/* model.c - loading and freeing models, and per-sequence state. */
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

rw_status rw_model_load(const rw_gguf *g, rw_model **out, rw_error *err) {
    *out = NULL;
    char arch[64];
    rw_status st = rw_gguf_get_cstr(g, "general.architecture", arch, sizeof arch, err);
    if (st == RW_ERR_NOT_FOUND) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key general.architecture");
    if (st) return st;
    const mdl_arch *a = rw_models__arch_find(arch);
    if (!a) return rw_errorf(err, RW_ERR_UNSUPPORTED, "architecture \"%s\" is not supported", arch);
    rw_model *m = calloc(1, sizeof *m);
    if (!m) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->g = g;
    m->arch = a;
    m->ggml_order = rw_models__prefers_ggml_order(g); /* before bind, which copies it into every matrix */
    if ((st = a->read_hparams(g, a, &m->hp, err)) || (st = a->bind(m, err))) {
        rw_model_free(m);
        return st;
    }
    *out = m;
    return RW_OK;
}

void rw_model_free(rw_model *m) {
    if (!m) return;
    if (m->arch && m->arch->free_ext) m->arch->free_ext(m);
    rw_models__scratch_free(&m->sc);
    free(m->mats);
    free(m->layers);
    free(m);
}

const rw_model_hparams *rw_model_get_hparams(const rw_model *m) { return &m->hp; }

void *rw_model_api_data(const rw_model *m) { return m->api; }
void rw_model_set_api_data(rw_model *m, void *data) { m->api = data; }

uint64_t rw_model_matrix_bytes(const rw_model *m) {
    uint64_t total = 0;
    for (int i = 0; i < m->n_mats; i++) {
        const rw_matrix *w = m->mats[i];
        uint64_t rb = 0;
        if (!w->data || !rw_dtype_row_bytes(w->type, (uint64_t)w->n_in, &rb)) continue;
        total += rb * (uint64_t)w->n_out;
    }
    return total;
}
