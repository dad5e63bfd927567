/* imatrix.c - an importance matrix collected from a model's own passes, as
 * llama.cpp's llama-imatrix collects it: for each weight matrix, per input
 * column, the sum of the squares of the activations that reached it, and
 * how many activation rows that was (per expert of a 3-D expert tensor).
 * rw_quantize (llama-quantize) weighs its fits by sum / count.
 *
 * The kernels report every product the collecting thread runs
 * (rw_matmul_observe) by the weights' address; that address names the
 * model's tensor (a binary search over the mapped tensors), and an expert's
 * offset in a 3-D tensor its expert. As llama-imatrix: the weights of the
 * blocks (blk.*, and output.weight when asked), products of at least 16
 * rows (the expert products whatever their rows), each row's squares added
 * in row order; a product over a slice of a matrix's rows (the same input
 * again) is not counted twice. Written in llama-imatrix's GGUF layout:
 * general.type "imatrix", imatrix.datasets, imatrix.chunk_count,
 * imatrix.chunk_size, then per matrix in name order NAME.in_sum2 (F32,
 * ne[0] x experts) and NAME.counts (F32, one per expert). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/portable.h"
#include "kernels/matmul.h"
#include "models/model_int.h"

#define MIN_ROWS 16 /* llama-imatrix leaves out smaller products (decode steps) */

typedef struct {
    float *values;   /* ne[0] * n_exp sums of squares */
    int64_t *counts; /* n_exp rows counted */
} stat;

struct rw_model_imatrix {
    const rw_gguf *g;
    bool process_output;
    size_t *by_addr; /* tensor indexes of the weights, sorted by data address */
    size_t n_addr;
    stat *stats; /* [n_tensors]; values NULL until the tensor is reached */
};

static const rw_gguf_tensor *tensor(const rw_model_imatrix *c, size_t i) { return rw_gguf_tensor_at(c->g, i); }

static int64_t n_experts(const rw_gguf_tensor *t) { return t->n_dims >= 3 ? (int64_t)t->ne[2] : 1; }

/* The tensor whose data holds address p, or NULL. */
static const rw_gguf_tensor *tensor_at(const rw_model_imatrix *c, const char *p, size_t *index) {
    size_t lo = 0, hi = c->n_addr; /* the first tensor starting after p */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((const char *)tensor(c, c->by_addr[mid])->data <= p) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return NULL;
    const rw_gguf_tensor *t = tensor(c, c->by_addr[lo - 1]);
    if (p >= (const char *)t->data + t->nbytes) return NULL;
    *index = c->by_addr[lo - 1];
    return t;
}

static void observe(void *ctx, const void *w, int64_t n_in, const float *x, int64_t x_stride, const int32_t *x_rows,
                    int64_t n_rows) {
    rw_model_imatrix *c = ctx;
    size_t ti;
    const rw_gguf_tensor *t = tensor_at(c, w, &ti);
    if (!t || (int64_t)t->ne[0] != n_in) return;
    const int64_t n_exp = n_experts(t);
    const size_t offset = (size_t)((const char *)w - (const char *)t->data), expert_bytes = t->nbytes / (size_t)n_exp;
    if (offset % expert_bytes) return; /* a slice of rows: its input is counted with the first */
    const int64_t ex = (int64_t)(offset / expert_bytes);
    if (n_exp == 1 && n_rows < MIN_ROWS) return;
    if (strncmp(t->name, "blk.", 4) && !(c->process_output && !strcmp(t->name, "output.weight"))) return;
    stat *s = &c->stats[ti];
    if (!s->values) { /* owned by the collector; a failed allocation leaves the tensor out */
        s->values = calloc((size_t)(n_in * n_exp), sizeof *s->values);
        s->counts = calloc((size_t)n_exp, sizeof *s->counts);
        if (!s->values || !s->counts) {
            free(s->values);
            free(s->counts);
            s->values = NULL;
            s->counts = NULL;
            return;
        }
    }
    float *v = s->values + ex * n_in;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + (x_rows ? x_rows[r] : r) * x_stride;
        for (int64_t j = 0; j < n_in; j++) v[j] += xr[j] * xr[j];
    }
    s->counts[ex] += n_rows;
}

static int by_address(const void *a, const void *b, void *g) {
    const char *x = rw_gguf_tensor_at(g, *(const size_t *)a)->data, *y = rw_gguf_tensor_at(g, *(const size_t *)b)->data;
    return x < y ? -1 : x > y;
}

rw_status rw_model_imatrix_begin(const rw_model *m, bool process_output, rw_model_imatrix **out, rw_error *err) {
    *out = NULL;
    rw_model_imatrix *c = calloc(1, sizeof *c); /* freed by rw_model_imatrix_end */
    const size_t n = rw_gguf_n_tensors(m->g);
    if (c) {
        c->g = m->g;
        c->process_output = process_output;
        c->by_addr = malloc((n ? n : 1) * sizeof *c->by_addr);
        c->stats = calloc(n ? n : 1, sizeof *c->stats);
    }
    if (!c || !c->by_addr || !c->stats) {
        rw_model_imatrix_end(c);
        return rw_errorf(err, RW_ERR_NOMEM, "no memory for an importance matrix");
    }
    for (size_t i = 0; i < n; i++)
        if (tensor(c, i)->n_dims >= 2 && tensor(c, i)->nbytes) c->by_addr[c->n_addr++] = i;
    rw_qsort_r(c->by_addr, c->n_addr, sizeof *c->by_addr, by_address, (void *)m->g);
    rw_matmul_observe(observe, c);
    *out = c;
    return RW_OK;
}

void rw_model_imatrix_end(rw_model_imatrix *c) {
    if (!c) return;
    rw_matmul_observe(NULL, NULL);
    for (size_t i = 0; c->stats && i < rw_gguf_n_tensors(c->g); i++) {
        free(c->stats[i].values);
        free(c->stats[i].counts);
    }
    free(c->stats);
    free(c->by_addr);
    free(c);
}

static int by_name(const void *a, const void *b, void *c) {
    return strcmp(tensor(c, *(const size_t *)a)->name, tensor(c, *(const size_t *)b)->name);
}

size_t rw_model_imatrix_entries(const rw_model_imatrix *c) {
    size_t n = 0;
    for (size_t i = 0; i < rw_gguf_n_tensors(c->g); i++) n += c->stats[i].values != NULL;
    return n;
}

rw_status rw_model_imatrix_save(const rw_model_imatrix *c, const char *path, const char *dataset, uint32_t chunk_count,
                                uint32_t chunk_size, rw_error *err) {
    const size_t n = rw_gguf_n_tensors(c->g);
    size_t *order = malloc((n ? n : 1) * sizeof *order); /* freed below */
    float *counts = NULL;                                /* every entry's counts as floats; freed below */
    size_t n_ent = 0, n_counts = 0;
    for (size_t i = 0; order && i < n; i++)
        if (c->stats[i].values) order[n_ent++] = i, n_counts += (size_t)n_experts(tensor(c, i));
    rw_gguf_writer *w = rw_gguf_writer_new(); /* freed below */
    rw_status s = order && w && (counts = malloc((n_counts ? n_counts : 1) * sizeof *counts))
                      ? RW_OK
                      : rw_errorf(err, RW_ERR_NOMEM, "no memory to write the importance matrix");
    if (!s && !n_ent)
        s = rw_errorf(err, RW_ERR_INVALID_ARG, "no product of the model's weights was seen: nothing to save");
    if (!s) rw_qsort_r(order, n_ent, sizeof *order, by_name, (void *)c);
    const char *datasets[1] = {dataset};
    if (!s) s = rw_gguf_writer_add_str(w, "general.type", "imatrix", err);
    if (!s) s = rw_gguf_writer_add_arr_str(w, "imatrix.datasets", datasets, dataset ? 1 : 0, err);
    if (!s) s = rw_gguf_writer_add_u32(w, "imatrix.chunk_count", chunk_count, err);
    if (!s) s = rw_gguf_writer_add_u32(w, "imatrix.chunk_size", chunk_size, err);
    float *cf = counts;
    for (size_t k = 0; !s && k < n_ent; k++) {
        const rw_gguf_tensor *t = tensor(c, order[k]);
        const stat *st = &c->stats[order[k]];
        const int64_t n_exp = n_experts(t);
        for (int64_t j = 0; j < (int64_t)t->ne[0] * n_exp; j++)
            if (!isfinite(st->values[j]))
                s = rw_errorf(err, RW_ERR_RANGE, "%s: the squares of its activations overflow", t->name);
        for (int64_t e = 0; e < n_exp; e++) cf[e] = (float)st->counts[e];
        char name[96];
        const uint64_t ne_sums[2] = {t->ne[0], (uint64_t)n_exp}, ne_counts[2] = {1, (uint64_t)n_exp};
        const uint32_t dims = n_exp > 1 ? 2 : 1; /* a matrix's come out 1-D, as ggml writes {n, 1} */
        snprintf(name, sizeof name, "%s.in_sum2", t->name);
        if (!s) s = rw_gguf_writer_add_tensor(w, name, RW_TYPE_F32, dims, ne_sums, st->values, NULL, NULL, err);
        snprintf(name, sizeof name, "%s.counts", t->name);
        if (!s) s = rw_gguf_writer_add_tensor(w, name, RW_TYPE_F32, dims, ne_counts, cf, NULL, NULL, err);
        cf += n_exp;
    }
    if (!s) s = rw_gguf_writer_write(w, path, err);
    rw_gguf_writer_free(w);
    free(counts);
    free(order);
    return s;
}
