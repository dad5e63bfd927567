/* quantize.c - rw_quantize_write (quantize.h): the input's metadata and
 * tensors written again, each weight converted row by row at write time
 * (so a model larger than memory converts: only the mapped input and one
 * tensor's output are touched at once). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "kernels/quant.h"
#include "quantize/quantize_int.h"

/* Rows per task: enough to amortize the task, few enough to spread a small
 * tensor over the threads. */
enum { TASK_ROWS = 16 };

typedef struct {
    const rw_gguf *in;
    rw_threadpool *pool;
    const rw_imatrix *im; /* NULL without an importance matrix (or an empty one) */
} job;

typedef struct {
    const rw_gguf_tensor *src;
    rw_dtype type;
    const float *qw; /* its importance weights (ne[0] per expert), or NULL */
    const job *jb;
} out_tensor;

/* One tensor's conversion, shared by its tasks. */
typedef struct {
    const rw_gguf_tensor *src;
    rw_dtype type;
    uint8_t *dst;
    uint64_t n_in, n_rows, src_row_bytes, dst_row_bytes;
    uint64_t rows_per_expert;    /* ne[1]: the rows that share one expert's weights */
    const float *qw;             /* importance weights, or NULL */
    float *x;                    /* n_in floats per thread, owned by convert_tensor */
    _Atomic rw_status first_err; /* RW_OK until a row fails */
} convert_job;

static void convert_task(void *ctx, int64_t task, int thread) {
    convert_job *j = ctx;
    float *x = j->x + (size_t)thread * j->n_in;
    const uint64_t r0 = (uint64_t)task * TASK_ROWS, r1 = r0 + TASK_ROWS < j->n_rows ? r0 + TASK_ROWS : j->n_rows;
    for (uint64_t r = r0; r < r1; r++) {
        const uint8_t *in = (const uint8_t *)j->src->data + r * j->src_row_bytes;
        uint8_t *out = j->dst + r * j->dst_row_bytes;
        rw_status s = RW_OK;
        if (j->src->type == RW_TYPE_F32) memcpy(x, in, j->n_in * sizeof *x);
        else s = rw_dequantize_row(j->src->type, in, x, (int64_t)j->n_in);
        if (!s) {
            if (j->type == RW_TYPE_F32) memcpy(out, x, j->n_in * sizeof *x);
            else
                s = rw_quantize_row_weighted(j->type, x, out, (int64_t)j->n_in,
                                             j->qw ? j->qw + r / j->rows_per_expert * j->n_in : NULL);
        }
        if (s) {
            rw_status ok = RW_OK;
            atomic_compare_exchange_strong(&j->first_err, &ok, s);
            return;
        }
    }
}

/* Converts a tensor's rows on the pool, through f32. */
static rw_status convert_rows(const out_tensor *o, const rw_gguf_tensor *info, void *dst, rw_error *err) {
    convert_job j = {
        .src = o->src, .type = o->type, .dst = dst, .n_in = info->ne[0], .rows_per_expert = info->ne[1], .qw = o->qw};
    j.n_rows = info->ne[1] * info->ne[2] * info->ne[3];
    rw_dtype_row_bytes(o->src->type, j.n_in, &j.src_row_bytes);
    rw_dtype_row_bytes(o->type, j.n_in, &j.dst_row_bytes);
    j.x = malloc(j.n_in * (size_t)rw_threadpool_size(o->jb->pool) * sizeof *j.x); /* freed below */
    if (!j.x) return rw_errorf(err, RW_ERR_NOMEM, "quantize: no memory for a row of %s", info->name);
    atomic_init(&j.first_err, RW_OK);
    rw_threadpool_run(o->jb->pool, convert_task, &j, (int64_t)((j.n_rows + TASK_ROWS - 1) / TASK_ROWS));
    free(j.x);
    const rw_status s = atomic_load(&j.first_err);
    return s ? rw_errorf(err, s, "quantize: cannot convert %s from %s to %s", info->name, rw_dtype_name(o->src->type),
                         rw_dtype_name(o->type))
             : RW_OK;
}

/* The writer's fill callback: ctx is the out_tensor, info its output. */
static rw_status convert_tensor(void *ctx, const rw_gguf_tensor *info, void *dst, rw_error *err) {
    const out_tensor *o = ctx;
    const job *jb = o->jb;
    rw_status s = RW_OK;
    if (o->type == o->src->type) memcpy(dst, o->src->data, o->src->nbytes);
    else s = convert_rows(o, info, dst, err);
    /* a page of the input gone (the file truncated while mapped) reads as
     * zeros: fail before the output replaces anything */
    if (!s && rw_gguf_faulted(jb->in))
        s = rw_errorf(err, RW_ERR_IO, "reading %s failed: the input file changed while it was read", info->name);
    return s;
}
/* The output's order, llama.cpp's: the tensors outside the blocks first,
 * then block by block (by number, not as text), by name within each. */
static int layer_of(const char *name) {
    int il = -1;
    return sscanf(name, "blk.%d.", &il) == 1 ? il : -1;
}
static int by_layer_then_name(const void *a, const void *b) {
    const char *x = ((const out_tensor *)a)->src->name, *y = ((const out_tensor *)b)->src->name;
    const int lx = layer_of(x), ly = layer_of(y);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

/* The importance weights of a tensor to convert, as llama-quantize finds
 * them: by name, ne[0] per expert; a matrix of another size is an error,
 * but for the token embedding (which llama-imatrix never sees as a
 * product, so a stray entry is ignored). None found: no weights. */
static rw_status importance_of(const rw_imatrix *im, out_tensor *o, rw_error *err) {
    const rw_imatrix_entry *e = im ? rw_imatrix_find(im, o->src->name) : NULL;
    if (!e) return RW_OK;
    if (e->n == o->src->ne[0] * o->src->ne[2]) o->qw = e->values;
    else if (strcmp(o->src->name, "token_embd.weight") && strcmp(o->src->name, "per_layer_token_embd.weight"))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "the importance matrix has %llu values for %s, which needs %llu",
                         (unsigned long long)e->n, o->src->name, (unsigned long long)(o->src->ne[0] * o->src->ne[2]));
    return RW_OK;
}

static bool plain_float(rw_dtype t) { return t == RW_TYPE_F32 || t == RW_TYPE_F16 || t == RW_TYPE_BF16; }

/* The type of tensor i of ts (in the output's order) and its weights;
 * fails on one that cannot be converted. */
static rw_status plan_tensor(rw_quantize_mix *mix, const rw_quantize_options *o, const job *jb, out_tensor *ts,
                             rw_error *err) {
    const rw_gguf_tensor *t = ts->src;
    ts->type = rw_quantize__converts(t) ? rw_quantize__tensor_type(mix, t) : t->type;
    if (ts->type == RW_TYPE_COUNT)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "%s: rows of %llu do not divide into %s blocks", t->name,
                         (unsigned long long)t->ne[0], mix->ft->name);
    if (t->ne[0] % rw_dtype_block_size(ts->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "%s: rows of %llu do not divide into %s blocks", t->name,
                         (unsigned long long)t->ne[0], rw_dtype_name(ts->type));
    if (ts->type == t->type) return RW_OK;
    if (!plain_float(t->type) && !o->allow_requantize)
        return rw_errorf(err, RW_ERR_UNSUPPORTED,
                         "%s is already %s: converting it again loses more than quantizing the original; "
                         "start from the F32/F16/BF16 file, or allow requantizing",
                         t->name, rw_dtype_name(t->type));
    if (!rw_can_dequantize(t->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "%s: type %s cannot be read as floats", t->name,
                         rw_dtype_name(t->type));
    if (ts->type != RW_TYPE_F32 && !rw_can_quantize(ts->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "%s: no quantizer for %s", t->name, rw_dtype_name(ts->type));
    return importance_of(jb->im, ts, err);
}

/* Chooses every tensor's type, in the output's order. */
static rw_status plan_types(const rw_gguf *g, const rw_quantize_ftype *ft, const rw_quantize_options *o, const job *jb,
                            out_tensor *ts, rw_error *err) {
    rw_quantize_mix mix;
    rw_status s = rw_quantize__mix_init(&mix, g, ft, o, err);
    mix.has_imatrix = jb->im != NULL;
    const size_t n = rw_gguf_n_tensors(g);
    for (size_t i = 0; i < n; i++) ts[i] = (out_tensor){.src = rw_gguf_tensor_at(g, i), .jb = jb};
    qsort(ts, n, sizeof *ts, by_layer_then_name);
    for (size_t i = 0; !s && i < n; i++) s = plan_tensor(&mix, o, jb, &ts[i], err);
    rw_quantize__mix_free(&mix);
    return s;
}

/* What llama-quantize records of the importance matrix, after the file
 * type: the path as given and the first dataset (each cut to 127 bytes, as
 * its fixed buffers), the entries, and the chunks when known. */
static rw_status imatrix_metadata(rw_gguf_writer *w, const char *path, const rw_imatrix *im, rw_error *err) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    rw_status s = rw_gguf_writer_add_str(w, "quantize.imatrix.file", buf, err);
    if (!s && im->dataset) {
        snprintf(buf, sizeof buf, "%s", im->dataset);
        s = rw_gguf_writer_add_str(w, "quantize.imatrix.dataset", buf, err);
    }
    if (!s) s = rw_gguf_writer_add_u32(w, "quantize.imatrix.entries_count", (uint32_t)im->n_entries, err);
    if (!s && im->chunk_count > 0)
        s = rw_gguf_writer_add_u32(w, "quantize.imatrix.chunks_count", (uint32_t)im->chunk_count, err);
    return s;
}

/* The input's metadata, then general.quantization_version and
 * general.file_type last (llama.cpp sets them by removing and appending);
 * a split model's keys are dropped (the output is one file; rw_gguf_open
 * read every part). */
static rw_status copy_metadata(const rw_gguf *g, rw_gguf_writer *w, const rw_quantize_ftype *ft,
                               const rw_quantize_options *o, const rw_imatrix *im, rw_error *err) {
    static const char *const drop[] = {"general.quantization_version", "general.file_type", "split.no", "split.count",
                                       "split.tensors.count"};
    rw_status s = RW_OK;
    for (size_t i = 0; !s && i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        bool keep = true;
        for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++) keep = keep && strcmp(kv->key, drop[d]);
        if (keep) s = rw_gguf_writer_add_kv(w, kv->key, &kv->value, err);
    }
    if (!s) s = rw_gguf_writer_add_u32(w, "general.quantization_version", 2, err); /* ggml's QNT version */
    if (!s) s = rw_gguf_writer_add_u32(w, "general.file_type", ft->ftype, err);
    if (!s && im) s = imatrix_metadata(w, o->imatrix, im, err);
    return s;
}

rw_status rw_quantize_write(const char *in_path, const char *out_path, const rw_quantize_options *o, rw_error *err) {
    const rw_quantize_ftype *ft = rw_quantize_ftype_find(o->type);
    if (!ft)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown quantization type \"%s\"", o->type ? o->type : "(null)");
    if (!in_path || !out_path) return rw_errorf(err, RW_ERR_INVALID_ARG, "quantize needs an input and an output path");
    rw_gguf *g = NULL;
    rw_status s = rw_gguf_open(in_path, &g, err);
    if (s) return s;
    const size_t n = rw_gguf_n_tensors(g);
    out_tensor *ts = calloc(n ? n : 1, sizeof *ts); /* freed below */
    rw_gguf_writer *w = rw_gguf_writer_new();       /* freed below */
    job jb = {.in = g};
    rw_imatrix *im = NULL; /* freed below */
    if (!ts || !w) s = rw_errorf(err, RW_ERR_NOMEM, "quantize: out of memory");
    if (!s && o->imatrix) s = rw_imatrix_load(o->imatrix, &im, err);
    jb.im = im && im->n_entries ? im : NULL; /* an empty one is none, as llama-quantize takes it */
    if (!s) s = plan_types(g, ft, o, &jb, ts, err);
    if (!s) s = copy_metadata(g, w, ft, o, jb.im, err);
    for (size_t i = 0; !s && i < n; i++)
        s = rw_gguf_writer_add_tensor(w, ts[i].src->name, ts[i].type, ts[i].src->n_dims, ts[i].src->ne, NULL,
                                      convert_tensor, &ts[i], err);
    if (!s) s = rw_threadpool_new(o->n_threads > 0 ? o->n_threads : rw_physical_cores(), &jb.pool, err);
    if (!s) s = rw_gguf_writer_write(w, out_path, err);
    rw_threadpool_free(jb.pool);
    rw_gguf_writer_free(w);
    rw_imatrix_free(im);
    free(ts);
    rw_gguf_close(g);
    return s;
}
