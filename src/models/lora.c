/* lora.c - LoRA adapters on a loaded model.
 *
 * An adapter is a GGUF file as llama.cpp's convert_lora_to_gguf.py writes
 * it: general.type "adapter", adapter.type "lora", the base model's
 * general.architecture, adapter.lora.alpha (optional), and for each adapted
 * weight W named NAME the pair NAME.lora_a {n_in, rank} and NAME.lora_b
 * {rank, n_out}. Each pair becomes a low-rank update of W's matrix
 * (kernels/matmul.h, rw_lowrank): y = W x + (B (A x)) * s, with s = scale *
 * alpha / rank, or scale when alpha is 0, as llama.cpp computes it. The
 * adapter's weights stay in its mapping; the model owns the mapping and the
 * update nodes (freed by rw_model_free). */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "models/model_int.h"

struct rw_models__lora {
    rw_gguf *g;          /* owned: the adapter's mapping */
    rw_lowrank *updates; /* [n_updates], owned; linked into the model's matrices */
    float **bts;         /* [n_updates]: each update's B transposed in f32 (rw_lowrank.bt), owned */
    int n_updates;
    float scale;
    struct rw_models__lora *next;
};

static bool ends_with(const char *s, const char *suffix, size_t *stem) {
    const size_t n = strlen(s), k = strlen(suffix);
    if (n <= k || strcmp(s + n - k, suffix)) return false;
    *stem = n - k;
    return true;
}

/* The model's matrix bound from the tensor `name` (NULL: none, or one the
 * adapters cannot reach, such as the tied output). */
static rw_matrix *matrix_named(const rw_model *m, const char *name) {
    for (int i = 0; i < m->n_mats; i++)
        if (m->mat_names[i] && !strcmp(m->mat_names[i], name)) return m->mats[i];
    return NULL;
}

static rw_status check_header(const rw_model *m, const rw_gguf *g, float *alpha, rw_error *err) {
    char buf[64];
    if (rw_gguf_get_cstr(g, "general.type", buf, sizeof buf, NULL) || strcmp(buf, "adapter"))
        return rw_errorf(err, RW_ERR_FORMAT, "not an adapter file (general.type is not \"adapter\")");
    if (rw_gguf_get_cstr(g, "adapter.type", buf, sizeof buf, NULL) || strcmp(buf, "lora"))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "adapter.type is not \"lora\" (only LoRA adapters are supported)");
    if (rw_gguf_get_cstr(g, "general.architecture", buf, sizeof buf, NULL) || strcmp(buf, m->hp.arch))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "adapter is for architecture \"%s\", the model is \"%s\"",
                         rw_gguf_get(g, "general.architecture") ? buf : "(none)", m->hp.arch);
    if (rw_gguf_get(g, "adapter.alora.invocation_tokens")) /* applied only after those tokens: not a plain LoRA */
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "activated LoRA (aLoRA) adapters are not supported");
    *alpha = 0.0f;
    if (rw_gguf_get(g, "adapter.lora.alpha")) return rw_gguf_get_f32(g, "adapter.lora.alpha", alpha, err);
    return RW_OK;
}

/* A factor as a matrix: the GGUF tensor t {n_in, n_out}, both 2-D. */
static rw_status factor(const rw_gguf_tensor *t, rw_matrix *out, rw_error *err) {
    uint64_t rb;
    if (t->n_dims != 2 || t->ne[0] == 0 || t->ne[1] == 0)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s is not a 2-D matrix", t->name);
    if (!rw_matmul_supports(t->type) || !rw_dtype_row_bytes(t->type, t->ne[0], &rb))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor %s: type %s with rows of %llu", t->name,
                         rw_dtype_name(t->type), (unsigned long long)t->ne[0]);
    *out = (rw_matrix){.type = t->type, .data = t->data, .n_in = (int64_t)t->ne[0], .n_out = (int64_t)t->ne[1]};
    return RW_OK;
}

/* B's rows in f32, transposed: (*out)[k * n_out + o] = B[o][k] (the
 * caller's, freed with free()). */
static rw_status transpose_b(const rw_matrix *b, float **out, rw_error *err) {
    const int64_t r = b->n_in, n_out = b->n_out;
    uint64_t rb = 0;
    if (!rw_can_dequantize(b->type) || !rw_dtype_row_bytes(b->type, (uint64_t)r, &rb))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "lora_b of type %s", rw_dtype_name(b->type));
    float *bt = malloc(sizeof *bt * (size_t)(r * n_out)), *row = malloc(sizeof *row * (size_t)r);
    rw_status st = bt && row ? RW_OK : rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; !st && o < n_out; o++) {
        st = rw_dequantize_row(b->type, (const uint8_t *)b->data + (size_t)o * rb, row, r);
        for (int64_t k = 0; !st && k < r; k++) bt[k * n_out + o] = row[k];
    }
    free(row);
    if (st) {
        free(bt);
        return rw_errorf(err, st, "lora_b cannot be converted (%s)", rw_dtype_name(b->type));
    }
    *out = bt;
    return RW_OK;
}

/* Pairs the adapter's tensors with the model's matrices into L->updates
 * (not yet linked). */
static rw_status bind_pairs(const rw_model *m, struct rw_models__lora *L, float alpha, rw_matrix **targets,
                            rw_error *err) {
    const rw_gguf *g = L->g;
    const size_t nt = rw_gguf_n_tensors(g);
    char name[256];
    for (size_t i = 0; i < nt; i++) {
        const rw_gguf_tensor *ta = rw_gguf_tensor_at(g, i);
        size_t stem;
        if (ends_with(ta->name, ".lora_b", &stem)) { /* taken with its lora_a, which must be there */
            if (stem >= sizeof name - 8) return rw_errorf(err, RW_ERR_FORMAT, "tensor name %s is too long", ta->name);
            memcpy(name, ta->name, stem);
            memcpy(name + stem, ".lora_a", 8);
            if (!rw_gguf_find_tensor(g, name))
                return rw_errorf(err, RW_ERR_FORMAT, "tensor %s has no lora_a", ta->name);
            continue;
        }
        if (!ends_with(ta->name, ".lora_a", &stem)) {
            if (ends_with(ta->name, "_norm.weight", &stem)) { /* llama.cpp skips these too */
                rw_log(RW_LOG_WARN, "lora: tensor %s is not applied (norm weights are not adapted)", ta->name);
                continue;
            }
            return rw_errorf(err, RW_ERR_FORMAT, "tensor %s is neither a .lora_a nor a .lora_b", ta->name);
        }
        if (stem >= sizeof name - 8) return rw_errorf(err, RW_ERR_FORMAT, "tensor name %s is too long", ta->name);
        memcpy(name, ta->name, stem);
        memcpy(name + stem, ".lora_b", 8);
        const rw_gguf_tensor *tb = rw_gguf_find_tensor(g, name);
        if (!tb) return rw_errorf(err, RW_ERR_FORMAT, "tensor %s has no %s", ta->name, name);
        name[stem] = 0;
        rw_matrix *w = matrix_named(m, name);
        if (!w)
            return rw_errorf(err, RW_ERR_UNSUPPORTED,
                             "adapter tensor %s: the model has no matrix %s that takes adapters", ta->name, name);
        rw_lowrank *u = &L->updates[L->n_updates];
        rw_matrix b;
        rw_status st = factor(ta, &u->a, err);
        if (!st) st = factor(tb, &b, err);
        if (st) return st;
        if (u->a.n_in != w->n_in || b.n_out != w->n_out || u->a.n_out != b.n_in)
            return rw_errorf(err, RW_ERR_FORMAT,
                             "%s: lora_a {%lld, %lld} and lora_b {%lld, %lld} do not fit the matrix {%lld, %lld}", name,
                             (long long)u->a.n_in, (long long)u->a.n_out, (long long)b.n_in, (long long)b.n_out,
                             (long long)w->n_in, (long long)w->n_out);
        if ((st = transpose_b(&b, &L->bts[L->n_updates], err))) return st;
        u->bt = L->bts[L->n_updates];
        /* llama.cpp's arithmetic: B's input in B's type (F16, BF16) */
        u->t_type = rw_numerics_current() == RW_NUMERICS_GGML && (b.type == RW_TYPE_F16 || b.type == RW_TYPE_BF16)
                        ? b.type
                        : RW_TYPE_F32;
        u->scale = alpha != 0.0f ? L->scale * alpha / (float)u->a.n_out : L->scale;
        targets[L->n_updates++] = w;
    }
    if (L->n_updates == 0) return rw_errorf(err, RW_ERR_FORMAT, "the adapter has no lora_a / lora_b pair");
    return RW_OK;
}

rw_status rw_model_add_lora(rw_model *m, rw_gguf *g, float scale, rw_error *err) {
    if (!m || !g) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_add_lora: NULL argument");
    float alpha;
    rw_status st = check_header(m, g, &alpha, err);
    if (st) return st;
    struct rw_models__lora *L = calloc(1, sizeof *L); /* the model's once linked; freed below on failure */
    const size_t nt = rw_gguf_n_tensors(g);
    rw_matrix **targets = malloc(sizeof *targets * (nt ? nt : 1)); /* freed below */
    if (L) L->updates = calloc(nt ? nt : 1, sizeof *L->updates);
    if (L) L->bts = calloc(nt ? nt : 1, sizeof *L->bts);
    if (!L || !targets || !L->updates || !L->bts) {
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto fail;
    }
    L->g = g;
    L->scale = scale;
    if ((st = bind_pairs(m, L, alpha, targets, err))) goto fail;
    /* link each update after the ones already on its matrix (the adapters'
     * sums in the order they were added) */
    for (int i = 0; i < L->n_updates; i++) {
        const rw_lowrank **tail = &targets[i]->lowrank;
        while (*tail) tail = (const rw_lowrank **)&(*tail)->next;
        *tail = &L->updates[i];
    }
    /* the fingerprint: a state computed with the adapter is another model's */
    uint64_t a = m->lora_fp[0] ? m->lora_fp[0] : RW_HASH_INIT,
             b = m->lora_fp[1] ? m->lora_fp[1] : 0x84222325cbf29ce4ull;
    for (size_t i = 0; i < nt; i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        const uint32_t ty = (uint32_t)t->type;
        a = rw_hash_bytes(a, t->name, strlen(t->name)), b = rw_hash_bytes(b, t->name, strlen(t->name));
        a = rw_hash_bytes(a, &ty, 4), b = rw_hash_bytes(b, t->ne, sizeof t->ne);
        a = rw_hash_bytes(a, t->data, (size_t)t->nbytes); /* whole: two adapters of one shape never share states */
    }
    for (int i = 0; i < L->n_updates; i++) b = rw_hash_bytes(b, &L->updates[i].scale, sizeof(float));
    m->lora_fp[0] = a, m->lora_fp[1] = b;
    L->next = NULL;
    struct rw_models__lora **end = &m->loras;
    while (*end) end = &(*end)->next;
    *end = L;
    free(targets);
    return RW_OK;
fail:
    free(targets);
    if (L) {
        for (int i = 0; L->bts && i < L->n_updates; i++) free(L->bts[i]);
        free(L->bts);
        free(L->updates);
    }
    free(L);
    return st;
}

bool rw_models__loras_faulted(const rw_model *m) {
    for (const struct rw_models__lora *L = m->loras; L; L = L->next)
        if (rw_gguf_faulted(L->g)) return true;
    return false;
}

void rw_models__loras_free(rw_model *m) {
    for (struct rw_models__lora *L = m->loras, *next; L; L = next) {
        next = L->next;
        rw_gguf_close(L->g);
        for (int i = 0; i < L->n_updates; i++) free(L->bts[i]);
        free(L->bts);
        free(L->updates);
        free(L);
    }
    m->loras = NULL;
}
