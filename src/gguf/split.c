/* split.c - split models (llama.cpp's gguf-split layout): finding and opening
 * the other parts of one, and writing a model as parts or its parts as one
 * file.
 *
 * The parts of a model split N ways are PREFIX-00001-of-0000N.gguf ..
 * PREFIX-0000N-of-0000N.gguf; each says split.no (its index from 0),
 * split.count (N) and split.tensors.count (the tensors of all parts), and
 * the first also carries all the other metadata. A file merged back says
 * split.count 0, so it is one file again. rw_gguf_open is here: a file
 * read by reader.c, then its parts. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_int.h"

#define SPLIT_NO        "split.no"
#define SPLIT_COUNT     "split.count"
#define SPLIT_TENSORS   "split.tensors.count"
#define SPLIT_MAX_PARTS 99999u /* the names' five digits */
#define SPLIT_PAD       32u    /* gguf-split counts each tensor's data padded to GGUF's default alignment */

/* PREFIX-%05u-of-%05u.gguf for part i (from 0) of n; the caller frees it
 * (NULL on out of memory). */
static char *part_path(const char *prefix, uint32_t i, uint32_t n) {
    size_t len = strlen(prefix) + 32;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s-%05" PRIu32 "-of-%05" PRIu32 ".gguf", prefix, i + 1, n);
    return p;
}

/* The PREFIX of path when it is named as part i of n, else NULL; the caller
 * frees it. */
static char *part_prefix(const char *path, uint32_t i, uint32_t n) {
    char tail[48];
    snprintf(tail, sizeof tail, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", i + 1, n);
    size_t lp = strlen(path), lt = strlen(tail);
    if (lp <= lt || strcmp(path + lp - lt, tail) != 0) return NULL;
    char *p = malloc(lp - lt + 1);
    if (p) memcpy(p, path, lp - lt), p[lp - lt] = 0;
    return p;
}

/* An integer split key of g, or def when absent. */
static rw_status split_key(const rw_gguf *g, const char *key, int64_t def, int64_t *v, rw_error *err) {
    *v = def;
    return rw_gguf_get(g, key) ? rw_gguf_get_i64(g, key, v, err) : RW_OK;
}

/* Part i (from 1) of n: opened and checked to say it is that part. */
static rw_status open_part(const char *prefix, uint32_t i, uint32_t n, rw_gguf **out, rw_error *err) {
    char *path = part_path(prefix, i, n);
    if (!path) return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    rw_status s = rw_gguf__open_one(path, out, err);
    int64_t no = 0, count = 0;
    if (!s && !(s = split_key(*out, SPLIT_NO, -1, &no, err)) && !(s = split_key(*out, SPLIT_COUNT, 0, &count, err)) &&
        (no != i || count != n))
        s = rw_errorf(err, RW_ERR_FORMAT,
                      "%s says it is part %" PRId64 " of %" PRId64 ", expected part %" PRIu32 " of %" PRIu32, path,
                      no + 1, count, i + 1, n);
    if (s) rw_error_prefix(err, "part %" PRIu32 " of %" PRIu32 " of a split model", i + 1, n);
    free(path);
    return s;
}

/* g's tensors followed by those of its parts, each marked with its part. */
static rw_status join_tensors(rw_gguf *g, rw_error *err) {
    size_t total = g->n_tensors;
    for (uint32_t p = 1; p < g->n_parts; p++) total += g->parts[p - 1]->n_tensors;
    rw_gguf_tensor *all = rw_arena_calloc(&g->arena, total ? total : 1, sizeof *all);
    if (!all) return rw_errorf(err, RW_ERR_NOMEM, "no memory for %zu tensors", total);
    size_t k = 0;
    for (uint32_t p = 0; p < g->n_parts; p++) {
        const rw_gguf *q = rw_gguf_part(g, p);
        for (size_t i = 0; i < q->n_tensors; i++, k++) {
            all[k] = q->tensors[i];
            all[k].part = p;
        }
    }
    g->tensors = all;
    g->n_tensors = total;
    return rw_gguf__index_tensors(g, err);
}

static rw_status open_parts(rw_gguf *g, const char *path, rw_error *err) {
    int64_t n, no;
    rw_status s = split_key(g, SPLIT_COUNT, 0, &n, err);
    if (!s) s = split_key(g, SPLIT_NO, 0, &no, err);
    if (s) {
        rw_error_prefix(err, "%s", path);
        return s;
    }
    if (n <= 1) return RW_OK; /* one file (a merged one says 0) */
    if (n > SPLIT_MAX_PARTS || no < 0 || no >= n)
        return rw_errorf(err, RW_ERR_FORMAT, "%s: split.no %" PRId64 " of split.count %" PRId64 " is out of range",
                         path, no, n);
    if (no != 0) {
        char *prefix = part_prefix(path, (uint32_t)no, (uint32_t)n);
        char *first = prefix ? part_path(prefix, 0, (uint32_t)n) : NULL;
        s = rw_errorf(err, RW_ERR_INVALID_ARG,
                      "%s is part %" PRId64 " of %" PRId64 " of a split model: open its first part%s%s", path, no + 1,
                      n, first ? ", " : " (named PREFIX-00001-of-...)", first ? first : "");
        free(first);
        free(prefix);
        return s;
    }
    char *prefix = part_prefix(path, 0, (uint32_t)n);
    if (!prefix)
        return rw_errorf(err, RW_ERR_FORMAT,
                         "%s is the first of %" PRId64 " parts of a split model, named otherwise than "
                         "PREFIX-00001-of-%05" PRId64 ".gguf: the other parts are found by that name",
                         path, n, n);
    g->parts = calloc((size_t)n - 1, sizeof *g->parts);
    if (!g->parts) s = rw_errorf(err, RW_ERR_NOMEM, "no memory");
    else g->n_parts = (uint32_t)n; /* rw_gguf_close skips the parts not opened */
    for (uint32_t p = 1; !s && p < g->n_parts; p++) s = open_part(prefix, p, g->n_parts, &g->parts[p - 1], err);
    free(prefix);
    if (!s) s = join_tensors(g, err);
    int64_t declared;
    if (!s && !(s = split_key(g, SPLIT_TENSORS, (int64_t)g->n_tensors, &declared, err)) &&
        declared != (int64_t)g->n_tensors)
        s = rw_errorf(err, RW_ERR_FORMAT,
                      "its %" PRIu32 " parts hold %zu tensors, but split.tensors.count says %" PRId64, g->n_parts,
                      g->n_tensors, declared);
    if (s) rw_error_prefix(err, "%s", path);
    return s;
}

/* One file, or the first part of a split model with all its parts (the
 * reader, reader.c, reads one file and knows nothing of parts). */
rw_status rw_gguf_open(const char *path, rw_gguf **out, rw_error *err) {
    rw_status s = rw_gguf__open_one(path, out, err);
    if (!s && (s = open_parts(*out, path, err))) {
        rw_gguf_close(*out);
        *out = NULL;
    }
    return s;
}

/* ---- writing ---- */

static rw_status add_u16(rw_gguf_writer *w, const char *key, uint16_t v, rw_error *err) {
    rw_gguf_value val = {.type = RW_GGUF_UINT16, .u = v};
    return rw_gguf_writer_add_kv(w, key, &val, err);
}

/* Every metadata entry of g but the keys named in skip (NULL-terminated).
 * gguf-split sets its keys as ggml sets any key: the old entry removed, the
 * new one appended; so the split keys come last. */
static rw_status copy_kvs(rw_gguf_writer *w, const rw_gguf *g, const char *const *skip, rw_error *err) {
    rw_status s = RW_OK;
    for (size_t i = 0; !s && i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        bool keep = true;
        for (const char *const *k = skip; *k && keep; k++) keep = strcmp(kv->key, *k) != 0;
        if (keep) s = rw_gguf_writer_add_kv(w, kv->key, &kv->value, err);
    }
    return s;
}

/* Part no of n of a model of tensors tensors: its split keys, in the order
 * gguf-split leaves them (split.count set last, once the count is known). */
static rw_status add_split_keys(rw_gguf_writer *w, uint32_t no, uint32_t n, size_t tensors, rw_error *err) {
    rw_status s = add_u16(w, SPLIT_NO, (uint16_t)no, err);
    if (!s) s = rw_gguf_writer_add_i32(w, SPLIT_TENSORS, (int32_t)tensors, err);
    if (!s) s = add_u16(w, SPLIT_COUNT, (uint16_t)n, err);
    return s;
}

static rw_status add_tensor(rw_gguf_writer *w, const rw_gguf_tensor *t, rw_error *err) {
    return rw_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL, err);
}

/* Writes w to path, then checks that the model's mapping lost no page
 * meanwhile (its file truncated under it). */
static rw_status write_checked(rw_gguf_writer *w, const rw_gguf *g, const char *path, rw_error *err) {
    rw_status s = rw_gguf_writer_write(w, path, err);
    if (!s && rw_gguf_faulted(g)) {
        remove(path);
        s = rw_errorf(err, RW_ERR_IO, "the input was truncated while it was read; %s not written", path);
    }
    return s;
}

/* first[p] = the index of part p's first tensor, first[n] = the count;
 * returns n. */
static uint32_t plan_parts(const rw_gguf *g, uint32_t max_tensors, uint64_t max_bytes, uint32_t *first) {
    uint32_t n = 0;
    uint64_t bytes = 0;
    first[n++] = 0;
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        uint64_t pad = (rw_gguf_tensor_at(g, i)->nbytes + SPLIT_PAD - 1) / SPLIT_PAD * SPLIT_PAD;
        bool cut = max_tensors ? i > 0 && i % max_tensors == 0 : i > first[n - 1] && bytes + pad > max_bytes;
        if (cut) first[n++] = (uint32_t)i, bytes = 0;
        bytes += pad;
    }
    first[n] = (uint32_t)rw_gguf_n_tensors(g);
    return n;
}

rw_status rw_gguf_split(const char *in, const char *out_prefix, uint32_t max_tensors, uint64_t max_bytes,
                        uint32_t *n_parts, rw_error *err) {
    if (n_parts) *n_parts = 0;
    if ((max_tensors == 0) == (max_bytes == 0))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "split: give either tensors or bytes per part (one of them)");
    rw_gguf *g;
    rw_status s = rw_gguf_open(in, &g, err);
    if (s) return s;
    const size_t nt = rw_gguf_n_tensors(g);
    uint32_t *first = nt < UINT32_MAX ? malloc((nt + 2) * sizeof *first) : NULL;
    if (!first) {
        rw_gguf_close(g);
        return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    }
    const uint32_t n = plan_parts(g, max_tensors, max_bytes, first);
    if (n > SPLIT_MAX_PARTS)
        s = rw_errorf(err, RW_ERR_INVALID_ARG, "split: %" PRIu32 " parts, more than the %u the names can number", n,
                      SPLIT_MAX_PARTS);
    for (uint32_t p = 0; !s && p < n; p++) {
        rw_gguf_writer *w = rw_gguf_writer_new();
        char *path = part_path(out_prefix, p, n);
        static const char *const skip[] = {SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS, NULL};
        if (!w || !path) s = rw_errorf(err, RW_ERR_NOMEM, "no memory");
        if (!s && p == 0) s = copy_kvs(w, g, skip, err);
        if (!s) s = add_split_keys(w, p, n, nt, err);
        for (uint32_t i = first[p]; !s && i < first[p + 1]; i++) s = add_tensor(w, rw_gguf_tensor_at(g, i), err);
        if (!s) s = write_checked(w, g, path, err);
        free(path);
        rw_gguf_writer_free(w);
    }
    if (!s && n_parts) *n_parts = n;
    free(first);
    rw_gguf_close(g);
    return s;
}

rw_status rw_gguf_merge(const char *first_part, const char *out, rw_error *err) {
    rw_gguf *g;
    rw_status s = rw_gguf_open(first_part, &g, err);
    if (s) return s;
    int64_t n = 0;
    if ((s = split_key(g, SPLIT_COUNT, 0, &n, err)) == RW_OK && n < 1)
        s = rw_errorf(err, RW_ERR_INVALID_ARG, "%s is not a split model (split.count is %s)", first_part,
                      rw_gguf_get(g, SPLIT_COUNT) ? "0" : "absent");
    rw_gguf_writer *w = s ? NULL : rw_gguf_writer_new();
    if (!s && !w) s = rw_errorf(err, RW_ERR_NOMEM, "no memory");
    static const char *const skip[] = {SPLIT_COUNT, NULL};
    if (!s) s = copy_kvs(w, g, skip, err);
    if (!s) s = add_u16(w, SPLIT_COUNT, 0, err); /* so the file is not taken for a part again */
    for (size_t i = 0; !s && i < rw_gguf_n_tensors(g); i++) s = add_tensor(w, rw_gguf_tensor_at(g, i), err);
    if (!s) s = write_checked(w, g, out, err);
    rw_gguf_writer_free(w);
    rw_gguf_close(g);
    return s;
}
