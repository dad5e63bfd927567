/* matmul.c - tier selection and the work split of rw_matmul.
 *
 * A call runs in two parallel steps on the pool:
 *   1. every activation row is converted to the kernel's vec-dot format in
 *      a scratch buffer (one task per group of rows);
 *   2. the output is cut into tasks of (block of weight rows) x (block of
 *      activation rows); a task walks its block in kernel tiles.
 * Each output element is computed by exactly one tile call, and a tile's
 * per-element arithmetic does not depend on the tile's shape, so the way
 * the work is cut (which depends on n_rows and the thread count) never
 * changes a result.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul_int.h"

/* ---- tiers ----------------------------------------------------------- */

typedef const rw_mm_kernel *(*kernel_lookup)(rw_dtype t);

/* Kernel tables per tier; a type missing from a tier's table is served by
 * the tier below (today every tier covers every type). */
static const kernel_lookup tier_tables[RW_TIER_COUNT] = {
    [RW_TIER_REF] = rw_mm_kernel_ref,
    [RW_TIER_AVX2] = rw_mm_kernel_avx2,
    [RW_TIER_AVX512] = rw_mm_kernel_avx512,
};

static const char *const tier_names[RW_TIER_COUNT] = {"ref", "avx2", "avx512"};

const char *rw_kernel_tier_name(rw_kernel_tier t) {
    return (unsigned)t < RW_TIER_COUNT ? tier_names[t] : "?";
}

bool rw_kernel_tier_available(rw_kernel_tier t) {
    switch (t) {
    case RW_TIER_REF: return true;
    case RW_TIER_AVX2: return rw_cpu_has_avx2();
    case RW_TIER_AVX512: return rw_cpu_has_avx512();
    default: return false;
    }
}

static _Atomic int current_tier = -1; /* -1 until first use */

rw_kernel_tier rw_kernel_tier_current(void) {
    int t = atomic_load(&current_tier);
    if (t >= 0) return (rw_kernel_tier)t;
    t = RW_TIER_REF;
    for (int i = RW_TIER_COUNT - 1; i > 0; i--)
        if (rw_kernel_tier_available((rw_kernel_tier)i)) {
            t = i;
            break;
        }
    const char *env = getenv("RW_KERNELS");
    if (env && *env)
        for (int i = 0; i < RW_TIER_COUNT; i++)
            if (!strcmp(env, tier_names[i]) && rw_kernel_tier_available((rw_kernel_tier)i)) t = i;
    atomic_store(&current_tier, t);
    return (rw_kernel_tier)t;
}

bool rw_kernel_tier_set(rw_kernel_tier t) {
    if ((unsigned)t >= RW_TIER_COUNT || !rw_kernel_tier_available(t)) return false;
    atomic_store(&current_tier, (int)t);
    return true;
}

static const rw_mm_kernel *kernel_for(rw_kernel_tier tier, rw_dtype type, rw_kernel_tier *served) {
    for (int i = (int)tier; i >= 0; i--) {
        const rw_mm_kernel *k = tier_tables[i] ? tier_tables[i](type) : NULL;
        if (k) {
            if (served) *served = (rw_kernel_tier)i;
            return k;
        }
    }
    return NULL;
}

rw_kernel_tier rw_kernel_tier_for(rw_kernel_tier t_req, rw_dtype type) {
    rw_kernel_tier served = RW_TIER_REF;
    if ((unsigned)t_req >= RW_TIER_COUNT) t_req = RW_TIER_REF;
    kernel_for(t_req, type, &served);
    return served;
}

bool rw_matmul_supports(rw_dtype t) { return rw_mm_kernel_ref(t) != NULL; }

rw_dtype rw_matmul_vec_dot_type(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: case RW_TYPE_F16: case RW_TYPE_BF16: return t;
    case RW_TYPE_Q4_0: case RW_TYPE_Q5_0: case RW_TYPE_Q8_0: case RW_TYPE_IQ4_NL: return RW_TYPE_Q8_0;
    case RW_TYPE_Q4_1: case RW_TYPE_Q5_1: return RW_TYPE_Q8_1;
    default: return RW_TYPE_Q8_K;
    }
}

/* ---- the parallel driver --------------------------------------------- */

enum { MAX_TILE = 16 * 16 };

/* One group's share of a call (a plain matmul is one group). */
typedef struct {
    const uint8_t *w;
    const int32_t *x_rows, *y_rows;
    int64_t n_rows;
    int64_t row0;                 /* first converted row of this group in the scratch */
    int64_t bw, bx;               /* weight rows / activation rows per task */
    int64_t n_wblocks, n_xblocks;
    int64_t task0;                /* first task of this group */
} mm_group;

typedef struct {
    const rw_mm_kernel *k;
    size_t w_stride;
    int64_t n_in, n_out;
    const float *x;
    int64_t x_stride;
    float *y;
    int64_t y_stride;
    mm_group *groups;
    int64_t n_groups;
    int64_t total_rows;
    uint8_t *xq; /* total_rows converted rows, xq_stride bytes apart */
    size_t xq_stride;
    int64_t conv_rows; /* rows per conversion task */
} mm_job;

/* The group holding flat index v, given each group's first index. */
static const mm_group *group_of(const mm_job *j, int64_t v, bool by_task) {
    int64_t lo = 0, hi = j->n_groups - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        int64_t first = by_task ? j->groups[mid].task0 : j->groups[mid].row0;
        if (first <= v) lo = mid;
        else hi = mid - 1;
    }
    return &j->groups[lo];
}

static void convert_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const mm_job *j = ctx;
    int64_t r0 = task * j->conv_rows, r1 = r0 + j->conv_rows;
    if (r1 > j->total_rows) r1 = j->total_rows;
    for (int64_t r = r0; r < r1; r++) {
        const mm_group *g = group_of(j, r, false);
        while (r - g->row0 >= g->n_rows) g++; /* skip groups without rows */
        int64_t i = r - g->row0, src = g->x_rows ? g->x_rows[i] : i;
        j->k->convert_x(j->x + src * j->x_stride, j->xq + (size_t)r * j->xq_stride, j->n_in);
    }
}

static void matmul_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const mm_job *j = ctx;
    const mm_group *g = group_of(j, task, true);
    int64_t t = task - g->task0;
    int64_t wb = t / g->n_xblocks, xb = t % g->n_xblocks;
    int64_t o0 = wb * g->bw, o1 = o0 + g->bw < j->n_out ? o0 + g->bw : j->n_out;
    int64_t r0 = xb * g->bx, r1 = r0 + g->bx < g->n_rows ? r0 + g->bx : g->n_rows;
    /* With few activation rows the work is bound by streaming the weights:
     * weight rows are then done one after the other, so the reads form one
     * sequential stream (the tile shape never changes results, see the file
     * head); with one activation row a tile call covers up to
     * RW_MM_ROWS_1X weight rows, saving the per-call overhead. */
    const int mx = j->k->max_nx;
    const int mw = r1 - r0 == 1 ? RW_MM_ROWS_1X : r1 - r0 < mx ? 1 : j->k->max_nw;
    const uint8_t *xq = j->xq + (size_t)g->row0 * j->xq_stride;
    float out[MAX_TILE];
    for (int64_t o = o0; o < o1; o += mw) {
        int nw = (int)(o1 - o < mw ? o1 - o : mw);
        for (int64_t r = r0; r < r1; r += mx) {
            int nx = (int)(r1 - r < mx ? r1 - r : mx);
            j->k->tile(j->n_in, g->w + (size_t)o * j->w_stride, j->w_stride, nw, xq + (size_t)r * j->xq_stride,
                       j->xq_stride, nx, out);
            for (int b = 0; b < nx; b++) {
                int64_t dst = g->y_rows ? g->y_rows[r + b] : r + b;
                memcpy(j->y + dst * j->y_stride + o, out + b * nw, (size_t)nw * sizeof(float));
            }
        }
    }
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

rw_status rw_matmul_grouped(const rw_matrix *w, const rw_matmul_group *groups, int64_t n_groups, const float *x,
                            int64_t x_stride, float *y, int64_t y_stride, rw_threadpool *pool, rw_error *err) {
    if (!w || n_groups < 0 || w->n_in <= 0 || w->n_out < 0 || (n_groups && !groups))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad sizes");
    int64_t total = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        if (groups[g].n_rows < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad row count");
        if (groups[g].n_rows && !groups[g].data) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL weights");
        total += groups[g].n_rows;
    }
    if (total == 0 || w->n_out == 0) return RW_OK;
    if (!x || !y) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL pointer");
    const rw_mm_kernel *k = kernel_for(rw_kernel_tier_current(), w->type, NULL);
    if (!k) return rw_errorf(err, RW_ERR_UNSUPPORTED, "matmul: no kernel for type %s", rw_dtype_name(w->type));
    uint64_t row_bytes;
    size_t vblock = rw_dtype_block_size(rw_matmul_vec_dot_type(w->type));
    if (!rw_dtype_row_bytes(w->type, (uint64_t)w->n_in, &row_bytes) || w->n_in % (int64_t)vblock)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: row length %lld is not a multiple of %s's block",
                         (long long)w->n_in, rw_dtype_name(w->type));
    if (w->row_stride && w->row_stride < row_bytes)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: row stride %zu < row size %llu", w->row_stride,
                         (unsigned long long)row_bytes);

    mm_job j = {
        .k = k, .w_stride = w->row_stride ? w->row_stride : (size_t)row_bytes, .n_in = w->n_in,
        .n_out = w->n_out, .x = x, .x_stride = x_stride, .y = y, .y_stride = y_stride,
        .n_groups = n_groups, .total_rows = total,
    };
    j.xq_stride = (size_t)round_up((int64_t)k->x_bytes(w->n_in), 64);
    /* scratch for the group table and the converted activations; freed before returning */
    j.groups = malloc(sizeof *j.groups * (size_t)n_groups);
    j.xq = aligned_alloc(64, j.xq_stride * (size_t)total);
    if (!j.groups || !j.xq) {
        free(j.groups);
        free(j.xq);
        return rw_errorf(err, RW_ERR_NOMEM, "matmul: cannot allocate %zu bytes of scratch",
                         j.xq_stride * (size_t)total);
    }

    /* Tasks per group: activation-row blocks of up to 64 rows; weight blocks
     * small enough that each thread gets several tasks (load balance), as a
     * multiple of the tile width. */
    int n_threads = rw_threadpool_size(pool);
    int64_t row0 = 0, task0 = 0;
    for (int64_t gi = 0; gi < n_groups; gi++) {
        mm_group *g = &j.groups[gi];
        int64_t n = groups[gi].n_rows;
        *g = (mm_group){.w = groups[gi].data, .x_rows = groups[gi].x_rows, .y_rows = groups[gi].y_rows,
                        .n_rows = n, .row0 = row0, .task0 = task0};
        if (n) {
            g->bx = n < 64 ? round_up(n, k->max_nx) : 64;
            g->n_xblocks = (n + g->bx - 1) / g->bx;
            int64_t bw = w->n_out * g->n_xblocks / (8 * (int64_t)n_threads);
            if (bw > 64) bw = 64;
            g->bw = round_up(bw > 0 ? bw : 1, k->max_nw);
            g->n_wblocks = (w->n_out + g->bw - 1) / g->bw;
        } else {
            g->bx = g->bw = 1;
            g->n_xblocks = g->n_wblocks = 0;
        }
        row0 += n;
        task0 += g->n_wblocks * g->n_xblocks;
    }
    j.conv_rows = total / (4 * n_threads) > 1 ? total / (4 * n_threads) : 1;
    rw_threadpool_run(pool, convert_task, &j, (total + j.conv_rows - 1) / j.conv_rows);
    rw_threadpool_run(pool, matmul_task, &j, task0);
    free(j.xq);
    free(j.groups);
    return RW_OK;
}

rw_status rw_matmul_gather(const rw_matrix *w, const float *x, int64_t x_stride, const int32_t *x_rows, float *y,
                           int64_t y_stride, const int32_t *y_rows, int64_t n_rows, rw_threadpool *pool,
                           rw_error *err) {
    if (!w || n_rows < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad sizes");
    rw_matmul_group g = {w->data, x_rows, y_rows, n_rows};
    return rw_matmul_grouped(w, &g, 1, x, x_stride, y, y_stride, pool, err);
}

rw_status rw_matmul(const rw_matrix *w, const float *x, int64_t x_stride, int64_t n_rows, float *y,
                    int64_t y_stride, rw_threadpool *pool, rw_error *err) {
    return rw_matmul_gather(w, x, x_stride, NULL, y, y_stride, NULL, n_rows, pool, err);
}

uint64_t rw_stream_read(const void *p, size_t n) {
    if (rw_cpu_has_avx512()) return rw_stream_read_avx512(p, n);
    const uint64_t *q = p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        a ^= q[i];
        b ^= q[i + 1];
        c ^= q[i + 2];
        d ^= q[i + 3];
    }
    return a ^ b ^ c ^ d;
}
