/* panels.c - weights a model keeps as stored panels (model_int.h).
 *
 * Where the tier's stored panels of a matrix take exactly its rows' bytes
 * (rw_matmul_panels_replace_rows: the AVX-512 tier's Q4_K, Q5_K and Q6_K
 * in our numerics), the model packs the matrix once at load and keeps the
 * panels in place of the rows: every product then runs on them, few rows
 * (a prefill's experts, batched decoding, verify passes) with nothing
 * packed per call, many rows expanding each panel as they would pack the
 * rows; the rows' pages go back to the file, so the model still holds each
 * weight once. Which weights: rw_set_stored_panels (by default a mixture
 * of experts' tensors; "all" adds every matrix, which costs the packing
 * when the model opens). Best effort: where there is no such form, or no
 * memory for it, the products read the rows. Under another tier or
 * numerics later the products read the rows again from the file (the
 * panels name their kernel and rows: kernels/matmul.c). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

static _Atomic int stored_mode = RW_STORED_PANELS_EXPERTS;

void rw_models_set_stored_panels(rw_stored_panels mode) { atomic_store(&stored_mode, (int)mode); }
rw_stored_panels rw_models_stored_panels(void) { return (rw_stored_panels)atomic_load(&stored_mode); }

static const char *const mode_names[] = {"experts", "all", "off"};

bool rw_stored_panels_parse(const char *s, rw_stored_panels *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, mode_names[i])) {
            *out = (rw_stored_panels)i;
            return true;
        }
    return false;
}

const char *rw_stored_panels_name(rw_stored_panels mode) { return (unsigned)mode < 3 ? mode_names[mode] : "experts"; }

const void *rw_model_largest_panels(const rw_model *m, size_t *bytes) {
    const void *best = NULL;
    *bytes = 0;
    for (int i = 0; i < m->n_xpanels; i++)
        if (m->xpanels[i].panels && m->xpanels[i].bytes > *bytes)
            best = m->xpanels[i].panels, *bytes = m->xpanels[i].bytes;
    return best;
}

const void *rw_models__panels_of(const rw_model *m, const void *data) {
    for (int i = 0; i < m->n_xpanels; i++)
        if (m->xpanels[i].w.data == data) return m->xpanels[i].panels;
    return NULL;
}

void rw_models__want_panels(rw_model *m, const rw_matrix *w, size_t bytes, rw_matrix *owner) {
    if (rw_models_stored_panels() == RW_STORED_PANELS_OFF || !rw_matmul_panels_replace_rows(w)) return;
    for (int i = 0; i < m->n_xpanels; i++) /* a tensor bound twice: packed once */
        if (m->xpanels[i].w.data == w->data) return;
    if (m->n_xpanels == m->cap_xpanels) {
        const int cap = m->cap_xpanels ? 2 * m->cap_xpanels : 64;
        void *a = realloc(m->xpanels, (size_t)cap * sizeof *m->xpanels); /* the model's (rw_model_free) */
        if (!a) return;
        m->xpanels = a, m->cap_xpanels = cap;
    }
    m->xpanels[m->n_xpanels++] = (struct rw_models__xpanels){.w = *w, .bytes = bytes, .owner = owner};
}

void rw_models__store_panels(rw_model *m) {
    if (rw_models_stored_panels() == RW_STORED_PANELS_ALL)
        for (int i = 0; i < m->n_mats; i++) {
            rw_matrix *w = m->mats[i];
            uint64_t rb;
            /* the tied output is the embedding table, whose rows are read too */
            if (m->mat_names[i] && w->data && !w->panels && rw_dtype_row_bytes(w->type, (uint64_t)w->n_in, &rb))
                rw_models__want_panels(m, w, (size_t)rb * (size_t)w->n_out, w);
        }
    if (!m->n_xpanels) return;
    /* every core packs (the pool is only for the load: freed below); without one, the caller alone */
    rw_threadpool *pool = NULL;
    rw_error err = {0};
    if (rw_threadpool_new(0, &pool, &err)) pool = NULL;
    for (int i = 0; i < m->n_xpanels; i++) {
        struct rw_models__xpanels *x = &m->xpanels[i];
        if (rw_matmul_pack_pool(&x->w, &x->panels, pool, &err) || !x->panels) continue;
        if (x->owner) x->owner->panels = x->panels;
        rw_gguf_release_pages(m->g, x->w.data, x->bytes);
    }
    rw_threadpool_free(pool);
}
