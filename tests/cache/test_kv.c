/* test_kv.c - the per-sequence KV cache: store/read in f32 (exact) and f16
 * (rounded), growth keeping stored rows, truncation, the context limit; page
 * sharing: a share copies no rows, a store into a shared page copies it
 * first (the other holder never sees the write), truncation and free let go
 * of pages, and the pages listed are the ones held. */
#include <math.h>
#include <string.h>

#include "cache/kv.h"
#include "harness.h"

static float val(int il, int h, int64_t pos, int i, int kv) {
    return (float)(il * 1000 + h * 100 + i) + 0.001f * (float)pos + (float)kv * 0.5f;
}

static void fill(const rw_kv_config *c, int il, int64_t pos, int64_t m, float *k, float *v) {
    for (int64_t t = 0; t < m; t++)
        for (int h = 0; h < c->n_head_kv; h++) {
            for (int i = 0; i < c->head_dim_k; i++)
                k[t * c->n_head_kv * c->head_dim_k + h * c->head_dim_k + i] = val(il, h, pos + t, i, 0);
            for (int i = 0; i < c->head_dim_v; i++)
                v[t * c->n_head_kv * c->head_dim_v + h * c->head_dim_v + i] = val(il, h, pos + t, i, 1);
        }
}

static void run(rw_kv_type type) {
    const rw_kv_config cfg = {
        .type = type, .n_layer = 2, .n_head_kv = 3, .head_dim_k = 8, .head_dim_v = 4, .max_ctx = 600};
    rw_error err = {0};
    rw_kv_cache *c = NULL;
    CHECK(rw_kv_new(&cfg, &c, &err) == RW_OK);
    if (!c) return;
    float k[600 * 24], v[600 * 12], row[8];
    /* 3 chunks: 5, 300 (forces growth past 256), 1 */
    const int64_t chunks[] = {5, 300, 1};
    int64_t pos = 0;
    for (int ci = 0; ci < 3; ci++) {
        CHECK(rw_kv_reserve(c, pos + chunks[ci], &err) == RW_OK);
        for (int il = 0; il < 2; il++) {
            fill(&cfg, il, pos, chunks[ci], k, v);
            CHECK(rw_kv_store(c, il, pos, chunks[ci], k, 24, v, 12, &err) == RW_OK);
        }
        pos += chunks[ci];
        CHECK(rw_kv_set_length(c, pos, &err) == RW_OK);
    }
    CHECK_EQ_INT(rw_kv_length(c), 306);
    CHECK(rw_kv_capacity(c) >= 306);
    int bad = 0;
    for (int il = 0; il < 2; il++)
        for (int h = 0; h < 3; h++)
            for (int64_t p = 0; p < 306; p++) {
                rw_kv_read_k(c, il, h, p, row);
                for (int i = 0; i < 8; i++) {
                    float want = val(il, h, p, i, 0);
                    bad += type == RW_KV_F32 ? row[i] != want : !(fabsf(row[i] - want) <= fabsf(want) * 0x1p-11f);
                }
                rw_kv_read_v(c, il, h, p, row);
                for (int i = 0; i < 4; i++) {
                    float want = val(il, h, p, i, 1);
                    bad += type == RW_KV_F32 ? row[i] != want : !(fabsf(row[i] - want) <= fabsf(want) * 0x1p-11f);
                }
            }
    CHECK_EQ_INT(bad, 0);
    /* truncate, then overwrite from there */
    CHECK(rw_kv_set_length(c, 10, &err) == RW_OK);
    CHECK_EQ_INT(rw_kv_length(c), 10);
    CHECK(rw_kv_store(c, 0, 12, 1, k, 24, v, 12, &err) == RW_ERR_INVALID_ARG); /* gap */
    CHECK(rw_kv_store(c, 2, 10, 1, k, 24, v, 12, &err) == RW_ERR_INVALID_ARG); /* bad layer */
    CHECK(rw_kv_reserve(c, 601, &err) == RW_ERR_CONTEXT);
    CHECK(rw_kv_reserve(c, 600, &err) == RW_OK);
    CHECK_EQ_INT(rw_kv_capacity(c), 600);
    CHECK(rw_kv_set_length(c, 601, &err) == RW_ERR_INVALID_ARG);
    rw_kv_free(c);
}

typedef struct {
    const void *id[64];
    int n;
    size_t bytes;
} page_list;

static void list_page(void *ctx, const void *page, size_t bytes) {
    page_list *l = ctx;
    if (l->n < 64) l->id[l->n++] = page;
    l->bytes += bytes;
}

static int common_pages(const rw_kv_cache *a, const rw_kv_cache *b) {
    page_list la = {0}, lb = {0};
    rw_kv_each_page(a, list_page, &la);
    rw_kv_each_page(b, list_page, &lb);
    int k = 0;
    for (int i = 0; i < la.n; i++)
        for (int j = 0; j < lb.n; j++) k += la.id[i] == lb.id[j];
    return k;
}

/* Stores positions pos..pos+m-1 of both layers with values offset by `off`. */
static void put_rows(rw_kv_cache *c, int64_t pos, int64_t m, float off) {
    const rw_kv_config *cfg = rw_kv_get_config(c);
    float k[200 * 24], v[200 * 12];
    rw_error err = {0};
    CHECK(rw_kv_reserve(c, pos + m, &err) == RW_OK);
    for (int il = 0; il < cfg->n_layer; il++) {
        fill(cfg, il, pos, m, k, v);
        for (int64_t i = 0; i < m * 24; i++) k[i] += off;
        for (int64_t i = 0; i < m * 12; i++) v[i] += off;
        CHECK(rw_kv_store(c, il, pos, m, k, 24, v, 12, &err) == RW_OK);
    }
    CHECK(rw_kv_set_length(c, pos + m, &err) == RW_OK);
}

/* True when positions [from, to) of c hold the values put_rows(off) wrote. */
static bool rows_are(const rw_kv_cache *c, int64_t from, int64_t to, float off) {
    float row[8];
    for (int il = 0; il < 2; il++)
        for (int64_t p = from; p < to; p++)
            for (int h = 0; h < 3; h++) {
                rw_kv_read_k(c, il, h, p, row);
                for (int i = 0; i < 8; i++)
                    if (row[i] != val(il, h, p, i, 0) + off) return false;
                rw_kv_read_v(c, il, h, p, row);
                for (int i = 0; i < 4; i++)
                    if (row[i] != val(il, h, p, i, 1) + off) return false;
            }
    return true;
}

static void sharing(void) {
    const rw_kv_config cfg = {
        .type = RW_KV_F32, .n_layer = 2, .n_head_kv = 3, .head_dim_k = 8, .head_dim_v = 4, .max_ctx = 600};
    rw_error err = {0};
    rw_kv_cache *a = NULL, *b = NULL, *c = NULL;
    CHECK(rw_kv_new(&cfg, &a, &err) == RW_OK && rw_kv_new(&cfg, &b, &err) == RW_OK &&
          rw_kv_new(&cfg, &c, &err) == RW_OK);
    /* a: 150 positions = pages 0, 1 full and page 2 partial, per layer */
    put_rows(a, 0, 100, 0.0f);
    put_rows(a, 100, 50, 0.0f);
    const size_t one = rw_kv_page_bytes(a);
    page_list la = {0};
    rw_kv_each_page(a, list_page, &la);
    CHECK_EQ_INT(la.n, 6);
    CHECK(la.bytes == 6 * one);
    CHECK(rw_kv_share(b, a, &err) == RW_OK);
    CHECK_EQ_INT(rw_kv_length(b), 150);
    CHECK_EQ_INT(common_pages(a, b), 6);
    CHECK(rows_are(b, 0, 150, 0.0f));
    /* b extends into the shared partial page: b copies it, a is untouched */
    put_rows(b, 150, 20, 7.0f);
    CHECK_EQ_INT(common_pages(a, b), 4);
    CHECK(rows_are(a, 0, 150, 0.0f) && rows_are(b, 0, 150, 0.0f) && rows_are(b, 150, 170, 7.0f));
    CHECK_EQ_INT(rw_kv_length(a), 150);
    /* c shares b, rewinds into page 1 (shared with a and b) and writes there */
    CHECK(rw_kv_share(c, b, &err) == RW_OK);
    CHECK(rw_kv_set_length(c, 70, &err) == RW_OK);
    page_list lc = {0};
    rw_kv_each_page(c, list_page, &lc);
    CHECK_EQ_INT(lc.n, 4); /* pages past position 70 let go */
    put_rows(c, 70, 30, -3.0f);
    CHECK(rows_are(c, 0, 70, 0.0f) && rows_are(c, 70, 100, -3.0f));
    CHECK(rows_are(a, 0, 150, 0.0f) && rows_are(b, 0, 150, 0.0f) && rows_are(b, 150, 170, 7.0f));
    CHECK_EQ_INT(common_pages(a, c), 2); /* page 0 of each layer */
    /* a goes away: b and c keep what they hold */
    rw_kv_free(a);
    CHECK(rows_are(b, 0, 150, 0.0f) && rows_are(c, 0, 70, 0.0f));
    /* a share onto a cache that holds some of the same pages */
    CHECK(rw_kv_share(c, b, &err) == RW_OK);
    CHECK(rows_are(c, 0, 150, 0.0f) && rows_are(c, 150, 170, 7.0f));
    CHECK(rw_kv_share(c, c, &err) == RW_OK);
    CHECK_EQ_INT(common_pages(b, c), 6);
    /* different shapes do not share */
    const rw_kv_config other = {
        .type = RW_KV_F16, .n_layer = 2, .n_head_kv = 3, .head_dim_k = 8, .head_dim_v = 4, .max_ctx = 600};
    rw_kv_cache *d = NULL;
    CHECK(rw_kv_new(&other, &d, &err) == RW_OK);
    CHECK(rw_kv_share(d, b, &err) == RW_ERR_INVALID_ARG);
    rw_kv_free(b), rw_kv_free(c), rw_kv_free(d);
}

/* Released pages (a sliding-window layer's): holes that sharing, bytes and
 * each_page skip, that a store refuses, and that a truncation below them
 * and a reserve bring back as fresh pages. */
static void holes(void) {
    const rw_kv_config cfg = {
        .type = RW_KV_F32, .n_layer = 2, .n_head_kv = 3, .head_dim_k = 8, .head_dim_v = 4, .max_ctx = 600};
    rw_error err = {0};
    rw_kv_cache *a = NULL, *b = NULL;
    CHECK(rw_kv_new(&cfg, &a, &err) == RW_OK && rw_kv_new(&cfg, &b, &err) == RW_OK);
    put_rows(a, 0, 200, 0.0f); /* pages 0..3 per layer */
    const size_t one = rw_kv_page_bytes(a), full = rw_kv_bytes(a);
    rw_kv_release_page(a, 1);
    rw_kv_release_page(a, 1); /* twice: no-op */
    rw_kv_release_page(a, 9); /* not held: no-op */
    CHECK(!rw_kv_has_page(a, 1) && rw_kv_has_page(a, 0) && rw_kv_has_page(a, 2) && !rw_kv_has_page(a, 4));
    CHECK(rw_kv_bytes(a) == full - 2 * one);
    page_list la = {0};
    rw_kv_each_page(a, list_page, &la);
    CHECK_EQ_INT(la.n, 6);
    CHECK(rw_kv_share(b, a, &err) == RW_OK);
    CHECK(!rw_kv_has_page(b, 1) && rw_kv_has_page(b, 3));
    CHECK_EQ_INT(common_pages(a, b), 6);
    CHECK(rows_are(b, 0, 64, 0.0f) && rows_are(b, 128, 200, 0.0f));
    float k[3 * 8] = {0}, v[3 * 4] = {0};
    CHECK(rw_kv_store(a, 0, 70, 1, k, 0, v, 0, &err) == RW_ERR_INVALID_ARG); /* into the hole */
    /* a truncation into the hole, then a reserve: a fresh page there */
    CHECK(rw_kv_set_length(b, 100, &err) == RW_OK);
    CHECK(!rw_kv_has_page(b, 1) && !rw_kv_has_page(b, 2));
    CHECK(rw_kv_set_length(b, 64, &err) == RW_OK);
    put_rows(b, 64, 100, 5.0f);
    CHECK(rw_kv_has_page(b, 1) && rows_are(b, 0, 64, 0.0f) && rows_are(b, 64, 164, 5.0f));
    CHECK(rows_are(a, 128, 200, 0.0f)); /* a untouched */
    rw_kv_free(a), rw_kv_free(b);
}

int main(void) {
    sharing();
    holes();
    run(RW_KV_F32);
    run(RW_KV_F16);
    rw_kv_cache *c = NULL;
    rw_error err = {0};
    const rw_kv_config bad = {
        .type = RW_KV_F32, .n_layer = 1, .n_head_kv = 0, .head_dim_k = 8, .head_dim_v = 8, .max_ctx = 10};
    CHECK(rw_kv_new(&bad, &c, &err) == RW_ERR_INVALID_ARG && c == NULL);
    rw_kv_free(NULL);
    return rw_test_done();
}
