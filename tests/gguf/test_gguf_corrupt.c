/* test_gguf_corrupt.c - malformed GGUF files get a clear error, never a
 * crash, a hang or an over-read (each buffer is an exact-size malloc, so
 * AddressSanitizer catches any read past its end).
 *
 * Part 1 builds small files by hand, one per kind of defect, and checks the
 * error. Part 2 truncates and corrupts fixture files by the hundred. */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"

/* ---- a tiny hand-made file builder ---- */

typedef struct {
    unsigned char b[4096];
    size_t n;
} buf;

static void b_u32(buf *f, uint32_t v) { for (int i = 0; i < 4; i++) f->b[f->n++] = (unsigned char)(v >> (8 * i)); }
static void b_u64(buf *f, uint64_t v) { for (int i = 0; i < 8; i++) f->b[f->n++] = (unsigned char)(v >> (8 * i)); }
static void b_str(buf *f, const char *s) {
    b_u64(f, strlen(s));
    memcpy(f->b + f->n, s, strlen(s));
    f->n += strlen(s);
}
static void b_header(buf *f, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    f->n = 0;
    memcpy(f->b, "GGUF", 4);
    f->n = 4;
    b_u32(f, version);
    b_u64(f, n_tensors);
    b_u64(f, n_kv);
}
static void b_kv_u32(buf *f, const char *key, uint32_t v) {
    b_str(f, key);
    b_u32(f, RW_GGUF_UINT32);
    b_u32(f, v);
}
static void b_tensor(buf *f, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    b_str(f, name);
    b_u32(f, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) b_u64(f, ne[d]);
    b_u32(f, type);
    b_u64(f, off);
}
static void b_pad(buf *f, size_t align, size_t data_bytes) {
    while (f->n % align) f->b[f->n++] = 0;
    memset(f->b + f->n, 0, data_bytes);
    f->n += data_bytes;
}

/* Opens an exact-size copy of the bytes; returns the status and the message. */
static rw_status open_bytes(const void *p, size_t n, rw_error *err) {
    void *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    rw_gguf *g = NULL;
    memset(err, 0, sizeof *err);
    rw_status s = rw_gguf_open_memory(copy, n, &g, err);
    if (s == RW_OK) {
        /* touch every tensor's bytes: they must lie inside the buffer */
        volatile unsigned char sum = 0;
        for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
            const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
            if (t->nbytes) sum ^= ((const unsigned char *)t->data)[0] ^ ((const unsigned char *)t->data)[t->nbytes - 1];
        }
        (void)sum;
        rw_gguf_close(g);
    } else {
        CHECK(g == NULL);
        CHECK_MSG(err->msg[0] != 0, "empty error message");
        CHECK_MSG(strchr(err->msg, '\n') == NULL, "multi-line message: %s", err->msg);
    }
    free(copy);
    return s;
}

static void expect_error(const buf *f, const char *fragment, const char *what) {
    rw_error err;
    rw_status s = open_bytes(f->b, f->n, &err);
    CHECK_MSG(s != RW_OK, "%s: accepted", what);
    CHECK_MSG(s == RW_OK || strstr(err.msg, fragment) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, fragment);
}

static void hand_made_cases(void) {
    buf f;
    uint64_t ne[4] = {32, 2, 1, 1};

    /* a valid baseline: one kv, one F32 tensor */
    b_header(&f, 3, 1, 1);
    b_kv_u32(&f, "general.alignment", 32);
    b_tensor(&f, "w", 2, ne, RW_TYPE_F32, 0);
    b_pad(&f, 32, 256);
    rw_error err;
    CHECK_MSG(open_bytes(f.b, f.n, &err) == RW_OK, "baseline: %s", err.msg);

    buf bad = f;
    memcpy(bad.b, "GGUX", 4);
    expect_error(&bad, "bad magic", "magic");
    expect_error(&(buf){.n = 3, .b = "GGU"}, "not a GGUF", "short file");
    b_header(&bad, 1, 0, 0);
    expect_error(&bad, "version 1", "v1");
    b_header(&bad, 7, 0, 0);
    expect_error(&bad, "unknown GGUF version", "v7");
    b_header(&bad, 0x03000000, 0, 0);
    expect_error(&bad, "big-endian", "big endian");
    b_header(&bad, 3, 0, UINT64_MAX);
    expect_error(&bad, "metadata count", "absurd kv count");
    b_header(&bad, 3, 1ull << 40, 0);
    expect_error(&bad, "tensor count", "absurd tensor count");

    b_header(&bad, 3, 0, 1);
    b_u64(&bad, UINT64_MAX - 3);
    b_u64(&bad, 0);
    b_u64(&bad, 0);
    expect_error(&bad, "exceeds", "key length");

    b_header(&bad, 3, 0, 1);
    b_str(&bad, "k");
    b_u32(&bad, 13);
    expect_error(&bad, "unknown value type", "kv type");

    b_header(&bad, 3, 0, 1);
    b_str(&bad, "k");
    b_u32(&bad, RW_GGUF_ARRAY);
    b_u32(&bad, RW_GGUF_UINT64);
    b_u64(&bad, 1ull << 61);
    expect_error(&bad, "claims", "array count");

    b_header(&bad, 3, 0, 1);
    b_str(&bad, "k");
    b_u32(&bad, RW_GGUF_ARRAY);
    b_u32(&bad, RW_GGUF_STRING);
    b_u64(&bad, 1000);
    expect_error(&bad, "claims", "string array count");

    b_header(&bad, 3, 0, 1); /* arrays nested too deep */
    b_str(&bad, "k");
    b_u32(&bad, RW_GGUF_ARRAY);
    for (int d = 0; d < 12; d++) {
        b_u32(&bad, RW_GGUF_ARRAY);
        b_u64(&bad, 1);
    }
    b_u32(&bad, RW_GGUF_UINT8);
    b_u64(&bad, 0);
    expect_error(&bad, "nested", "nesting");

    b_header(&bad, 3, 0, 2);
    b_kv_u32(&bad, "a", 1);
    b_kv_u32(&bad, "a", 2);
    expect_error(&bad, "duplicate key", "duplicate key");

    b_header(&bad, 3, 0, 1);
    b_kv_u32(&bad, "general.alignment", 48);
    expect_error(&bad, "power of two", "alignment");

    b_header(&bad, 3, 0, 1);
    b_str(&bad, "general.alignment");
    b_u32(&bad, RW_GGUF_STRING);
    b_str(&bad, "32");
    expect_error(&bad, "expected u32", "alignment type");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, ne, 4, 0); /* type id 4 was removed from ggml */
    b_pad(&bad, 32, 256);
    expect_error(&bad, "unknown type id", "tensor type");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 5, (uint64_t[5]){1, 1, 1, 1, 1}, RW_TYPE_F32, 0);
    b_pad(&bad, 32, 32);
    expect_error(&bad, "dimensions", "n_dims");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, (uint64_t[2]){1ull << 40, 1ull << 40}, RW_TYPE_F32, 0);
    b_pad(&bad, 32, 32);
    expect_error(&bad, "overflows", "shape overflow");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, (uint64_t[2]){33, 1}, RW_TYPE_Q8_0, 0);
    b_pad(&bad, 32, 64);
    expect_error(&bad, "block", "row not a block multiple");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, ne, RW_TYPE_F32, 16);
    b_pad(&bad, 32, 512);
    expect_error(&bad, "alignment", "misaligned offset");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, ne, RW_TYPE_F32, 1024);
    b_pad(&bad, 32, 256);
    expect_error(&bad, "outside the file", "offset out of range");

    b_header(&bad, 3, 2, 0);
    b_tensor(&bad, "a", 2, ne, RW_TYPE_F32, 0);
    b_tensor(&bad, "b", 2, ne, RW_TYPE_F32, 128);
    b_pad(&bad, 32, 512);
    expect_error(&bad, "overlap", "overlap");

    b_header(&bad, 3, 2, 0);
    b_tensor(&bad, "a", 2, ne, RW_TYPE_F32, 0);
    b_tensor(&bad, "a", 2, ne, RW_TYPE_F32, 256);
    b_pad(&bad, 32, 512);
    expect_error(&bad, "duplicate tensor", "duplicate tensor");

    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, ne, RW_TYPE_F32, 0);
    b_pad(&bad, 32, 255 - 31);
    expect_error(&bad, "outside the file", "short data");
    b_header(&bad, 3, 1, 0);
    b_tensor(&bad, "w", 2, (uint64_t[2]){1, 1}, RW_TYPE_F32, 0);
    b_pad(&bad, 32, 4); /* the data is there, its padding is not */
    expect_error(&bad, "truncated", "missing final padding");
}

/* ---- fixture files, truncated and corrupted ---- */

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int n_variants = 0;

static void mangle_file(const char *rel, int n_random_cuts, int n_corruptions) {
    size_t n;
    unsigned char *data = rw_test_read_file(rw_test_fixture_path(rel), &n);
    CHECK_MSG(data != NULL, "cannot read %s", rel);
    if (!data) return;
    rw_gguf *g;
    rw_error err;
    CHECK_MSG(rw_gguf_open_memory(data, n, &g, &err) == RW_OK, "%s: %s", rel, err.msg);
    size_t header_end = (size_t)rw_gguf_data_offset(g);
    bool has_tensors = rw_gguf_n_tensors(g) > 0;
    rw_gguf_close(g);

    /* Every cut inside the first part of the header, then random cuts. */
    size_t dense = header_end < 600 ? header_end : 600;
    for (size_t cut = 0; cut < n; cut++) {
        if (cut >= dense) {
            if (n_random_cuts-- <= 0) break;
            cut = dense + (size_t)(next_rand() % (n - dense));
        }
        rw_status s = open_bytes(data, cut, &err);
        n_variants++;
        if (has_tensors || cut < header_end - 32) CHECK_MSG(s != RW_OK, "%s cut at %zu accepted", rel, cut);
    }
    /* Random byte corruption within the header: must never crash. */
    unsigned char *copy = malloc(n);
    for (int k = 0; k < n_corruptions; k++) {
        memcpy(copy, data, n);
        int flips = 1 + (int)(next_rand() % 4);
        for (int i = 0; i < flips; i++) {
            size_t at = (size_t)(next_rand() % header_end);
            uint64_t r = next_rand();
            copy[at] = (r & 1) ? (unsigned char)(r >> 8) : (unsigned char)(copy[at] ^ (1u << ((r >> 8) % 8)));
        }
        open_bytes(copy, n, &err);
        n_variants++;
    }
    free(copy);
    free(data);
}

int main(void) {
    hand_made_cases();
    if (!rw_test_fixtures()) {
        printf("fixtures absent: only hand-made cases ran\n");
        return rw_test_done();
    }
    int cuts = rw_test_sanitized() ? 100 : 300, bad = rw_test_sanitized() ? 300 : 1000;
    mangle_file("quant/zoo-Q4_K.gguf", cuts, bad);
    mangle_file("llama/llama-Q8_0.gguf", cuts, bad);
    mangle_file("qwen35/qwen35-Q4_K_M.gguf", cuts, bad);
    mangle_file("tokenizer/ggml-vocab-tiny-bpe512-qwen2.gguf", cuts, bad);
    printf("%d corrupted variants checked\n", n_variants);
    return rw_test_done();
}
