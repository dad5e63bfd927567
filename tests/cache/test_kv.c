/* test_kv.c - the per-sequence KV cache: store/read in f32 (exact) and f16
 * (rounded), growth keeping stored rows, truncation, the context limit. */
#include <math.h>
#include <string.h>

#include "cache/kv.h"
#include "harness.h"

static float val(int il, int h, int64_t pos, int i, int kv) { return (float)(il * 1000 + h * 100 + i) + 0.001f * (float)pos + (float)kv * 0.5f; }

static void fill(const rw_kv_config *c, int il, int64_t pos, int64_t m, float *k, float *v) {
    for (int64_t t = 0; t < m; t++)
        for (int h = 0; h < c->n_head_kv; h++) {
            for (int i = 0; i < c->head_dim_k; i++) k[t * c->n_head_kv * c->head_dim_k + h * c->head_dim_k + i] = val(il, h, pos + t, i, 0);
            for (int i = 0; i < c->head_dim_v; i++) v[t * c->n_head_kv * c->head_dim_v + h * c->head_dim_v + i] = val(il, h, pos + t, i, 1);
        }
}

static void run(rw_kv_type type) {
    const rw_kv_config cfg = {.type = type, .n_layer = 2, .n_head_kv = 3, .head_dim_k = 8, .head_dim_v = 4, .max_ctx = 600};
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

int main(void) {
    run(RW_KV_F32);
    run(RW_KV_F16);
    rw_kv_cache *c = NULL;
    rw_error err = {0};
    const rw_kv_config bad = {.type = RW_KV_F32, .n_layer = 1, .n_head_kv = 0, .head_dim_k = 8, .head_dim_v = 8, .max_ctx = 10};
    CHECK(rw_kv_new(&bad, &c, &err) == RW_ERR_INVALID_ARG && c == NULL);
    rw_kv_free(NULL);
    return rw_test_done();
}
