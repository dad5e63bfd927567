/* tools_api.c - the public calls of include/rewind.h's "tools" section:
 * a GGUF file read without loading a model (over gguf/gguf.h), the disk
 * tier's verification (pcache/pcache.h) and the process-wide switches of
 * the kernels and the mapped files. */
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/dtype.h"
#include "base/mapped_file.h"
#include "engine/spec.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "pcache/pcache.h"

/* ---- reading a GGUF file ---- */

/* The public type codes are GGUF's, as the reader's. */
_Static_assert(RW_META_UINT8 == (int)RW_GGUF_UINT8 && RW_META_BOOL == (int)RW_GGUF_BOOL &&
                   RW_META_STRING == (int)RW_GGUF_STRING && RW_META_ARRAY == (int)RW_GGUF_ARRAY &&
                   RW_META_FLOAT64 == (int)RW_GGUF_FLOAT64 && RW_META_FLOAT64 + 1 == (int)RW_GGUF_TYPE_COUNT,
               "rw_meta_type follows rw_gguf_type");

/* The public handle is the reader itself: the functions below only read it. */
static const rw_gguf *gguf_of(const rw_model_file *f) { return (const rw_gguf *)f; }

rw_status rw_model_file_open(const char *path, rw_model_file **out, rw_error *err) {
    if (!out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_file_open: out is NULL");
    *out = NULL;
    if (!path) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_file_open: path is NULL");
    rw_gguf *g = NULL;
    rw_status st = rw_gguf_open(path, &g, err);
    if (!st) *out = (rw_model_file *)g;
    return st;
}

void rw_model_file_close(rw_model_file *f) { rw_gguf_close((rw_gguf *)f); }
uint32_t rw_model_file_version(const rw_model_file *f) { return f ? rw_gguf_version(gguf_of(f)) : 0; }
uint32_t rw_model_file_alignment(const rw_model_file *f) { return f ? rw_gguf_alignment(gguf_of(f)) : 0; }
uint64_t rw_model_file_data_offset(const rw_model_file *f) { return f ? rw_gguf_data_offset(gguf_of(f)) : 0; }
uint64_t rw_model_file_size(const rw_model_file *f) { return f ? rw_gguf_total_size(gguf_of(f)) : 0; }
uint32_t rw_model_file_n_parts(const rw_model_file *f) { return f ? rw_gguf_n_parts(gguf_of(f)) : 0; }

uint32_t rw_model_file_tensor_part(const rw_model_file *f, size_t i) {
    const rw_gguf_tensor *t = f ? rw_gguf_tensor_at(gguf_of(f), i) : NULL;
    return t ? t->part : 0;
}

rw_status rw_model_file_split(const char *in, const char *out_prefix, uint32_t max_tensors, uint64_t max_bytes,
                              uint32_t *n_parts, rw_error *err) {
    if (n_parts) *n_parts = 0;
    if (!in || !out_prefix) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_file_split: a path is NULL");
    return rw_gguf_split(in, out_prefix, max_tensors, max_bytes, n_parts, err);
}

rw_status rw_model_file_merge(const char *first_part, const char *out, rw_error *err) {
    if (!first_part || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_file_merge: a path is NULL");
    return rw_gguf_merge(first_part, out, err);
}
size_t rw_model_file_n_meta(const rw_model_file *f) { return f ? rw_gguf_n_kv(gguf_of(f)) : 0; }
size_t rw_model_file_n_tensors(const rw_model_file *f) { return f ? rw_gguf_n_tensors(gguf_of(f)) : 0; }

/* The public view of a value whose internal record is v (NULL: none). */
static void meta_view(const rw_gguf_value *v, rw_meta_value *out) {
    memset(out, 0, sizeof *out);
    if (!v) return;
    out->type = (rw_meta_type)v->type;
    out->impl = v;
    switch (v->type) {
    case RW_GGUF_INT8:
    case RW_GGUF_INT16:
    case RW_GGUF_INT32:
    case RW_GGUF_INT64: out->i = v->i; break;
    case RW_GGUF_FLOAT32:
    case RW_GGUF_FLOAT64: out->f = v->f; break;
    case RW_GGUF_STRING:
        out->str = v->str.ptr;
        out->str_len = v->str.len;
        break;
    case RW_GGUF_ARRAY:
        out->elem_type = (rw_meta_type)v->arr.type;
        out->n_elems = v->arr.n;
        break;
    default: out->u = v->u; break; /* the unsigned types and bool */
    }
}

const char *rw_model_file_meta(const rw_model_file *f, size_t i, rw_meta_value *value) {
    const rw_gguf_kv *kv = f && i < rw_gguf_n_kv(gguf_of(f)) ? rw_gguf_kv_at(gguf_of(f), i) : NULL;
    if (value) meta_view(kv ? &kv->value : NULL, value);
    return kv ? kv->key : NULL;
}

bool rw_model_file_find_meta(const rw_model_file *f, const char *key, rw_meta_value *value) {
    const rw_gguf_value *v = f && key ? rw_gguf_get(gguf_of(f), key) : NULL;
    if (value) meta_view(v, value);
    return v != NULL;
}

bool rw_meta_elem(const rw_meta_value *arr, uint64_t i, rw_meta_value *out) {
    const rw_gguf_value *v = arr && arr->type == RW_META_ARRAY ? arr->impl : NULL;
    if (!out) return false;
    memset(out, 0, sizeof *out);
    if (!v || i >= v->arr.n) return false;
    if (v->arr.items) { /* strings and nested arrays have records of their own */
        meta_view(&v->arr.items[i], out);
        return true;
    }
    out->type = (rw_meta_type)v->arr.type;
    switch (v->arr.type) {
    case RW_GGUF_FLOAT32:
    case RW_GGUF_FLOAT64: return rw_gguf_arr_float(v, i, &out->f);
    case RW_GGUF_INT8:
    case RW_GGUF_INT16:
    case RW_GGUF_INT32:
    case RW_GGUF_INT64: return rw_gguf_arr_int(v, i, &out->i);
    case RW_GGUF_UINT64: /* the raw bits: above INT64_MAX too */ memcpy(&out->u, v->arr.raw + 8 * i, 8); return true;
    default: {
        int64_t x = 0;
        if (!rw_gguf_arr_int(v, i, &x)) return false;
        out->u = (uint64_t)x;
        return true;
    }
    }
}

const char *rw_meta_type_name(rw_meta_type t) {
    return (unsigned)t < RW_GGUF_TYPE_COUNT ? rw_gguf_type_name((rw_gguf_type)t) : "?";
}

bool rw_model_file_tensor(const rw_model_file *f, size_t i, rw_tensor_info *out) {
    if (!out) return false;
    memset(out, 0, sizeof *out);
    if (!f || i >= rw_gguf_n_tensors(gguf_of(f))) return false;
    const rw_gguf_tensor *t = rw_gguf_tensor_at(gguf_of(f), i);
    out->name = t->name;
    out->type = rw_dtype_name(t->type);
    out->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) out->ne[d] = t->ne[d];
    out->offset = t->file_offset;
    out->nbytes = t->nbytes;
    out->readable = rw_can_dequantize(t->type);
    return true;
}

int64_t rw_model_file_find_tensor(const rw_model_file *f, const char *name) {
    const rw_gguf *g = gguf_of(f);
    const rw_gguf_tensor *t = f && name ? rw_gguf_find_tensor(g, name) : NULL;
    if (!t) return -1;
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++)
        if (rw_gguf_tensor_at(g, i) == t) return (int64_t)i;
    return -1;
}

rw_status rw_model_file_read_rows(const rw_model_file *f, size_t i, uint64_t row, uint64_t n_rows, float *out,
                                  rw_error *err) {
    if (!f || (n_rows && !out)) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_file_read_rows: NULL argument");
    const rw_gguf *g = gguf_of(f);
    if (i >= rw_gguf_n_tensors(g)) return rw_errorf(err, RW_ERR_RANGE, "no tensor %zu", i);
    const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
    const uint64_t row_len = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (row > rows || n_rows > rows - row)
        return rw_errorf(err, RW_ERR_RANGE, "tensor '%s' has %llu rows", t->name, (unsigned long long)rows);
    if (!rw_can_dequantize(t->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor '%s': dequantization of %s is not supported", t->name,
                         rw_dtype_name(t->type));
    uint64_t row_bytes = 0;
    rw_dtype_row_bytes(t->type, row_len, &row_bytes); /* validated when the file opened */
    for (uint64_t r = 0; r < n_rows; r++) {
        rw_status st = rw_dequantize_row(t->type, (const uint8_t *)t->data + (row + r) * row_bytes, out + r * row_len,
                                         (int64_t)row_len);
        if (st)
            return rw_errorf(err, st, "tensor '%s': cannot convert row %llu", t->name, (unsigned long long)(row + r));
    }
    if (rw_gguf_faulted(g)) return rw_errorf(err, RW_ERR_IO, "the file was truncated while mapped");
    return RW_OK;
}

/* ---- a model's texts ---- */

const char *rw_model_text_get(const rw_model *m, rw_model_text what) {
    const rw_api__bundle *b = m ? rw_model_api_data(m) : NULL;
    if (!b) return NULL;
    switch (what) {
    case RW_MODEL_TEXT_BOS: return b->bos;
    case RW_MODEL_TEXT_EOS: return b->eos;
    case RW_MODEL_TEXT_RERANK_PROMPT: return b->rerank;
    }
    return NULL;
}

/* ---- the disk tier ---- */

rw_status rw_cache_verify(rw_model *m, const rw_engine_params *params, int *n_ok, int *n_invalid, int *n_unreadable,
                          rw_error *err) {
    int ok = 0, bad = 0, unreadable = 0;
    if (n_ok) *n_ok = 0;
    if (n_invalid) *n_invalid = 0;
    if (n_unreadable) *n_unreadable = 0;
    if (!rw_api__bundle_of(m, err)) return RW_ERR_INVALID_ARG;
    rw_engine_params ep = rw_engine_params_default();
    rw_status st = rw_api__params_in(&ep, sizeof ep, RW_API__ENGINE_PARAMS_V1, params, "rw_engine_params", err);
    if (st) return st;
    if (!ep.cache_dir) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_cache_verify: no cache_dir");
    if (ep.draft) { /* the draft's states are kept only for a draft of the same vocabulary */
        const rw_api__bundle *db = rw_api__bundle_of(ep.draft, err);
        if (!db) return RW_ERR_INVALID_ARG;
        if ((st = rw_spec_check_vocab(rw_api__bundle_of(m, err)->tok, db->tok, err))) return st;
    }
    /* a memory tier of one byte holds nothing: every file is read from the folder */
    const rw_pcache_config cfg = {.mem_bytes = 1,
                                  .dir = ep.cache_dir,
                                  .dir_bytes = (size_t)-1,
                                  .draft = ep.draft,
                                  .write_mode = RW_PCACHE_WRITE_EVICT};
    rw_pcache *c = NULL;
    st = rw_pcache_new(m, ep.run.kv_f32 ? RW_KV_F32 : RW_KV_F16, ep.run.n_ctx > 0 ? ep.run.n_ctx : 4096, &cfg, &c, err);
    if (!st) st = rw_pcache_verify(c, &ok, &bad, &unreadable, err);
    rw_pcache_free(c);
    if (st) return st;
    if (n_ok) *n_ok = ok;
    if (n_invalid) *n_invalid = bad;
    if (n_unreadable) *n_unreadable = unreadable;
    return RW_OK;
}

/* ---- process settings ---- */

static rw_status refuse_while_open(const char *what, rw_error *err) {
    if (atomic_load(&rw_api__open_models) > 0)
        return rw_errorf(err, RW_ERR_BUSY, "%s is set before any model opens", what);
    return RW_OK;
}

rw_status rw_set_packed_panels(bool on, rw_error *err) {
    rw_status st = refuse_while_open("rw_set_packed_panels", err);
    if (!st) rw_matmul_set_panels(on);
    return st;
}

rw_status rw_set_avx_vnni(bool on, rw_error *err) {
    rw_status st = refuse_while_open("rw_set_avx_vnni", err);
    if (!st) rw_matmul_set_avx_vnni(on);
    return st;
}

rw_status rw_set_weight_prefetch(const char *where, rw_error *err) {
    int mode = !where ? -2 : !strcmp(where, "auto") ? -1 : !strcmp(where, "l1") ? 0 : !strcmp(where, "l2") ? 1 : -2;
    if (mode == -2)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_set_weight_prefetch: '%s' is not auto, l1 or l2",
                         where ? where : "(null)");
    rw_status st = refuse_while_open("rw_set_weight_prefetch", err);
    if (!st) rw_matmul_set_prefetch_l2(mode);
    return st;
}

const char *rw_get_weight_prefetch(void) { return rw_matmul_prefetch_l2() ? "l2" : "l1"; }

rw_status rw_set_stored_panels(const char *which, rw_error *err) {
    rw_stored_panels mode;
    if (!which || !rw_stored_panels_parse(which, &mode))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_set_stored_panels: '%s' is not experts, all or off",
                         which ? which : "(null)");
    rw_status st = refuse_while_open("rw_set_stored_panels", err);
    if (!st) rw_models_set_stored_panels(mode);
    return st;
}

const char *rw_get_stored_panels(void) { return rw_stored_panels_name(rw_models_stored_panels()); }

rw_status rw_install_fault_guard(rw_error *err) { return rw_mapped_file_guard_install(err); }
