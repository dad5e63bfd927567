/* reader.c - parse and validate a GGUF file (layout in gguf.h).
 *
 * Invariant of the cursor: pos <= size. Every read first checks that the
 * bytes it needs remain (cursor_need), and every count read from the file is
 * checked against the bytes that remain before anything is allocated for it,
 * so a hostile count can neither over-read nor make us allocate more than a
 * small multiple of the file size. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/portable.h"
#include "gguf/gguf_int.h"

#define GGUF_MAX_ARRAY_DEPTH 8  /* nested arrays deeper than this are rejected */
#define GGUF_MAX_NAME 64        /* tensor names, as ggml's GGML_MAX_NAME (incl. NUL) */
#define GGUF_MAX_KEY (1u << 16) /* keys longer than this are surely corrupt */

typedef struct {
    const uint8_t *p;
    size_t size;
    size_t pos;
    rw_error *err;
    const char *ctx; /* what is being parsed, for messages ("key 'x'") */
} cursor;

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static rw_status cursor_need(cursor *c, uint64_t n, const char *what) {
    if (n > remaining(c))
        return rw_errorf(c->err, RW_ERR_FORMAT, "truncated file: %s%s%s at offset %zu needs %" PRIu64
                         " bytes but only %zu remain", c->ctx ? c->ctx : "", c->ctx ? ": " : "", what,
                         c->pos, n, remaining(c));
    return RW_OK;
}

static uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_u64(const uint8_t *p) { return (uint64_t)load_u32(p) | (uint64_t)load_u32(p + 4) << 32; }

static rw_status read_u32(cursor *c, uint32_t *v, const char *what) {
    rw_status s = cursor_need(c, 4, what);
    if (s) return s;
    *v = load_u32(c->p + c->pos);
    c->pos += 4;
    return RW_OK;
}

static rw_status read_u64(cursor *c, uint64_t *v, const char *what) {
    rw_status s = cursor_need(c, 8, what);
    if (s) return s;
    *v = load_u64(c->p + c->pos);
    c->pos += 8;
    return RW_OK;
}

static rw_status read_str(cursor *c, rw_gguf_str *out, const char *what) {
    uint64_t len;
    size_t at = c->pos;
    rw_status s = read_u64(c, &len, what);
    if (s) return s;
    if (len > remaining(c))
        return rw_errorf(c->err, RW_ERR_FORMAT, "%s%s%s at offset %zu: length %" PRIu64
                         " exceeds the %zu bytes that remain", c->ctx ? c->ctx : "", c->ctx ? ": " : "", what,
                         at, len, remaining(c));
    out->ptr = (const char *)c->p + c->pos;
    out->len = len;
    c->pos += (size_t)len;
    return RW_OK;
}

size_t rw_gguf_type_size(rw_gguf_type t) {
    switch (t) {
    case RW_GGUF_UINT8: case RW_GGUF_INT8: case RW_GGUF_BOOL: return 1;
    case RW_GGUF_UINT16: case RW_GGUF_INT16: return 2;
    case RW_GGUF_UINT32: case RW_GGUF_INT32: case RW_GGUF_FLOAT32: return 4;
    case RW_GGUF_UINT64: case RW_GGUF_INT64: case RW_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *rw_gguf_type_name(rw_gguf_type t) {
    static const char *const names[RW_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < RW_GGUF_TYPE_COUNT ? names[t] : "?";
}

/* Decodes one little-endian scalar of type t at p into v (type set). */
static void decode_scalar(rw_gguf_type t, const uint8_t *p, rw_gguf_value *v) {
    v->type = t;
    switch (t) {
    case RW_GGUF_UINT8: case RW_GGUF_BOOL: v->u = p[0]; break;
    case RW_GGUF_INT8: v->i = (int8_t)p[0]; break;
    case RW_GGUF_UINT16: v->u = (uint16_t)(p[0] | p[1] << 8); break;
    case RW_GGUF_INT16: v->i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case RW_GGUF_UINT32: v->u = load_u32(p); break;
    case RW_GGUF_INT32: v->i = (int32_t)load_u32(p); break;
    case RW_GGUF_UINT64: v->u = load_u64(p); break;
    case RW_GGUF_INT64: v->i = (int64_t)load_u64(p); break;
    case RW_GGUF_FLOAT32: {
        uint32_t bits = load_u32(p);
        float f;
        memcpy(&f, &bits, 4);
        v->f = f;
        break;
    }
    case RW_GGUF_FLOAT64: {
        uint64_t bits = load_u64(p);
        memcpy(&v->f, &bits, 8);
        break;
    }
    default: break;
    }
}

static rw_status parse_value(cursor *c, rw_gguf *g, rw_gguf_type t, int depth, rw_gguf_value *v);

static rw_status parse_array(cursor *c, rw_gguf *g, int depth, rw_gguf_value *v) {
    size_t at = c->pos;
    uint32_t et;
    uint64_t n;
    rw_status s = read_u32(c, &et, "array element type");
    if (!s) s = read_u64(c, &n, "array length");
    if (s) return s;
    if (et >= RW_GGUF_TYPE_COUNT)
        return rw_errorf(c->err, RW_ERR_FORMAT, "%s: array at offset %zu has unknown element type %" PRIu32,
                         c->ctx, at, et);
    if (et == RW_GGUF_ARRAY && depth >= GGUF_MAX_ARRAY_DEPTH)
        return rw_errorf(c->err, RW_ERR_FORMAT, "%s: arrays nested deeper than %d at offset %zu", c->ctx,
                         GGUF_MAX_ARRAY_DEPTH, at);
    v->type = RW_GGUF_ARRAY;
    v->arr.type = (rw_gguf_type)et;
    v->arr.n = n;
    size_t esize = rw_gguf_type_size((rw_gguf_type)et);
    if (esize) {
        if (n > remaining(c) / esize)
            return rw_errorf(c->err, RW_ERR_FORMAT, "%s: array at offset %zu claims %" PRIu64
                             " elements of %zu bytes but only %zu bytes remain", c->ctx, at, n, esize, remaining(c));
        v->arr.raw = c->p + c->pos;
        c->pos += (size_t)n * esize;
        return RW_OK;
    }
    /* Strings take at least 8 bytes each, arrays at least 12: bound n first. */
    size_t min_size = et == RW_GGUF_STRING ? 8 : 12;
    if (n > remaining(c) / min_size)
        return rw_errorf(c->err, RW_ERR_FORMAT, "%s: array at offset %zu claims %" PRIu64
                         " %s elements but only %zu bytes remain", c->ctx, at, n, rw_gguf_type_name((rw_gguf_type)et),
                         remaining(c));
    if (n == 0) return RW_OK;
    v->arr.items = rw_arena_calloc(&g->arena, (size_t)n, sizeof *v->arr.items);
    if (!v->arr.items) return rw_errorf(c->err, RW_ERR_NOMEM, "%s: no memory for %" PRIu64 " array items", c->ctx, n);
    for (uint64_t i = 0; i < n; i++) {
        s = parse_value(c, g, (rw_gguf_type)et, depth + 1, &v->arr.items[i]);
        if (s) return s;
    }
    return RW_OK;
}

static rw_status parse_value(cursor *c, rw_gguf *g, rw_gguf_type t, int depth, rw_gguf_value *v) {
    if (t == RW_GGUF_STRING) {
        v->type = t;
        return read_str(c, &v->str, "string value");
    }
    if (t == RW_GGUF_ARRAY) return parse_array(c, g, depth, v);
    size_t esize = rw_gguf_type_size(t);
    rw_status s = cursor_need(c, esize, "value");
    if (s) return s;
    decode_scalar(t, c->p + c->pos, v);
    c->pos += esize;
    return RW_OK;
}

/* ---- name index ---- */

uint64_t rw_gguf__hash(const char *s) {
    return rw_hash_str(s);
}

static rw_status index_init(rw_gguf *g, gguf_name_index *ix, size_t n, rw_error *err) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    ix->slots = rw_arena_calloc(&g->arena, cap, sizeof *ix->slots);
    if (!ix->slots) return rw_errorf(err, RW_ERR_NOMEM, "no memory for an index of %zu names", n);
    ix->cap = cap;
    return RW_OK;
}

/* Inserts position pos under name; returns the position already there if the
 * name is a duplicate, else SIZE_MAX. */
static size_t index_insert(gguf_name_index *ix, const char *name, size_t pos, const char *(*name_of)(const rw_gguf *, size_t),
                           const rw_gguf *g) {
    size_t i = (size_t)rw_gguf__hash(name) & (ix->cap - 1);
    while (ix->slots[i]) {
        size_t other = ix->slots[i] - 1;
        if (strcmp(name_of(g, other), name) == 0) return other;
        i = (i + 1) & (ix->cap - 1);
    }
    ix->slots[i] = pos + 1;
    return SIZE_MAX;
}

static size_t index_find(const gguf_name_index *ix, const char *name, const char *(*name_of)(const rw_gguf *, size_t),
                         const rw_gguf *g) {
    if (!ix->cap) return SIZE_MAX;
    size_t i = (size_t)rw_gguf__hash(name) & (ix->cap - 1);
    while (ix->slots[i]) {
        size_t pos = ix->slots[i] - 1;
        if (strcmp(name_of(g, pos), name) == 0) return pos;
        i = (i + 1) & (ix->cap - 1);
    }
    return SIZE_MAX;
}

static const char *kv_name(const rw_gguf *g, size_t i) { return g->kvs[i].key; }
static const char *tensor_name(const rw_gguf *g, size_t i) { return g->tensors[i].name; }

rw_status rw_gguf__index_tensors(rw_gguf *g, rw_error *err) {
    rw_status s = index_init(g, &g->tensor_index, g->n_tensors, err);
    for (size_t i = 0; !s && i < g->n_tensors; i++) {
        size_t dup = index_insert(&g->tensor_index, g->tensors[i].name, i, tensor_name, g);
        if (dup != SIZE_MAX)
            s = rw_errorf(err, RW_ERR_FORMAT, "duplicate tensor name '%s' (tensors %zu and %zu)", g->tensors[i].name,
                          dup, i);
    }
    return s;
}

/* ---- sections ---- */

static rw_status parse_header(cursor *c, rw_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    rw_status s = cursor_need(c, 4, "magic");
    if (s) return rw_errorf(c->err, RW_ERR_FORMAT, "not a GGUF file: only %zu bytes", c->size);
    if (memcmp(c->p, "GGUF", 4) != 0)
        return rw_errorf(c->err, RW_ERR_FORMAT, "not a GGUF file: bad magic %02x %02x %02x %02x at offset 0",
                         c->p[0], c->p[1], c->p[2], c->p[3]);
    c->pos = 4;
    if ((s = read_u32(c, &g->version, "version"))) return s;
    if (g->version == 1)
        return rw_errorf(c->err, RW_ERR_UNSUPPORTED, "GGUF version 1 (32-bit counts) is not supported");
    if ((g->version & 0xffff) == 0 && g->version != 0)
        return rw_errorf(c->err, RW_ERR_UNSUPPORTED, "GGUF version %" PRIu32 " looks big-endian, which is not supported",
                         g->version);
    if (g->version != 2 && g->version != 3)
        return rw_errorf(c->err, RW_ERR_FORMAT, "unknown GGUF version %" PRIu32 " at offset 4", g->version);
    if ((s = read_u64(c, n_tensors, "tensor count"))) return s;
    if ((s = read_u64(c, n_kv, "metadata count"))) return s;
    /* A kv needs at least 8 (key length) + 4 (type) + 1 bytes; a tensor info
     * at least 8 + 4 + 8 + 4 + 8. */
    if (*n_kv > remaining(c) / 13)
        return rw_errorf(c->err, RW_ERR_FORMAT, "metadata count %" PRIu64 " at offset 16 is impossible for %zu bytes",
                         *n_kv, remaining(c));
    if (*n_tensors > remaining(c) / 32)
        return rw_errorf(c->err, RW_ERR_FORMAT, "tensor count %" PRIu64 " at offset 8 is impossible for %zu bytes",
                         *n_tensors, remaining(c));
    return RW_OK;
}

static rw_status parse_kvs(cursor *c, rw_gguf *g, uint64_t n_kv) {
    rw_status s;
    g->kvs = rw_arena_calloc(&g->arena, (size_t)n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
    if (!g->kvs) return rw_errorf(c->err, RW_ERR_NOMEM, "no memory for %" PRIu64 " metadata entries", n_kv);
    if ((s = index_init(g, &g->kv_index, (size_t)n_kv, c->err))) return s;
    char ctx[160];
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t at = c->pos;
        rw_gguf_str key;
        c->ctx = NULL;
        snprintf(ctx, sizeof ctx, "metadata entry %" PRIu64, i);
        c->ctx = ctx;
        if ((s = read_str(c, &key, "key"))) return s;
        if (key.len == 0 || key.len > GGUF_MAX_KEY || memchr(key.ptr, 0, (size_t)key.len))
            return rw_errorf(c->err, RW_ERR_FORMAT, "metadata entry %" PRIu64 " at offset %zu: invalid key (length %" PRIu64
                             ", empty, too long or holding a NUL byte)", i, at, key.len);
        rw_gguf_kv *kv = &g->kvs[i];
        kv->key = rw_arena_strndup(&g->arena, key.ptr, (size_t)key.len);
        if (!kv->key) return rw_errorf(c->err, RW_ERR_NOMEM, "no memory for a key");
        snprintf(ctx, sizeof ctx, "key '%.100s'", kv->key);
        uint32_t t;
        size_t tat = c->pos;
        if ((s = read_u32(c, &t, "value type"))) return s;
        if (t >= RW_GGUF_TYPE_COUNT)
            return rw_errorf(c->err, RW_ERR_FORMAT, "key '%.100s': unknown value type %" PRIu32 " at offset %zu", kv->key,
                             t, tat);
        if ((s = parse_value(c, g, (rw_gguf_type)t, 0, &kv->value))) return s;
        size_t dup = index_insert(&g->kv_index, kv->key, (size_t)i, kv_name, g);
        if (dup != SIZE_MAX)
            return rw_errorf(c->err, RW_ERR_FORMAT, "duplicate key '%.100s' at offset %zu (entries %zu and %" PRIu64 ")",
                             kv->key, at, dup, i);
        g->n_kv = (size_t)i + 1;
    }
    c->ctx = NULL;
    g->alignment = RW_GGUF_DEFAULT_ALIGNMENT;
    const rw_gguf_value *al = rw_gguf_get(g, "general.alignment");
    if (al) {
        if (al->type != RW_GGUF_UINT32)
            return rw_errorf(c->err, RW_ERR_FORMAT, "general.alignment has type %s, expected u32",
                             rw_gguf_type_name(al->type));
        if (al->u == 0 || (al->u & (al->u - 1)) != 0)
            return rw_errorf(c->err, RW_ERR_FORMAT, "general.alignment %" PRIu64 " is not a power of two", al->u);
        g->alignment = (uint32_t)al->u;
    }
    return RW_OK;
}

static rw_status parse_tensor_infos(cursor *c, rw_gguf *g, uint64_t n_tensors) {
    rw_status s;
    g->tensors = rw_arena_calloc(&g->arena, (size_t)n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return rw_errorf(c->err, RW_ERR_NOMEM, "no memory for %" PRIu64 " tensors", n_tensors);
    if ((s = index_init(g, &g->tensor_index, (size_t)n_tensors, c->err))) return s;
    char ctx[160];
    for (uint64_t i = 0; i < n_tensors; i++) {
        size_t at = c->pos;
        rw_gguf_tensor *t = &g->tensors[i];
        rw_gguf_str name;
        snprintf(ctx, sizeof ctx, "tensor %" PRIu64, i);
        c->ctx = ctx;
        if ((s = read_str(c, &name, "name"))) return s;
        if (name.len == 0 || name.len >= GGUF_MAX_NAME || memchr(name.ptr, 0, (size_t)name.len))
            return rw_errorf(c->err, RW_ERR_FORMAT, "tensor %" PRIu64 " at offset %zu: invalid name (length %" PRIu64
                             "; must be 1..%d bytes without NUL)", i, at, name.len, GGUF_MAX_NAME - 1);
        t->name = rw_arena_strndup(&g->arena, name.ptr, (size_t)name.len);
        if (!t->name) return rw_errorf(c->err, RW_ERR_NOMEM, "no memory for a tensor name");
        snprintf(ctx, sizeof ctx, "tensor '%s'", t->name);
        if ((s = read_u32(c, &t->n_dims, "dimension count"))) return s;
        if (t->n_dims == 0 || t->n_dims > RW_GGUF_MAX_DIMS)
            return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': %" PRIu32 " dimensions (must be 1..%d)", t->name,
                             t->n_dims, RW_GGUF_MAX_DIMS);
        for (uint32_t d = 0; d < RW_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if ((s = read_u64(c, &t->ne[d], "dimension"))) return s;
            if (t->ne[d] > (uint64_t)INT64_MAX)
                return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': dimension %" PRIu32 " is %" PRIu64 " (negative)",
                                 t->name, d, t->ne[d]);
        }
        uint32_t type;
        size_t type_at = c->pos;
        if ((s = read_u32(c, &type, "type"))) return s;
        if (!rw_dtype_valid(type))
            return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': unknown type id %" PRIu32 " at offset %zu", t->name,
                             type, type_at);
        t->type = (rw_dtype)type;
        uint64_t elems = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (t->ne[d] && elems > (uint64_t)INT64_MAX / t->ne[d])
                return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': element count overflows", t->name);
            elems *= t->ne[d];
        }
        if (t->ne[0] % rw_dtype_block_size(t->type) != 0)
            return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': row length %" PRIu64 " is not a multiple of %s's block of %zu",
                             t->name, t->ne[0], rw_dtype_name(t->type), rw_dtype_block_size(t->type));
        if (!rw_dtype_tensor_bytes(t->type, t->ne, (int)t->n_dims, &t->nbytes))
            return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': byte size overflows", t->name);
        if ((s = read_u64(c, &t->offset, "data offset"))) return s;
        if (t->offset % g->alignment != 0)
            return rw_errorf(c->err, RW_ERR_FORMAT, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                             t->name, t->offset, g->alignment);
        size_t dup = index_insert(&g->tensor_index, t->name, (size_t)i, tensor_name, g);
        if (dup != SIZE_MAX)
            return rw_errorf(c->err, RW_ERR_FORMAT, "duplicate tensor name '%s' (tensors %zu and %" PRIu64 ")", t->name,
                             dup, i);
        g->n_tensors = (size_t)i + 1;
    }
    c->ctx = NULL;
    return RW_OK;
}

static int cmp_by_offset(const void *a, const void *b, void *arg) {
    const rw_gguf_tensor *ts = arg;
    uint64_t oa = ts[*(const size_t *)a].offset, ob = ts[*(const size_t *)b].offset;
    return oa < ob ? -1 : oa > ob;
}

/* Places every tensor's data inside the file and checks that none overlap. */
static rw_status place_tensor_data(rw_gguf *g, rw_error *err) {
    uint64_t data_size = g->size > g->data_offset ? g->size - g->data_offset : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        rw_gguf_tensor *t = &g->tensors[i];
        if (g->data_offset > g->size || t->offset > data_size || t->nbytes > data_size - t->offset)
            return rw_errorf(err, RW_ERR_FORMAT, "tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") lies outside the file (data section of %" PRIu64 " bytes at offset %" PRIu64 ")",
                             t->name, t->offset, t->nbytes, data_size, g->data_offset);
        t->file_offset = g->data_offset + t->offset;
        t->data = g->data + t->file_offset;
    }
    /* As llama.cpp, the data section must also hold the zero padding that
     * follows the last tensor, so a file cut anywhere after its header is
     * rejected rather than read short. */
    uint64_t end = 0, al = g->alignment;
    for (size_t i = 0; i < g->n_tensors; i++) {
        uint64_t e = g->tensors[i].offset + g->tensors[i].nbytes;
        if (e > end) end = e;
    }
    if (g->n_tensors && (end + al - 1) / al * al > data_size)
        return rw_errorf(err, RW_ERR_FORMAT, "truncated file: the tensor data section needs %" PRIu64
                         " bytes (with padding) but only %" PRIu64 " remain after offset %" PRIu64,
                         (end + al - 1) / al * al, data_size, g->data_offset);
    if (g->n_tensors < 2) return RW_OK;
    size_t *order = malloc(g->n_tensors * sizeof *order);
    if (!order) return rw_errorf(err, RW_ERR_NOMEM, "no memory to check tensor overlap");
    for (size_t i = 0; i < g->n_tensors; i++) order[i] = i;
    rw_qsort_r(order, g->n_tensors, sizeof *order, cmp_by_offset, g->tensors);
    rw_status s = RW_OK;
    for (size_t k = 1; k < g->n_tensors; k++) {
        const rw_gguf_tensor *a = &g->tensors[order[k - 1]], *b = &g->tensors[order[k]];
        if (a->offset + a->nbytes > b->offset) {
            s = rw_errorf(err, RW_ERR_FORMAT, "tensors '%s' and '%s' overlap (data at %" PRIu64 "+%" PRIu64 " and %" PRIu64 ")",
                          a->name, b->name, a->offset, a->nbytes, b->offset);
            break;
        }
    }
    free(order);
    return s;
}

static rw_status parse_all(rw_gguf *g, rw_error *err) {
    cursor c = {.p = g->data, .size = g->size, .pos = 0, .err = err, .ctx = NULL};
    uint64_t n_tensors, n_kv;
    rw_status s = parse_header(&c, g, &n_tensors, &n_kv);
    if (!s) s = parse_kvs(&c, g, n_kv);
    if (!s) s = parse_tensor_infos(&c, g, n_tensors);
    if (s) return s;
    uint64_t a = g->alignment;
    g->data_offset = (c.pos + a - 1) / a * a;
    return place_tensor_data(g, err);
}

rw_status rw_gguf_open_memory(const void *data, size_t size, rw_gguf **out, rw_error *err) {
    *out = NULL;
    rw_gguf *g = calloc(1, sizeof *g);
    if (!g) return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    g->data = data;
    g->size = size;
    g->n_parts = 1;
    rw_status s = parse_all(g, err);
    if (s) {
        rw_gguf_close(g);
        return s;
    }
    *out = g;
    return RW_OK;
}

rw_status rw_gguf__open_one(const char *path, rw_gguf **out, rw_error *err) {
    *out = NULL;
    rw_mapped_file map;
    rw_status s = rw_mapped_file_open(path, &map, err);
    if (s) return s;
    s = rw_gguf_open_memory(map.data, map.size, out, err);
    if (s) {
        rw_mapped_file_close(&map);
        rw_error_prefix(err, "%s", path);
        return s;
    }
    (*out)->map = map;
    return RW_OK;
}

void rw_gguf_close(rw_gguf *g) {
    if (!g) return;
    for (uint32_t i = 1; g->parts && i < g->n_parts; i++) rw_gguf_close(g->parts[i - 1]);
    free(g->parts);
    rw_arena_free(&g->arena);
    rw_mapped_file_close(&g->map);
    free(g);
}

bool rw_gguf_faulted(const rw_gguf *g) {
    for (uint32_t i = 0; i < g->n_parts; i++)
        if (rw_mapped_file_faulted(&rw_gguf_part(g, i)->map)) return true;
    return false;
}

bool rw_gguf_release_pages(const rw_gguf *g, const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (uint32_t i = 0; i < g->n_parts; i++) {
        const rw_mapped_file *f = &rw_gguf_part(g, i)->map;
        const uintptr_t m0 = (uintptr_t)f->data;
        if (!f->data || a < m0 || a - m0 > f->size || n > f->size - (a - m0)) continue;
        const uintptr_t b0 = (a + page - 1) & ~(page - 1), b1 = (a + n) & ~(page - 1);
        if (b1 > b0) {
#if defined(MADV_NOHUGEPAGE)
            /* first out of huge pages: a 2 MiB mapping made for a neighbour
             * (a norm vector read between two matrices) would map these
             * pages again */
            madvise((void *)b0, b1 - b0, MADV_NOHUGEPAGE);
#endif
            madvise((void *)b0, b1 - b0,
                    MADV_DONTNEED); /* advice on a read-only file mapping: the pages stay in the file */
        }
        return true;
    }
    return false;
}

uint32_t rw_gguf_n_parts(const rw_gguf *g) { return g->n_parts; }
const rw_gguf *rw_gguf_part(const rw_gguf *g, uint32_t i) {
    return i == 0 ? g : i < g->n_parts ? g->parts[i - 1] : NULL;
}

uint64_t rw_gguf_total_size(const rw_gguf *g) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < g->n_parts; i++) n += rw_gguf_part(g, i)->size;
    return n;
}

uint32_t rw_gguf_version(const rw_gguf *g) { return g->version; }
uint32_t rw_gguf_alignment(const rw_gguf *g) { return g->alignment; }
uint64_t rw_gguf_data_offset(const rw_gguf *g) { return g->data_offset; }
const void *rw_gguf_file_data(const rw_gguf *g) { return g->data; }
size_t rw_gguf_file_size(const rw_gguf *g) { return g->size; }
size_t rw_gguf_n_kv(const rw_gguf *g) { return g->n_kv; }
const rw_gguf_kv *rw_gguf_kv_at(const rw_gguf *g, size_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }
size_t rw_gguf_n_tensors(const rw_gguf *g) { return g->n_tensors; }
const rw_gguf_tensor *rw_gguf_tensor_at(const rw_gguf *g, size_t i) { return i < g->n_tensors ? &g->tensors[i] : NULL; }

const rw_gguf_value *rw_gguf_get(const rw_gguf *g, const char *key) {
    size_t i = index_find(&g->kv_index, key, kv_name, g);
    return i == SIZE_MAX ? NULL : &g->kvs[i].value;
}

const rw_gguf_tensor *rw_gguf_find_tensor(const rw_gguf *g, const char *name) {
    size_t i = index_find(&g->tensor_index, name, tensor_name, g);
    return i == SIZE_MAX ? NULL : &g->tensors[i];
}
