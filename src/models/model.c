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
    const mdl_arch *a = mdl_arch_find(arch);
    if (!a) return rw_errorf(err, RW_ERR_UNSUPPORTED, "architecture \"%s\" is not supported", arch);
    rw_model *m = calloc(1, sizeof *m);
    if (!m) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->g = g;
    m->arch = a;
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
    mdl_scratch_free(&m->sc);
    free(m->layers);
    free(m);
}

const rw_model_hparams *rw_model_get_hparams(const rw_model *m) { return &m->hp; }

rw_status rw_model_seq_new(const rw_model *m, rw_kv_type kv_type, int64_t max_ctx, rw_model_seq **out,
                           rw_error *err) {
    *out = NULL;
    if (max_ctx < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "negative context size");
    rw_model_seq *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    s->m = m;
    const rw_kv_config cfg = {
        .type = kv_type,
        .n_layer = m->hp.n_layer,
        .n_head_kv = m->hp.n_head_kv,
        .head_dim_k = m->hp.head_dim_k,
        .head_dim_v = m->hp.head_dim_v,
        .max_ctx = max_ctx ? max_ctx : m->hp.n_ctx_train,
    };
    rw_status st = rw_kv_new(&cfg, &s->kv, err);
    if (st) {
        free(s);
        return st;
    }
    if (m->arch->rec_state_floats) {
        s->rec_floats = m->arch->rec_state_floats(m);
        s->rec = calloc(s->rec_floats ? s->rec_floats : 1, sizeof *s->rec);
        if (!s->rec) {
            rw_model_seq_free(s);
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory for the recurrent state");
        }
    }
    *out = s;
    return RW_OK;
}

void rw_model_seq_free(rw_model_seq *s) {
    if (!s) return;
    rw_kv_free(s->kv);
    free(s->rec);
    free(s);
}

int64_t rw_model_seq_length(const rw_model_seq *s) { return rw_kv_length(s->kv); }
int64_t rw_model_seq_max_ctx(const rw_model_seq *s) { return rw_kv_get_config(s->kv)->max_ctx; }
const rw_kv_cache *rw_model_seq_kv(const rw_model_seq *s) { return s->kv; }

rw_status rw_model_seq_truncate(rw_model_seq *s, int64_t n, rw_error *err) {
    if (n < 0 || n > rw_kv_length(s->kv))
        return rw_errorf(err, RW_ERR_RANGE, "cannot truncate a sequence of %lld tokens to %lld",
                         (long long)rw_kv_length(s->kv), (long long)n);
    if (s->rec && n != rw_kv_length(s->kv)) {
        /* A recurrent state cannot be cut back: only a full reset is exact
         * here. Rewinding to any token (checkpoints + replay) is the cache
         * layer's job and not implemented yet. */
        if (n != 0)
            return rw_errorf(err, RW_ERR_UNSUPPORTED, "rewinding a hybrid model's sequence to %lld of %lld tokens is not "
                             "supported yet (only a reset to 0)", (long long)n, (long long)rw_kv_length(s->kv));
        memset(s->rec, 0, s->rec_floats * sizeof *s->rec);
    }
    return rw_kv_set_length(s->kv, n, err);
}
