/* kv.c - the paged, reference-counted KV cache of kv.h.
 *
 * Ownership: a page is one allocation (header + K rows + transposed V rows
 * of one layer); every cache that lists it in its tables holds one
 * reference; the last holder to let go frees it. The tables (k[il], v[il]:
 * arrays of data pointers, v[il][p] pointing into the same allocation as
 * k[il][p]) are owned by their cache.
 */
#include "cache/kv.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/quant.h"

#define P RW_KV_PAGE

typedef struct {
    atomic_int refs;
    alignas(64) unsigned char data[];
} kv_page;

struct rw_kv_cache {
    rw_kv_config cfg;
    size_t elem;       /* bytes per element: 4 (f32) or 2 (f16) */
    size_t k_bytes;    /* bytes of a page's K part (its V part follows) */
    size_t data_bytes; /* bytes of a page's K and V */
    int64_t n;         /* valid positions */
    int64_t n_pages;   /* pages held per layer */
    int64_t cap_pages; /* table length per layer */
    void ***k;         /* [n_layer][cap_pages] page data (K part), owned tables */
    void ***v;         /* [n_layer][cap_pages] the same pages' V parts */
};

static kv_page *page_of(void *data) { return (kv_page *)((char *)data - offsetof(kv_page, data)); }

static void *page_new(const rw_kv_cache *c) {
    kv_page *pg = aligned_alloc(64, sizeof(kv_page) + c->data_bytes);
    if (!pg) return NULL;
    atomic_init(&pg->refs, 1);
    memset(pg->data, 0, c->data_bytes);
    return pg->data;
}

static void page_unref(void *data) {
    if (data && atomic_fetch_sub(&page_of(data)->refs, 1) == 1) free(page_of(data));
}

static bool page_shared(void *data) { return atomic_load(&page_of(data)->refs) > 1; }

rw_status rw_kv_new(const rw_kv_config *cfg, rw_kv_cache **out, rw_error *err) {
    *out = NULL;
    if (!cfg || (cfg->type != RW_KV_F32 && cfg->type != RW_KV_F16) || cfg->n_layer < 0 || cfg->n_head_kv <= 0 ||
        cfg->head_dim_k <= 0 || cfg->head_dim_v <= 0 || cfg->max_ctx <= 0)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: invalid configuration");
    rw_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory");
    c->cfg = *cfg;
    c->elem = cfg->type == RW_KV_F32 ? sizeof(float) : sizeof(rw_f16);
    c->k_bytes = (size_t)cfg->n_head_kv * P * (size_t)cfg->head_dim_k * c->elem;
    /* rounded up to 64 bytes: aligned_alloc wants a multiple of the alignment */
    c->data_bytes = (c->k_bytes + (size_t)cfg->n_head_kv * (size_t)cfg->head_dim_v * P * c->elem + 63) & ~(size_t)63;
    c->k = calloc((size_t)(cfg->n_layer ? cfg->n_layer : 1), sizeof *c->k);
    c->v = calloc((size_t)(cfg->n_layer ? cfg->n_layer : 1), sizeof *c->v);
    if (!c->k || !c->v) {
        rw_kv_free(c);
        return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory");
    }
    *out = c;
    return RW_OK;
}

/* Lets go of pages from..n_pages-1 of every layer. */
static void drop_pages(rw_kv_cache *c, int64_t from) {
    for (int il = 0; il < c->cfg.n_layer; il++)
        for (int64_t p = from; p < c->n_pages; p++) {
            page_unref(c->k[il][p]);
            c->k[il][p] = c->v[il][p] = NULL;
        }
    if (from < c->n_pages) c->n_pages = from;
}

void rw_kv_free(rw_kv_cache *c) {
    if (!c) return;
    if (c->k && c->v) drop_pages(c, 0);
    for (int il = 0; il < c->cfg.n_layer; il++) {
        if (c->k) free(c->k[il]);
        if (c->v) free(c->v[il]);
    }
    free(c->k);
    free(c->v);
    free(c);
}

const rw_kv_config *rw_kv_get_config(const rw_kv_cache *c) { return &c->cfg; }
int64_t rw_kv_length(const rw_kv_cache *c) { return c->n; }

int64_t rw_kv_capacity(const rw_kv_cache *c) {
    const int64_t cap = c->n_pages * P;
    return cap < c->cfg.max_ctx ? cap : c->cfg.max_ctx;
}

size_t rw_kv_page_bytes(const rw_kv_cache *c) { return sizeof(kv_page) + c->data_bytes; }

/* Pages held per layer: n_pages less the released ones (every layer has
 * the same holes, so layer 0 tells). */
static int64_t held_pages(const rw_kv_cache *c) {
    if (c->cfg.n_layer == 0) return 0;
    int64_t n = 0;
    for (int64_t p = 0; p < c->n_pages; p++) n += c->k[0][p] != NULL;
    return n;
}

size_t rw_kv_bytes(const rw_kv_cache *c) {
    return rw_kv_page_bytes(c) * (size_t)held_pages(c) * (size_t)c->cfg.n_layer +
           2 * (size_t)c->cap_pages * sizeof(void *) * (size_t)c->cfg.n_layer;
}

/* Makes every layer's tables hold at least n pages; false on out of memory
 * (tables already grown stay grown, which changes nothing visible). */
static bool grow_tables(rw_kv_cache *c, int64_t n) {
    if (n <= c->cap_pages) return true;
    int64_t cap = c->cap_pages ? 2 * c->cap_pages : 8;
    if (cap < n) cap = n;
    for (int il = 0; il < c->cfg.n_layer; il++) {
        void **k = realloc(c->k[il], (size_t)cap * sizeof *k);
        if (!k) return false;
        c->k[il] = k;
        void **v = realloc(c->v[il], (size_t)cap * sizeof *v);
        if (!v) return false;
        c->v[il] = v;
    }
    c->cap_pages = cap;
    return true;
}

rw_status rw_kv_reserve(rw_kv_cache *c, int64_t n_total, rw_error *err) {
    if (n_total <= rw_kv_capacity(c)) return RW_OK;
    if (n_total > c->cfg.max_ctx)
        return rw_errorf(err, RW_ERR_CONTEXT, "kv cache: %lld positions exceed the context size %lld",
                         (long long)n_total, (long long)c->cfg.max_ctx);
    const int64_t want = (n_total + P - 1) / P;
    if (!grow_tables(c, want)) return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory");
    const int64_t had = c->n_pages;
    for (int64_t p = had; p < want; p++)
        for (int il = 0; il < c->cfg.n_layer; il++) {
            void *d = page_new(c);
            if (!d) {
                /* give back what this call added: pages had..p-1 whole, page p up to il */
                for (int j = 0; j < il; j++) page_unref(c->k[j][p]);
                c->n_pages = p;
                drop_pages(c, had);
                return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory growing to %lld positions",
                                 (long long)n_total);
            }
            c->k[il][p] = d;
            c->v[il][p] = (char *)d + c->k_bytes;
        }
    c->n_pages = want;
    return RW_OK;
}

/* Gives layer il's page p a copy of its own if another cache holds it. */
static bool make_private(rw_kv_cache *c, int il, int64_t p) {
    void *old = c->k[il][p];
    if (!page_shared(old)) return true;
    void *d = page_new(c);
    if (!d) return false;
    memcpy(d, old, c->data_bytes);
    c->k[il][p] = d;
    c->v[il][p] = (char *)d + c->k_bytes;
    page_unref(old);
    return true;
}

/* Element j of row t goes to dst[off + j * jstride]. */
static void put(void *dst, size_t elem, size_t off, size_t jstride, const float *x, int n) {
    if (elem == sizeof(float)) {
        float *d = (float *)dst + off;
        for (int j = 0; j < n; j++) d[(size_t)j * jstride] = x[j];
    } else {
        rw_f32_to_f16_row(x, (rw_f16 *)dst + off, (int64_t)jstride, n);
    }
}

rw_status rw_kv_store(rw_kv_cache *c, int il, int64_t pos, int64_t m, const float *k, int64_t k_stride, const float *v,
                      int64_t v_stride, rw_error *err) {
    if (il < 0 || il >= c->cfg.n_layer || pos < 0 || m < 0 || pos > c->n || pos + m > rw_kv_capacity(c))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: store of %lld positions at %lld (layer %d) out of range",
                         (long long)m, (long long)pos, il);
    if (m == 0) return RW_OK;
    for (int64_t p = pos / P; p <= (pos + m - 1) / P; p++)
        if (!c->k[il][p])
            return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: store at %lld into a released page", (long long)pos);
    for (int64_t p = pos / P; p <= (pos + m - 1) / P; p++)
        if (!make_private(c, il, p)) return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory copying a page");
    const int nh = c->cfg.n_head_kv, dk = c->cfg.head_dim_k, dv = c->cfg.head_dim_v;
    for (int64_t t = 0; t < m; t++) {
        const int64_t p = (pos + t) / P, r = (pos + t) % P;
        for (int h = 0; h < nh; h++) {
            put(c->k[il][p], c->elem, ((size_t)h * P + (size_t)r) * (size_t)dk, 1, k + t * k_stride + (size_t)h * dk,
                dk);
            put(c->v[il][p], c->elem, (size_t)h * (size_t)dv * P + (size_t)r, P, v + t * v_stride + (size_t)h * dv, dv);
        }
    }
    return RW_OK;
}

rw_status rw_kv_set_length(rw_kv_cache *c, int64_t n, rw_error *err) {
    if (n < 0 || n > rw_kv_capacity(c))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: length %lld out of range (capacity %lld)", (long long)n,
                         (long long)rw_kv_capacity(c));
    if (n < c->n) drop_pages(c, (n + P - 1) / P);
    c->n = n;
    return RW_OK;
}

static bool same_shape(const rw_kv_config *a, const rw_kv_config *b) {
    return a->type == b->type && a->n_layer == b->n_layer && a->n_head_kv == b->n_head_kv &&
           a->head_dim_k == b->head_dim_k && a->head_dim_v == b->head_dim_v && a->max_ctx == b->max_ctx;
}

rw_status rw_kv_share(rw_kv_cache *dst, const rw_kv_cache *src, rw_error *err) {
    if (!same_shape(&dst->cfg, &src->cfg))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: sharing between different shapes");
    if (dst == src) return RW_OK;
    const int64_t np = (src->n + P - 1) / P;
    if (!grow_tables(dst, np)) return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory");
    /* take the new references first: src and dst may hold the same pages */
    for (int il = 0; il < src->cfg.n_layer; il++)
        for (int64_t p = 0; p < np; p++)
            if (src->k[il][p]) atomic_fetch_add(&page_of(src->k[il][p])->refs, 1);
    drop_pages(dst, 0);
    for (int il = 0; il < src->cfg.n_layer && np; il++) { /* an empty cache may have no tables yet */
        memcpy(dst->k[il], src->k[il], (size_t)np * sizeof(void *));
        memcpy(dst->v[il], src->v[il], (size_t)np * sizeof(void *));
    }
    dst->n_pages = np;
    dst->n = src->n;
    return RW_OK;
}

void rw_kv_attn_view(const rw_kv_cache *c, int il, rw_attn_kv *out) {
    *out = (rw_attn_kv){
        .k_pages = (const void *const *)c->k[il],
        .v_pages = (const void *const *)c->v[il],
        .page_len = P,
        .k_head_stride = (int64_t)P * c->cfg.head_dim_k,
        .v_head_stride = (int64_t)c->cfg.head_dim_v * P,
        .v_stride = P,
        .f16 = c->cfg.type == RW_KV_F16,
    };
}

void rw_kv_each_page(const rw_kv_cache *c, void (*fn)(void *ctx, const void *page, size_t bytes), void *ctx) {
    const size_t b = rw_kv_page_bytes(c);
    for (int il = 0; il < c->cfg.n_layer; il++)
        for (int64_t p = 0; p < c->n_pages; p++)
            if (c->k[il][p]) fn(ctx, c->k[il][p], b);
}

bool rw_kv_has_page(const rw_kv_cache *c, int64_t p) {
    return p >= 0 && p < c->n_pages && (c->cfg.n_layer == 0 || c->k[0][p] != NULL);
}

void rw_kv_release_page(rw_kv_cache *c, int64_t p) {
    if (p < 0 || p >= c->n_pages) return;
    for (int il = 0; il < c->cfg.n_layer; il++) {
        page_unref(c->k[il][p]);
        c->k[il][p] = c->v[il][p] = NULL;
    }
}

void *rw_kv_k_rows_mut(rw_kv_cache *c, int il, int head, int64_t pos, int64_t *n) {
    *n = P - pos % P;
    return (char *)c->k[il][pos / P] + ((size_t)head * P + (size_t)(pos % P)) * (size_t)c->cfg.head_dim_k * c->elem;
}

void *rw_kv_v_elems_mut(rw_kv_cache *c, int il, int head, int dim, int64_t pos, int64_t *n) {
    *n = P - pos % P;
    return (char *)c->v[il][pos / P] +
           (((size_t)head * (size_t)c->cfg.head_dim_v + (size_t)dim) * P + (size_t)(pos % P)) * c->elem;
}

const void *rw_kv_k_rows(const rw_kv_cache *c, int il, int head, int64_t pos, int64_t *n) {
    return rw_kv_k_rows_mut((rw_kv_cache *)c, il, head, pos, n);
}

const void *rw_kv_v_elems(const rw_kv_cache *c, int il, int head, int dim, int64_t pos, int64_t *n) {
    return rw_kv_v_elems_mut((rw_kv_cache *)c, il, head, dim, pos, n);
}

static float get(const void *p, size_t elem) {
    return elem == sizeof(float) ? *(const float *)p : rw_f16_to_f32(*(const rw_f16 *)p);
}

void rw_kv_read_k(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst) {
    int64_t n;
    const char *row = rw_kv_k_rows(c, il, head, pos, &n);
    for (int j = 0; j < c->cfg.head_dim_k; j++) dst[j] = get(row + (size_t)j * c->elem, c->elem);
}

void rw_kv_read_v(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst) {
    int64_t n;
    for (int j = 0; j < c->cfg.head_dim_v; j++) dst[j] = get(rw_kv_v_elems(c, il, head, j, pos, &n), c->elem);
}
