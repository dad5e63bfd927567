/* panels.c - weights a model keeps as stored panels (model_int.h).
 *
 * Where the tier's stored panels of a matrix take exactly its rows' bytes
 * (rw_matmul_panels_replace_rows: the AVX-512 tier's Q4_K, Q5_K and Q6_K
 * in our numerics), the model packs the matrix once at load and keeps the
 * panels in place of the rows: every product then runs on them, few rows
 * (batched decoding, verify passes, a prefill's experts) with nothing
 * packed per call, many rows expanding each panel as it would pack the
 * rows; the rows' pages go back to the file, so the model still holds each
 * weight once. Best effort: where there is no such form, or no memory for
 * it, the products read the rows. Under another tier or numerics later the
 * products read the rows again from the file (the panels name their
 * kernel: kernels/matmul.c). */
#include <stdlib.h>

#include "models/model_int.h"

const void *rw_models__panels_of(const rw_model *m, const void *data) {
    for (int i = 0; i < m->n_xpanels; i++)
        if (m->xpanels[i].data == data) return m->xpanels[i].panels;
    return NULL;
}

const void *rw_models__store_panels(rw_model *m, const rw_matrix *w, size_t bytes) {
    const void *have = rw_models__panels_of(m, w->data); /* a tensor bound twice: packed once */
    if (have || !rw_matmul_panels_replace_rows(w)) return have;
    if (m->n_xpanels == m->cap_xpanels) {
        const int cap = m->cap_xpanels ? 2 * m->cap_xpanels : 64;
        void *a = realloc(m->xpanels, (size_t)cap * sizeof *m->xpanels); /* the model's (rw_model_free) */
        if (!a) return NULL;
        m->xpanels = a, m->cap_xpanels = cap;
    }
    void *panels = NULL;
    rw_error err = {0};
    if (rw_matmul_pack(w, &panels, &err) || !panels) return NULL;
    m->xpanels[m->n_xpanels++] = (struct rw_models__xpanels){w->data, panels};
    rw_gguf_release_pages(m->g, w->data, bytes);
    return panels;
}

void rw_models__store_matrix_panels(rw_model *m) {
    for (int i = 0; i < m->n_mats; i++) {
        rw_matrix *w = m->mats[i];
        uint64_t rb;
        /* the tied output is the embedding table, whose rows are read too */
        if (!m->mat_names[i] || !w->data || w->panels || !rw_dtype_row_bytes(w->type, (uint64_t)w->n_in, &rb)) continue;
        w->panels = rw_models__store_panels(m, w, (size_t)rb * (size_t)w->n_out);
    }
}
