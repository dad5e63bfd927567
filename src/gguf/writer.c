/* writer.c - build a GGUF file (layout in gguf.h).
 *
 * Metadata is serialized into one growing byte buffer as it is added (so the
 * writer owns no value trees); tensor data is either borrowed or produced by
 * a fill callback when the file is written. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf_int.h"

typedef struct {
    char *name; /* owned */
    rw_dtype type;
    uint32_t n_dims;
    uint64_t ne[RW_GGUF_MAX_DIMS];
    uint64_t nbytes;
    const void *data; /* borrowed, or NULL with fill */
    rw_gguf_fill_fn fill;
    void *ctx;
} writer_tensor;

struct rw_gguf_writer {
    uint8_t *kv; /* serialized kv section, owned */
    size_t kv_len, kv_cap;
    char **keys; /* owned copies, for duplicate checks */
    size_t n_kv, keys_cap;
    writer_tensor *tensors; /* owned */
    size_t n_tensors, tensors_cap;
    uint32_t alignment;
    bool pad_empty; /* pad the header of a tensorless file */
    bool failed;    /* set when an append ran out of memory */
};

rw_gguf_writer *rw_gguf_writer_new(void) {
    rw_gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->alignment = RW_GGUF_DEFAULT_ALIGNMENT;
        w->pad_empty = true;
    }
    return w;
}

void rw_gguf_writer_free(rw_gguf_writer *w) {
    if (!w) return;
    free(w->kv);
    for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

/* Grows an array so that it holds at least need elements. */
static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem) return false;
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

static void put(rw_gguf_writer *w, const void *src, size_t n) {
    if (w->failed || n == 0) return; /* src may be NULL when n is 0 */
    if (!grow((void **)&w->kv, &w->kv_cap, w->kv_len + n, 1)) {
        w->failed = true;
        return;
    }
    memcpy(w->kv + w->kv_len, src, n);
    w->kv_len += n;
}

static void put_u32(rw_gguf_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void put_u64(rw_gguf_writer *w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

static void put_str(rw_gguf_writer *w, const char *s, uint64_t len) {
    put_u64(w, len);
    put(w, s, (size_t)len);
}

static void put_scalar(rw_gguf_writer *w, const rw_gguf_value *v) {
    uint8_t b[8];
    uint64_t bits = 0;
    switch (v->type) {
    case RW_GGUF_UINT8:
    case RW_GGUF_UINT16:
    case RW_GGUF_UINT32:
    case RW_GGUF_UINT64:
    case RW_GGUF_BOOL: bits = v->u; break;
    case RW_GGUF_INT8:
    case RW_GGUF_INT16:
    case RW_GGUF_INT32:
    case RW_GGUF_INT64: bits = (uint64_t)v->i; break;
    case RW_GGUF_FLOAT32: {
        float f = (float)v->f;
        uint32_t u;
        memcpy(&u, &f, 4);
        bits = u;
        break;
    }
    case RW_GGUF_FLOAT64: memcpy(&bits, &v->f, 8); break;
    default: break;
    }
    size_t n = rw_gguf_type_size(v->type);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(bits >> (8 * i));
    put(w, b, n);
}

static bool put_value(rw_gguf_writer *w, const rw_gguf_value *v, int depth) {
    if (depth > 16) return false;
    if (v->type == RW_GGUF_STRING) {
        put_str(w, v->str.ptr, v->str.len);
    } else if (v->type == RW_GGUF_ARRAY) {
        put_u32(w, v->arr.type);
        put_u64(w, v->arr.n);
        size_t es = rw_gguf_type_size(v->arr.type);
        if (es) {
            if (v->arr.n && !v->arr.raw) return false;
            put(w, v->arr.raw, (size_t)v->arr.n * es);
        } else {
            for (uint64_t i = 0; i < v->arr.n; i++) {
                if (!v->arr.items || v->arr.items[i].type != v->arr.type) return false;
                if (!put_value(w, &v->arr.items[i], depth + 1)) return false;
            }
        }
    } else if ((unsigned)v->type < RW_GGUF_TYPE_COUNT) {
        put_scalar(w, v);
    } else {
        return false;
    }
    return true;
}

rw_status rw_gguf_writer_add_kv(rw_gguf_writer *w, const char *key, const rw_gguf_value *value, rw_error *err) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) return rw_errorf(err, RW_ERR_INVALID_ARG, "duplicate key '%s'", key);
    if (!strcmp(key, "general.alignment")) {
        if (value->type != RW_GGUF_UINT32 || value->u == 0 || (value->u & (value->u - 1)))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "general.alignment must be a u32 power of two");
        w->alignment = (uint32_t)value->u;
    }
    if (!grow((void **)&w->keys, &w->keys_cap, w->n_kv + 1, sizeof *w->keys))
        return rw_errorf(err, RW_ERR_NOMEM, "no memory for key '%s'", key);
    char *copy = strdup(key);
    if (!copy) return rw_errorf(err, RW_ERR_NOMEM, "no memory for key '%s'", key);
    size_t mark = w->kv_len;
    put_str(w, key, strlen(key));
    put_u32(w, value->type);
    if (!put_value(w, value, 0)) {
        w->kv_len = mark;
        free(copy);
        return rw_errorf(err, RW_ERR_INVALID_ARG, "key '%s': malformed value", key);
    }
    if (w->failed) {
        free(copy);
        return rw_errorf(err, RW_ERR_NOMEM, "no memory for key '%s'", key);
    }
    w->keys[w->n_kv++] = copy;
    return RW_OK;
}

#define SCALAR_ADDER(fn, ctype, gtype, field)                                  \
    rw_status fn(rw_gguf_writer *w, const char *key, ctype v, rw_error *err) { \
        rw_gguf_value val = {.type = gtype};                                   \
        val.field = v;                                                         \
        return rw_gguf_writer_add_kv(w, key, &val, err);                       \
    }
SCALAR_ADDER(rw_gguf_writer_add_u32, uint32_t, RW_GGUF_UINT32, u)
SCALAR_ADDER(rw_gguf_writer_add_i32, int32_t, RW_GGUF_INT32, i)
SCALAR_ADDER(rw_gguf_writer_add_u64, uint64_t, RW_GGUF_UINT64, u)
SCALAR_ADDER(rw_gguf_writer_add_f32, float, RW_GGUF_FLOAT32, f)
SCALAR_ADDER(rw_gguf_writer_add_bool, bool, RW_GGUF_BOOL, u)
#undef SCALAR_ADDER

rw_status rw_gguf_writer_add_str(rw_gguf_writer *w, const char *key, const char *v, rw_error *err) {
    rw_gguf_value val = {.type = RW_GGUF_STRING, .str = {v, strlen(v)}};
    return rw_gguf_writer_add_kv(w, key, &val, err);
}

/* Numeric arrays: the raw bytes are the little-endian elements, which is the
 * host layout on every target we build for. */
static rw_status add_raw_array(rw_gguf_writer *w, const char *key, rw_gguf_type t, const void *v, uint64_t n,
                               rw_error *err) {
    rw_gguf_value val = {.type = RW_GGUF_ARRAY};
    val.arr.type = t;
    val.arr.n = n;
    val.arr.raw = v;
    return rw_gguf_writer_add_kv(w, key, &val, err);
}

rw_status rw_gguf_writer_add_arr_i32(rw_gguf_writer *w, const char *key, const int32_t *v, uint64_t n, rw_error *err) {
    return add_raw_array(w, key, RW_GGUF_INT32, v, n, err);
}
rw_status rw_gguf_writer_add_arr_u32(rw_gguf_writer *w, const char *key, const uint32_t *v, uint64_t n, rw_error *err) {
    return add_raw_array(w, key, RW_GGUF_UINT32, v, n, err);
}
rw_status rw_gguf_writer_add_arr_f32(rw_gguf_writer *w, const char *key, const float *v, uint64_t n, rw_error *err) {
    return add_raw_array(w, key, RW_GGUF_FLOAT32, v, n, err);
}
rw_status rw_gguf_writer_add_arr_bool(rw_gguf_writer *w, const char *key, const bool *v, uint64_t n, rw_error *err) {
    static_assert(sizeof(bool) == 1, "bool arrays are written as bytes");
    return add_raw_array(w, key, RW_GGUF_BOOL, v, n, err);
}

rw_status rw_gguf_writer_add_arr_str(rw_gguf_writer *w, const char *key, const char *const *v, uint64_t n,
                                     rw_error *err) {
    rw_gguf_value *items = n ? calloc((size_t)n, sizeof *items) : NULL;
    if (n && !items) return rw_errorf(err, RW_ERR_NOMEM, "no memory for key '%s'", key);
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = RW_GGUF_STRING;
        items[i].str.ptr = v[i];
        items[i].str.len = strlen(v[i]);
    }
    rw_gguf_value val = {.type = RW_GGUF_ARRAY};
    val.arr.type = RW_GGUF_STRING;
    val.arr.n = n;
    val.arr.items = items;
    rw_status s = rw_gguf_writer_add_kv(w, key, &val, err);
    free(items);
    return s;
}

rw_status rw_gguf_writer_add_tensor(rw_gguf_writer *w, const char *name, rw_dtype type, uint32_t n_dims,
                                    const uint64_t *ne, const void *data, rw_gguf_fill_fn fill, void *ctx,
                                    rw_error *err) {
    size_t len = strlen(name);
    if (len == 0 || len >= 64) return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor name '%s' must be 1..63 bytes", name);
    if (n_dims == 0 || n_dims > RW_GGUF_MAX_DIMS)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor '%s': %" PRIu32 " dimensions", name, n_dims);
    if (!data == !fill) return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor '%s': give either data or fill", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name)) return rw_errorf(err, RW_ERR_INVALID_ARG, "duplicate tensor '%s'", name);
    writer_tensor t = {.type = type, .n_dims = n_dims, .data = data, .fill = fill, .ctx = ctx};
    for (uint32_t d = 0; d < RW_GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    if (!rw_dtype_tensor_bytes(type, t.ne, (int)n_dims, &t.nbytes))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "tensor '%s': bad shape for %s", name, rw_dtype_name(type));
    if (!grow((void **)&w->tensors, &w->tensors_cap, w->n_tensors + 1, sizeof *w->tensors))
        return rw_errorf(err, RW_ERR_NOMEM, "no memory for tensor '%s'", name);
    t.name = strdup(name);
    if (!t.name) return rw_errorf(err, RW_ERR_NOMEM, "no memory for tensor '%s'", name);
    w->tensors[w->n_tensors++] = t;
    return RW_OK;
}

void rw_gguf_writer_set_pad_empty(rw_gguf_writer *w, bool pad) { w->pad_empty = pad; }

enum { WRITE_CHUNK = 4 << 20 }; /* bytes of a file write (a multiple of 2 MiB) */

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static rw_status write_bytes(FILE *f, const void *p, size_t n, rw_error *err) {
    if (n && fwrite(p, 1, n, f) != n) return rw_errorf(err, RW_ERR_IO, "write failed: %s", strerror(errno));
    return RW_OK;
}

static rw_status write_zeros(FILE *f, uint64_t n, rw_error *err) {
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        rw_status s = write_bytes(f, zeros, k, err);
        if (s) return s;
        n -= k;
    }
    return RW_OK;
}

rw_status rw_gguf_writer_write_stream(rw_gguf_writer *w, FILE *f, rw_error *err) {
    if (w->failed) return rw_errorf(err, RW_ERR_NOMEM, "writer ran out of memory earlier");
    /* The header and tensor infos are staged in a second writer buffer. */
    rw_gguf_writer head = {0};
    put(&head, "GGUF", 4);
    put_u32(&head, 3);
    put_u64(&head, w->n_tensors);
    put_u64(&head, w->n_kv);
    put(&head, w->kv, w->kv_len);
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        put_str(&head, t->name, strlen(t->name));
        put_u32(&head, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(&head, t->ne[d]);
        put_u32(&head, t->type);
        put_u64(&head, offset);
        offset = align_up(offset + t->nbytes, w->alignment);
    }
    rw_status s = head.failed ? rw_errorf(err, RW_ERR_NOMEM, "no memory for the header") : RW_OK;
    if (!s) s = write_bytes(f, head.kv, head.kv_len, err);
    if (!s && (w->n_tensors || w->pad_empty))
        s = write_zeros(f, align_up(head.kv_len, w->alignment) - head.kv_len, err);
    free(head.kv);
    for (size_t i = 0; i < w->n_tensors && !s; i++) {
        const writer_tensor *t = &w->tensors[i];
        if (t->data) {
            s = write_bytes(f, t->data, (size_t)t->nbytes, err);
        } else {
            void *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
            if (!buf)
                return rw_errorf(err, RW_ERR_NOMEM, "no memory for tensor '%s' (%" PRIu64 " bytes)", t->name,
                                 t->nbytes);
            rw_gguf_tensor info = {.name = t->name, .type = t->type, .n_dims = t->n_dims, .nbytes = t->nbytes};
            memcpy(info.ne, t->ne, sizeof info.ne);
            s = t->fill(t->ctx, &info, buf, err);
            if (!s) s = write_bytes(f, buf, (size_t)t->nbytes, err);
            free(buf);
        }
        if (!s) s = write_zeros(f, align_up(t->nbytes, w->alignment) - t->nbytes, err);
    }
    return s;
}

rw_status rw_gguf_writer_write(rw_gguf_writer *w, const char *path, rw_error *err) {
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp) return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rw_status s = rw_errorf(err, RW_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return s;
    }
    /* Whole aligned WRITE_CHUNK writes: the page cache then holds the file
     * in 2 MiB folios, which a reader's mapping maps with huge pages (fewer
     * TLB misses when decode streams the weights). Writes of other sizes
     * leave small folios until the pages are evicted: measured on Linux
     * 6.18 / ext4, 1,000,000-byte writes left none of a file huge-page
     * mapped, 4 MiB writes all of it. Freed after fclose; without it the
     * writes still work. */
    char *buf = malloc(WRITE_CHUNK);
    if (buf) setvbuf(f, buf, _IOFBF, WRITE_CHUNK);
    rw_status s = rw_gguf_writer_write_stream(w, f, err);
    if (fclose(f) != 0 && !s) s = rw_errorf(err, RW_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    free(buf);
    if (!s && rename(tmp, path) != 0) s = rw_errorf(err, RW_ERR_IO, "cannot rename %s: %s", tmp, strerror(errno));
    if (s) unlink(tmp);
    free(tmp);
    return s;
}
