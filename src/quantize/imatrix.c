/* imatrix.c - importance matrices as llama.cpp's llama-imatrix writes them,
 * read as llama-quantize reads them.
 *
 * For each weight matrix the file holds, per input column, the sum of the
 * squared activations that reached it over a calibration text, and how many
 * rows of activations that was (per expert, for a 3-D expert tensor). The
 * quantizers want the mean: sum / count, or 1 for an expert no token
 * reached. Two layouts:
 *   GGUF (current): tensors NAME.in_sum2 (F32, ne[0] columns x experts) and
 *     NAME.counts (F32, one per expert, rounded to an integer), metadata
 *     imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size;
 *   legacy .dat: int32 entries, then per entry int32 name length, name,
 *     int32 calls, int32 values, float32 values (already means times
 *     calls), then optionally int32 chunks and a dataset name. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mapped_file.h"
#include "gguf/gguf.h"
#include "quantize/quantize_int.h"

#define SUMS_SUFFIX   ".in_sum2"
#define COUNTS_SUFFIX ".counts"

void rw_imatrix_free(rw_imatrix *im) {
    if (!im) return;
    for (size_t i = 0; i < im->n_entries; i++) {
        free(im->entries[i].name);
        free(im->entries[i].values);
    }
    free(im->entries);
    free(im->dataset);
    free(im);
}

const rw_imatrix_entry *rw_imatrix_find(const rw_imatrix *im, const char *name) {
    for (size_t i = 0; im && i < im->n_entries; i++)
        if (!strcmp(im->entries[i].name, name)) return &im->entries[i];
    return NULL;
}

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

/* Adds an entry of n values (taking ownership of name and values; a later
 * entry of the same name replaces the earlier, as llama.cpp's map). */
static rw_status add_entry(rw_imatrix *im, char *name, float *values, uint64_t n, rw_error *err) {
    if (!name || !values) {
        free(name);
        free(values);
        return rw_errorf(err, RW_ERR_NOMEM, "no memory for the importance matrix");
    }
    rw_imatrix_entry *old = (rw_imatrix_entry *)rw_imatrix_find(im, name);
    if (old) {
        free(old->name);
        free(old->values);
        *old = (rw_imatrix_entry){name, values, n};
        return RW_OK;
    }
    rw_imatrix_entry *e = realloc(im->entries, (im->n_entries + 1) * sizeof *e);
    if (!e) {
        free(name);
        free(values);
        return rw_errorf(err, RW_ERR_NOMEM, "no memory for the importance matrix");
    }
    im->entries = e;
    e[im->n_entries++] = (rw_imatrix_entry){name, values, n};
    return RW_OK;
}

static bool ends_with(const char *s, const char *suffix, size_t *stem) {
    size_t a = strlen(s), b = strlen(suffix);
    *stem = a - b;
    return a > b && !strcmp(s + a - b, suffix);
}

/* The GGUF layout: every NAME.in_sum2 with its NAME.counts. */
static rw_status load_gguf(const char *path, rw_imatrix *im, rw_error *err) {
    rw_gguf *g;
    rw_status s = rw_gguf_open(path, &g, err);
    if (s) return s;
    const rw_gguf_value *ds = rw_gguf_get(g, "imatrix.datasets");
    if (!ds || !rw_gguf_get(g, "imatrix.chunk_count") || !rw_gguf_get(g, "imatrix.chunk_size"))
        s = rw_errorf(err, RW_ERR_FORMAT,
                      "no imatrix metadata (imatrix.datasets, chunk_count, chunk_size): not llama-imatrix's file");
    rw_gguf_str first;
    if (!s && ds->type == RW_GGUF_ARRAY && ds->arr.type == RW_GGUF_STRING && rw_gguf_arr_str(ds, 0, &first) &&
        !(im->dataset = dup_n(first.ptr, (size_t)first.len)))
        s = rw_errorf(err, RW_ERR_NOMEM, "no memory");
    uint32_t chunks = 0;
    if (!s) s = rw_gguf_get_u32(g, "imatrix.chunk_count", &chunks, err);
    im->chunk_count = chunks;
    if (!s && !rw_gguf_n_tensors(g)) s = rw_errorf(err, RW_ERR_FORMAT, "no data");
    for (size_t i = 0; !s && i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *sums = rw_gguf_tensor_at(g, i);
        size_t stem;
        if (!ends_with(sums->name, SUMS_SUFFIX, &stem)) continue;
        char counts_name[96];
        snprintf(counts_name, sizeof counts_name, "%.*s%s", (int)stem, sums->name, COUNTS_SUFFIX);
        const rw_gguf_tensor *counts = rw_gguf_find_tensor(g, counts_name);
        if (!counts) {
            s = rw_errorf(err, RW_ERR_FORMAT, "%s has no %s", sums->name, counts_name);
            break;
        }
        const uint64_t n = sums->ne[0] * sums->ne[1] * sums->ne[2] * sums->ne[3];
        const uint64_t nc = counts->ne[0] * counts->ne[1] * counts->ne[2] * counts->ne[3];
        if (sums->type != RW_TYPE_F32 || counts->type != RW_TYPE_F32 || !nc || n % nc) {
            s = rw_errorf(err, RW_ERR_FORMAT, "%s / %s: not F32 sums of whole rows per count", sums->name, counts_name);
            break;
        }
        float *v = malloc(n * sizeof *v); /* owned by the entry */
        const float *sv = sums->data, *cv = counts->data;
        for (uint64_t e = 0; v && e < nc; e++) {
            float c;
            memcpy(&c, cv + e, 4);
            const float count = (float)lroundf(c); /* counts are whole numbers stored as floats */
            for (uint64_t j = e * (n / nc); j < (e + 1) * (n / nc); j++) {
                float x;
                memcpy(&x, sv + j, 4);
                v[j] = count > 0 ? x / count : 1;
            }
        }
        s = add_entry(im, dup_n(sums->name, stem), v, n, err);
    }
    for (size_t i = 0; !s && i < rw_gguf_n_tensors(g); i++) { /* and no counts without their sums */
        const char *name = rw_gguf_tensor_at(g, i)->name;
        size_t stem;
        char sums_name[96];
        if (!ends_with(name, COUNTS_SUFFIX, &stem)) continue;
        snprintf(sums_name, sizeof sums_name, "%.*s%s", (int)stem, name, SUMS_SUFFIX);
        if (!rw_gguf_find_tensor(g, sums_name)) s = rw_errorf(err, RW_ERR_FORMAT, "%s has no %s", name, sums_name);
    }
    if (!s && rw_gguf_faulted(g)) s = rw_errorf(err, RW_ERR_IO, "the file changed while it was read");
    rw_gguf_close(g);
    return s;
}

/* The legacy layout, read from the bytes p[0..size). */
typedef struct {
    const uint8_t *p;
    size_t size, pos;
} reader;

static bool take(reader *r, void *out, size_t n) {
    if (n > r->size - r->pos) return false;
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return true;
}

static rw_status load_legacy(const uint8_t *p, size_t size, rw_imatrix *im, rw_error *err) {
    reader r = {p, size, 0};
    int32_t n_entries;
    if (!take(&r, &n_entries, 4) || n_entries < 1) return rw_errorf(err, RW_ERR_FORMAT, "no data");
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (!take(&r, &len, 4) || len < 0 || (size_t)len > size - r.pos)
            return rw_errorf(err, RW_ERR_FORMAT, "entry %" PRId32 ": truncated name", i + 1);
        char *name = dup_n((const char *)p + r.pos, (size_t)len);
        r.pos += (size_t)len;
        if (!take(&r, &ncall, 4) || !take(&r, &nval, 4) || nval < 1 || (size_t)nval > (size - r.pos) / 4) {
            free(name);
            return rw_errorf(err, RW_ERR_FORMAT, "entry %" PRId32 ": truncated values", i + 1);
        }
        float *v = malloc((size_t)nval * sizeof *v); /* owned by the entry */
        if (v) take(&r, v, (size_t)nval * 4);
        else r.pos += (size_t)nval * 4;
        for (int32_t j = 0; v && ncall > 0 && j < nval; j++) v[j] /= (float)ncall;
        rw_status s = add_entry(im, name, v, (uint64_t)nval, err);
        if (s) return s;
    }
    int32_t chunks, len;
    if (take(&r, &chunks, 4)) {
        im->chunk_count = chunks;
        if (take(&r, &len, 4) && len > 0 && (size_t)len <= size - r.pos &&
            !(im->dataset = dup_n((const char *)p + r.pos, (size_t)len)))
            return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    }
    return RW_OK;
}

rw_status rw_imatrix_load(const char *path, rw_imatrix **out, rw_error *err) {
    *out = NULL;
    rw_imatrix *im = calloc(1, sizeof *im);
    if (!im) return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    rw_mapped_file map;
    rw_status s = rw_mapped_file_open(path, &map, err);
    if (!s) {
        const bool gguf = map.size >= 4 && !memcmp(map.data, "GGUF", 4);
        if (!gguf) s = load_legacy(map.data, map.size, im, err);
        rw_mapped_file_close(&map);
        if (gguf) s = load_gguf(path, im, err);
    }
    for (size_t i = 0; !s && i < im->n_entries; i++)
        for (uint64_t j = 0; j < im->entries[i].n; j++)
            if (!isfinite(im->entries[i].values[j])) {
                s = rw_errorf(err, RW_ERR_FORMAT, "%s holds a non-finite value (%g)", im->entries[i].name,
                              (double)im->entries[i].values[j]);
                break;
            }
    if (s) {
        rw_error_prefix(err, "importance matrix %s", path);
        rw_imatrix_free(im);
        return s;
    }
    *out = im;
    return RW_OK;
}
