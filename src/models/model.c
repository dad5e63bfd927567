/* model.c - loading and freeing models, and per-sequence state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

rw_status rw_model_load(const rw_gguf *g, rw_model **out, rw_error *err) {
    *out = NULL;
    char arch[64];
    rw_status st = rw_gguf_get_cstr(g, "general.architecture", arch, sizeof arch, err);
    if (st == RW_ERR_NOT_FOUND) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key general.architecture");
    if (st) return st;
    const rw_models__arch *a = rw_models__arch_find(arch);
    if (!a) return rw_errorf(err, RW_ERR_UNSUPPORTED, "architecture \"%s\" is not supported", arch);
    rw_model *m = calloc(1, sizeof *m);
    if (!m) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->g = g;
    m->arch = a;
    if ((st = a->read_hparams(g, a, &m->hp, err)) || (st = a->bind(m, err))) {
        rw_model_free(m);
        return st;
    }
    rw_models__store_panels(m);
    /* every architecture's file may declare how its hidden states are
     * pooled (embedding models); a kind not known here counts as absent */
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", arch);
    uint32_t pooling = UINT32_MAX;
    if (rw_gguf_get(g, key) && rw_gguf_get_u32(g, key, &pooling, NULL)) pooling = UINT32_MAX;
    m->hp.pooling_type = pooling > 4 ? -1 : (int)pooling;
    *out = m;
    return RW_OK;
}

void rw_model_free(rw_model *m) {
    if (!m) return;
    if (m->arch && m->arch->free_ext) m->arch->free_ext(m);
    rw_models__scratch_free(&m->sc);
    rw_models__loras_free(m);
    for (int i = 0; i < m->n_xpanels; i++) free(m->xpanels[i].panels);
    free(m->xpanels);
    free(m->mats);
    free(m->mat_names);
    free(m->layers);
    free(m);
}

const rw_model_hparams *rw_model_get_hparams(const rw_model *m) { return &m->hp; }
bool rw_model_weights_lost(const rw_model *m) { return (m->g && rw_gguf_faulted(m->g)) || rw_models__loras_faulted(m); }

void *rw_model_api_data(const rw_model *m) { return m->api; }
void rw_model_set_api_data(rw_model *m, void *data) { m->api = data; }

/* Bytes of the file's tensors whose names start with prefix (NULL: all). */
static double tensor_bytes(const rw_gguf *g, const char *prefix) {
    double b = 0;
    const size_t np = prefix ? strlen(prefix) : 0;
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        if (!prefix || !strncmp(t->name, prefix, np)) b += (double)t->nbytes;
    }
    return b;
}

void rw_model_mtp_costs(const rw_model *m, float *draft_cost, float *catch_up_cost) {
    *draft_cost = *catch_up_cost = 0;
    /* a decode step streams the trunk's weights and the output head; an MTP
     * draft token the block's and the head again; a catch-up token the
     * block's only (no head) */
    char blk[32];
    snprintf(blk, sizeof blk, "blk.%d.", m->hp.n_layer);
    const double all = tensor_bytes(m->g, NULL), block = tensor_bytes(m->g, blk);
    const bool tied = !rw_gguf_find_tensor(m->g, "output.weight");
    const double head = tensor_bytes(m->g, tied ? "token_embd." : "output.");
    const double embd = tied ? 0 : tensor_bytes(m->g, "token_embd."); /* a decode step reads one row of it */
    const double step = all - block - embd;
    if (step <= 0 || block <= 0) return;
    *draft_cost = (float)((block + head) / step);
    /* catch-up rows go through the block together, as a prefill: about a
     * quarter of a decode step's cost per row (spec_rule.c's CATCH_UP) */
    *catch_up_cost = (float)(0.25 * block / step);
}

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
