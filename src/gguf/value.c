/* value.c - typed access to GGUF metadata values. */
#include <inttypes.h>
#include <string.h>

#include "gguf/gguf_int.h"

static bool is_unsigned(rw_gguf_type t) {
    return t == RW_GGUF_UINT8 || t == RW_GGUF_UINT16 || t == RW_GGUF_UINT32 || t == RW_GGUF_UINT64;
}
static bool is_signed(rw_gguf_type t) {
    return t == RW_GGUF_INT8 || t == RW_GGUF_INT16 || t == RW_GGUF_INT32 || t == RW_GGUF_INT64;
}
static bool is_float(rw_gguf_type t) { return t == RW_GGUF_FLOAT32 || t == RW_GGUF_FLOAT64; }

static rw_status lookup(const rw_gguf *g, const char *key, const rw_gguf_value **v, rw_error *err) {
    *v = rw_gguf_get(g, key);
    if (!*v) return rw_errorf(err, RW_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    return RW_OK;
}

/* Reads a value of any integer type; too_big is set for a u64 above INT64_MAX. */
static bool value_int(const rw_gguf_value *v, int64_t *out, bool *too_big) {
    *too_big = false;
    if (is_signed(v->type)) { *out = v->i; return true; }
    if (is_unsigned(v->type)) {
        if (v->u > (uint64_t)INT64_MAX) { *too_big = true; return true; }
        *out = (int64_t)v->u;
        return true;
    }
    return false;
}

rw_status rw_gguf_get_u32(const rw_gguf *g, const char *key, uint32_t *out, rw_error *err) {
    const rw_gguf_value *v;
    rw_status s = lookup(g, key, &v, err);
    if (s) return s;
    int64_t x = 0;
    bool big;
    if (!value_int(v, &x, &big))
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' has type %s, expected an integer", key,
                         rw_gguf_type_name(v->type));
    if (big || x < 0 || x > UINT32_MAX)
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' = %" PRId64 " does not fit in 32 bits", key, x);
    *out = (uint32_t)x;
    return RW_OK;
}

rw_status rw_gguf_get_i64(const rw_gguf *g, const char *key, int64_t *out, rw_error *err) {
    const rw_gguf_value *v;
    rw_status s = lookup(g, key, &v, err);
    if (s) return s;
    bool big;
    if (!value_int(v, out, &big))
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' has type %s, expected an integer", key,
                         rw_gguf_type_name(v->type));
    if (big) return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' is too large", key);
    return RW_OK;
}

rw_status rw_gguf_get_f32(const rw_gguf *g, const char *key, float *out, rw_error *err) {
    const rw_gguf_value *v;
    rw_status s = lookup(g, key, &v, err);
    if (s) return s;
    if (is_float(v->type)) *out = (float)v->f;
    else if (is_signed(v->type)) *out = (float)v->i;
    else if (is_unsigned(v->type)) *out = (float)v->u;
    else
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' has type %s, expected a number", key,
                         rw_gguf_type_name(v->type));
    return RW_OK;
}

rw_status rw_gguf_get_bool(const rw_gguf *g, const char *key, bool *out, rw_error *err) {
    const rw_gguf_value *v;
    rw_status s = lookup(g, key, &v, err);
    if (s) return s;
    if (v->type != RW_GGUF_BOOL)
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' has type %s, expected bool", key,
                         rw_gguf_type_name(v->type));
    *out = v->u != 0;
    return RW_OK;
}

rw_status rw_gguf_get_str(const rw_gguf *g, const char *key, rw_gguf_str *out, rw_error *err) {
    const rw_gguf_value *v;
    rw_status s = lookup(g, key, &v, err);
    if (s) return s;
    if (v->type != RW_GGUF_STRING)
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s' has type %s, expected string", key,
                         rw_gguf_type_name(v->type));
    *out = v->str;
    return RW_OK;
}

rw_status rw_gguf_get_cstr(const rw_gguf *g, const char *key, char *buf, size_t cap, rw_error *err) {
    rw_gguf_str str;
    rw_status s = rw_gguf_get_str(g, key, &str, err);
    if (s) return s;
    if (str.len >= cap || memchr(str.ptr, 0, (size_t)str.len))
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key '%s': string too long (%" PRIu64 " bytes) or holds a NUL",
                         key, str.len);
    memcpy(buf, str.ptr, (size_t)str.len);
    buf[str.len] = 0;
    return RW_OK;
}

bool rw_gguf_arr_int(const rw_gguf_value *v, uint64_t i, int64_t *out) {
    if (v->type != RW_GGUF_ARRAY || i >= v->arr.n || !v->arr.raw) return false;
    rw_gguf_type t = v->arr.type;
    if (!is_signed(t) && !is_unsigned(t) && t != RW_GGUF_BOOL) return false;
    size_t es = rw_gguf_type_size(t);
    const uint8_t *p = v->arr.raw + i * es;
    uint64_t u = 0;
    for (size_t b = 0; b < es; b++) u |= (uint64_t)p[b] << (8 * b);
    if (is_signed(t)) {
        int shift = 64 - 8 * (int)es;
        *out = (int64_t)(u << shift) >> shift;
        return true;
    }
    if (u > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)u;
    return true;
}

bool rw_gguf_arr_float(const rw_gguf_value *v, uint64_t i, double *out) {
    if (v->type != RW_GGUF_ARRAY || i >= v->arr.n || !v->arr.raw) return false;
    rw_gguf_type t = v->arr.type;
    if (t == RW_GGUF_FLOAT32) {
        uint32_t bits;
        memcpy(&bits, v->arr.raw + 4 * i, 4); /* files are little-endian, as is every host we build for */
        float f;
        memcpy(&f, &bits, 4);
        *out = f;
        return true;
    }
    if (t == RW_GGUF_FLOAT64) {
        memcpy(out, v->arr.raw + 8 * i, 8);
        return true;
    }
    int64_t x;
    if (!rw_gguf_arr_int(v, i, &x)) return false;
    *out = (double)x;
    return true;
}

bool rw_gguf_arr_str(const rw_gguf_value *v, uint64_t i, rw_gguf_str *out) {
    if (v->type != RW_GGUF_ARRAY || v->arr.type != RW_GGUF_STRING || i >= v->arr.n) return false;
    *out = v->arr.items[i].str;
    return true;
}
