/* matmul.c - the kernel of each type under the tier in use (the tier and
 * numerics themselves are kernel_tier.c's) and the work split of rw_matmul.
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
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/matmul_int.h"
#include "kernels/quant.h"

/* ---- tiers ----------------------------------------------------------- */

typedef const rw_mm_kernel *(*kernel_lookup)(rw_dtype t);

/* Kernel tables per tier; a type missing from a tier's table is served by
 * the tier below (tier_below). The x86 tables exist in x86 builds only,
 * the NEON ones in AArch64 builds only (the Makefile compiles each ISA's
 * files for its own architecture). */
#if defined(__x86_64__)
#define X86_TABLE(f) f
#else
#define X86_TABLE(f) NULL
#endif
#if defined(__aarch64__)
#define ARM_TABLE(f) f
#else
#define ARM_TABLE(f) NULL
#endif

static const kernel_lookup tier_tables[RW_TIER_COUNT] = {
    [RW_TIER_REF] = rw_mm_kernel_ref,
    [RW_TIER_AVX2] = X86_TABLE(rw_mm_kernel_avx2),
    [RW_TIER_AVX512] = X86_TABLE(rw_mm_kernel_avx512),
    [RW_TIER_NEON] = ARM_TABLE(rw_mm_kernel_neon),
    [RW_TIER_AMX] = X86_TABLE(rw_mm_kernel_amx),
};

/* The tier whose kernels serve what a tier lacks (the reference serves all). */
static const rw_kernel_tier tier_below[RW_TIER_COUNT] = {
    [RW_TIER_REF] = RW_TIER_REF,  [RW_TIER_AVX2] = RW_TIER_REF,   [RW_TIER_AVX512] = RW_TIER_AVX2,
    [RW_TIER_NEON] = RW_TIER_REF, [RW_TIER_AMX] = RW_TIER_AVX512,
};

/* Kernels that sum in ggml's order (RW_NUMERICS_GGML), per tier; types they
 * lack use the tables above. */
static const kernel_lookup ggml_tables[RW_TIER_COUNT] = {
    [RW_TIER_REF] = rw_mm_kernel_ref_ggml,
    [RW_TIER_AVX2] = X86_TABLE(rw_mm_kernel_avx2_ggml),
    [RW_TIER_AVX512] = X86_TABLE(rw_mm_kernel_avx512_ggml),
    [RW_TIER_NEON] = ARM_TABLE(rw_mm_kernel_neon_ggml),
};

static const rw_mm_kernel *lookup(const kernel_lookup *tables, rw_kernel_tier t, rw_dtype type) {
    return tables[t] ? tables[t](type) : NULL;
}

static const rw_mm_kernel *kernel_for(rw_kernel_tier tier, rw_dtype type, rw_kernel_tier *served) {
    /* ggml numerics: a ggml-order kernel of any tier down the chain comes
     * before a kernel of the other order; auto and fast: our order */
    if (rw_numerics_current() == RW_NUMERICS_GGML)
        for (rw_kernel_tier t = tier;; t = tier_below[t]) {
            const rw_mm_kernel *k = lookup(ggml_tables, t, type);
            if (k) {
                if (served) *served = t;
                return k;
            }
            if (t == RW_TIER_REF) break;
        }
    const rw_mm_kernel *k = lookup(tier_tables, tier, type);
    if (k) {
        if (served) *served = tier;
        return k;
    }
    return tier == RW_TIER_REF ? NULL : kernel_for(tier_below[tier], type, served);
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
    case RW_TYPE_F32:
    case RW_TYPE_F16:
    case RW_TYPE_BF16: return t;
    case RW_TYPE_Q4_0:
    case RW_TYPE_Q5_0:
    case RW_TYPE_Q8_0:
    case RW_TYPE_IQ4_NL:
    case RW_TYPE_MXFP4: return RW_TYPE_Q8_0;
    case RW_TYPE_Q4_1:
    case RW_TYPE_Q5_1: return RW_TYPE_Q8_1;
    default: return RW_TYPE_Q8_K;
    }
}

/* ---- the parallel driver --------------------------------------------- */

enum {
    MAX_TILE =
        4096,      /* outputs of one tile call: max_nw * max(max_nx, RW_MM_QUAD * max_nq) or RW_MM_ROWS_1X * max_nx_1x,
                      * (g_max_nw or max_nw) * RW_MM_GROUP * max_ng, p_rows * max_np */
    PACK_MIN = 4,  /* fewest rows of a group that use the kernel's group form */
    QUAD_MAX = 32, /* most rows of a group that use the kernel's quad form (measured on Zen 4:
                      * for Q8_0 it beats the group form up to 32 rows, and ties at 64) */
    PANEL_ROWS = 256,       /* activation rows of one panel-form task (a multiple of every kernel's max_np) */
    FLY_MIN = 32,           /* fewest rows that pack panels on the fly for a matrix without stored ones
                       * (unless the kernel sets fly_min_rows) */
    SERIAL_CONVERT = 16384, /* activation elements up to which the caller converts them alone */
    STREAM_TASKS = 2,       /* tasks per thread of a weight-streaming group (one block of few rows):
                             * 2 leaves some balance when a thread starts late; 1 and 2 measured alike */
};

/* A packed form of the kernel (group, quad or panel form): rows per slot,
 * the most slots per tile call, the unit of weight rows per tile call, and
 * its functions. */
typedef struct {
    int rows, max_slots, nw;
    void (*convert)(const float *const *rows, int n_rows, void *xg, int64_t n_in);
    void (*tile)(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xg, size_t xg_stride, int nx,
                 float *out, int64_t out_stride);
} mm_form;

/* One matrix-and-rows piece of a call (an mm_group before the work split). */
typedef struct {
    const uint8_t *w; /* the matrix's first row */
    size_t w_stride;
    const uint8_t *panels; /* its rows repacked for the panel form (stored panels where the kernel has them), or NULL */
    bool can_fly;          /* without panels, it may pack them on the fly (RW_PANELS is not 0) */
    size_t p_stride;       /* panel bytes per row: a panel spans p_rows * p_stride bytes */
    size_t s_stride;       /* stored panels' bytes per row (the dense row size) */
    int64_t n_out;
    float *y;
    int64_t y_stride;
    const int32_t *x_rows, *y_rows;
    int64_t n_rows;
} mm_spec;

/* One group's share of a call (a plain matmul is one group). Its activation
 * rows are converted into "slots" of the scratch: one row each, or, when the
 * group is packed (form non-NULL: the kernel's group or quad form),
 * form->rows rows each. */
typedef struct {
    mm_spec sp;              /* the matrix and its rows */
    const mm_form *form;     /* NULL: one row per slot, the kernel's tile */
    bool fly;                /* panel form packed on the fly: sp.w is the dense rows (or stored panels: fly_stored) */
    bool fly_stored;         /* packed on the fly by expanding stored panels (the kernel's expand_s) */
    int64_t slot0, n_slots;  /* this group's slots in the call's slot numbering */
    size_t off0, slot_bytes; /* byte offset of its first slot in the scratch; bytes per slot */
    int64_t bw, bx;          /* weight rows / activation rows per task */
    int64_t n_wblocks, n_xblocks;
    int64_t task0; /* first task of this group */
} mm_group;

typedef struct {
    const rw_mm_kernel *k;
    int64_t n_in;
    const float *x;
    int64_t x_stride;
    mm_group *groups;
    int64_t n_groups;
    int64_t total_slots;
    uint8_t *xq;    /* the converted activations */
    uint8_t *wpack; /* per thread, one panel packed on the fly (wpack_bytes each), or NULL */
    size_t wpack_bytes;
    int64_t conv_slots; /* slots per conversion task */
} mm_job;

/* The last group whose first slot (or task) is <= v; groups without slots
 * (tasks) share their first index with the next one, so callers skip
 * forward past empty groups. */
static const mm_group *group_of(const mm_job *j, int64_t v, bool by_task) {
    int64_t lo = 0, hi = j->n_groups - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        int64_t first = by_task ? j->groups[mid].task0 : j->groups[mid].slot0;
        if (first <= v) lo = mid;
        else hi = mid - 1;
    }
    return &j->groups[lo];
}

static const float *x_row(const mm_job *j, const mm_group *g, int64_t i) {
    return j->x + (g->sp.x_rows ? g->sp.x_rows[i] : i) * j->x_stride;
}

static void convert_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const mm_job *j = ctx;
    int64_t s0 = task * j->conv_slots, s1 = s0 + j->conv_slots;
    if (s1 > j->total_slots) s1 = j->total_slots;
    for (int64_t s = s0; s < s1; s++) {
        const mm_group *g = group_of(j, s, false);
        while (s - g->slot0 >= g->n_slots) g++; /* skip groups without slots */
        int64_t i = s - g->slot0;
        uint8_t *dst = j->xq + g->off0 + (size_t)i * g->slot_bytes;
        if (!g->form) {
            j->k->convert_x(x_row(j, g, i), dst, j->n_in);
            continue;
        }
        const float *rows[RW_MM_GROUP];
        const int per = g->form->rows;
        int n = 0;
        for (int64_t r = i * per; r < g->sp.n_rows && n < per; r++) rows[n++] = x_row(j, g, r);
        g->form->convert(rows, n, dst, j->n_in);
    }
}

static void store_rows(const mm_job *j, const mm_group *g, int64_t r, int nx, int64_t o, int nw, const float *out) {
    for (int b = 0; b < nx; b++) {
        float *dst = g->sp.y + (g->sp.y_rows ? g->sp.y_rows[r + b] : r + b) * g->sp.y_stride + o;
        for (int i = 0; i < nw; i++) dst[i] = out[b * nw + i]; /* nw is small: no memcpy call */
    }
}

static void matmul_task(void *ctx, int64_t task, int thread) {
    const mm_job *j = ctx;
    const mm_group *g = group_of(j, task, true);
    while (task - g->task0 >= g->n_wblocks * g->n_xblocks) g++; /* skip groups without tasks */
    int64_t t = task - g->task0;
    int64_t wb = t / g->n_xblocks, xb = t % g->n_xblocks;
    int64_t o0 = wb * g->bw, o1 = o0 + g->bw < g->sp.n_out ? o0 + g->bw : g->sp.n_out;
    int64_t r0 = xb * g->bx, r1 = r0 + g->bx < g->sp.n_rows ? r0 + g->bx : g->sp.n_rows;
    const uint8_t *xq = j->xq + g->off0;
    float out[MAX_TILE];
    if (g->form) { /* r0 is a multiple of the form's rows (bx is), o0 of its nw (bw is) */
        const int per = g->form->rows, mw = g->form->nw, mr = per * g->form->max_slots;
        for (int64_t o = o0; o < o1; o += mw) {
            int nw = (int)(o1 - o < mw ? o1 - o : mw);
            const uint8_t *w = g->sp.w + (size_t)o * g->sp.w_stride;
            size_t ws = g->sp.w_stride;
            /* packing on the fly: the next panel's dense rows are fetched
             * into the cache a share per tile call while this panel's
             * products run, so that packing it does not wait on memory */
            const char *next = NULL;
            size_t next_bytes = 0, next_share = 0;
            if (g->fly) { /* this panel (mw = the kernel's p_rows) packed into the thread's scratch */
                uint8_t *pw = j->wpack + (size_t)thread * j->wpack_bytes;
                (g->fly_stored ? j->k->expand_s : j->k->pack_p)(w, g->sp.w_stride, j->n_in, nw, pw);
                w = pw;
                ws = g->sp.p_stride;
                if (o + mw < o1) {
                    const int64_t nn = o1 - o - mw < mw ? o1 - o - mw : mw;
                    next = (const char *)(g->sp.w + (size_t)(o + mw) * g->sp.w_stride);
                    next_bytes = (size_t)nn * g->sp.w_stride;
                    next_share = next_bytes / (size_t)((r1 - r0 + mr - 1) / mr) + 64;
                }
            }
            for (int64_t r = r0; r < r1; r += mr) {
                int nx = (int)(r1 - r < mr ? r1 - r : mr);
                if (next) {
                    const size_t b1 = next_share < next_bytes ? next_share : next_bytes;
                    for (size_t b = 0; b < b1; b += 64) __builtin_prefetch(next + b, 0, 2);
                    next += b1, next_bytes -= b1;
                    if (!next_bytes) next = NULL;
                }
                const uint8_t *xg = xq + (size_t)(r / per) * g->slot_bytes;
                if (!g->sp.y_rows) { /* straight into y */
                    g->form->tile(j->n_in, w, ws, nw, xg, g->slot_bytes, nx, g->sp.y + r * g->sp.y_stride + o,
                                  g->sp.y_stride);
                    continue;
                }
                g->form->tile(j->n_in, w, ws, nw, xg, g->slot_bytes, nx, out, nw);
                store_rows(j, g, r, nx, o, nw, out);
            }
        }
        return;
    }
    /* With few activation rows the work is bound by streaming the weights:
     * weight rows are then done one after the other, so the reads form one
     * sequential stream (the tile shape never changes results, see the file
     * head); with one activation row (or up to the kernel's max_nx_1x) a
     * tile call covers up to RW_MM_ROWS_1X weight rows, saving the
     * per-call overhead and reading the weights once for all rows. */
    if (j->k->tile_many && r1 - r0 >= j->k->many_min_rows) {
        for (int64_t o = o0; o < o1; o += j->k->many_nw) {
            const int nw = (int)(o1 - o < j->k->many_nw ? o1 - o : j->k->many_nw);
            for (int64_t r = r0; r < r1; r += j->k->many_nx) {
                const int nx = (int)(r1 - r < j->k->many_nx ? r1 - r : j->k->many_nx);
                j->k->tile_many(j->n_in, g->sp.w + (size_t)o * g->sp.w_stride, g->sp.w_stride, nw,
                                xq + (size_t)r * g->slot_bytes, g->slot_bytes, nx, out);
                store_rows(j, g, r, nx, o, nw, out);
            }
        }
        return;
    }
    const int nx1 = j->k->max_nx_1x ? j->k->max_nx_1x : 1;
    const bool long_run = r1 - r0 <= nx1, two_runs = nx1 > 1 && !long_run && r1 - r0 <= 2 * nx1;
    const int mx = long_run || two_runs ? nx1 : j->k->max_nx;
    const int mw = long_run ? RW_MM_ROWS_1X : two_runs ? 64 : r1 - r0 < mx ? 1 : j->k->max_nw;
    for (int64_t o = o0; o < o1; o += mw) {
        int nw = (int)(o1 - o < mw ? o1 - o : mw);
        for (int64_t r = r0; r < r1; r += mx) {
            int nx = (int)(r1 - r < mx ? r1 - r : mx);
            j->k->tile(j->n_in, g->sp.w + (size_t)o * g->sp.w_stride, g->sp.w_stride, nw,
                       xq + (size_t)r * g->slot_bytes, g->slot_bytes, nx, out);
            store_rows(j, g, r, nx, o, nw, out);
        }
    }
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Bytes per weight row in k's panels packed on the fly (row_bytes: the
 * dense row size). */
static size_t panel_row_bytes(const rw_mm_kernel *k, int64_t n_in, uint64_t row_bytes) {
    return k->p_wbytes ? k->p_wbytes(n_in) : (size_t)row_bytes;
}

/* Bytes per weight row in k's stored panels (rw_matmul_pack). */
static size_t stored_row_bytes(const rw_mm_kernel *k, int64_t n_in, uint64_t row_bytes) {
    return k->pack_s ? (size_t)row_bytes : panel_row_bytes(k, n_in, row_bytes);
}

/* A panel buffer starts with PANEL_HEADER bytes naming the kernel that
 * packed it (rw_matmul_pack) and the rows it holds: kernels of one type lay
 * panels out differently (tiers, numerics), so panels packed for another
 * kernel than the one a call runs are not used (the call takes the other
 * forms); and a matrix that points to panels of other rows (a copy of a
 * matrix made a view of some rows) gets them only for its own rows. */
enum { PANEL_HEADER = 64 };

typedef struct {
    const rw_mm_kernel *packer;
    const void *data; /* the rows packed, n_out of them, stride bytes apart */
    size_t stride;
    int64_t n_out;
} panel_header;

/* The panels (rw_matmul_pack) of the n_out rows at data, stride bytes
 * apart: rows packed by k, from a whole panel on; else NULL. */
static const uint8_t *panels_of(const rw_mm_kernel *k, const void *panels, const void *data, size_t stride,
                                int64_t n_in, uint64_t row_bytes, int64_t n_out) {
    if (!panels) return NULL;
    panel_header h;
    memcpy(&h, panels, sizeof h);
    const uintptr_t a = (uintptr_t)data, b = (uintptr_t)h.data;
    if (h.packer != k || h.stride != stride || a < b || (a - b) % stride) return NULL;
    const uint64_t r0 = (a - b) / stride;
    if (r0 % (uint64_t)k->p_rows || r0 + (uint64_t)n_out > (uint64_t)h.n_out) return NULL;
    return (const uint8_t *)panels + PANEL_HEADER + r0 * stored_row_bytes(k, n_in, row_bytes);
}

/* False when RW_PANELS=0 (for comparisons): no panel form, stored or
 * packed on the fly. Read once. */
static bool panels_enabled(void) {
    static _Atomic int on = -1;
    int v = atomic_load(&on);
    if (v < 0) {
        const char *env = getenv("RW_PANELS");
        v = !(env && !strcmp(env, "0"));
        atomic_store(&on, v);
    }
    return v;
}

/* Checks w against the kernel rules; *row_bytes gets its packed row size. */
static rw_status check_matrix(const rw_matrix *w, uint64_t *row_bytes, rw_error *err) {
    size_t vblock = rw_dtype_block_size(rw_matmul_vec_dot_type(w->type));
    if (!rw_dtype_row_bytes(w->type, (uint64_t)w->n_in, row_bytes) || w->n_in % (int64_t)vblock)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: row length %lld is not a multiple of %s's block",
                         (long long)w->n_in, rw_dtype_name(w->type));
    if (w->row_stride && w->row_stride < *row_bytes)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: row stride %zu < row size %llu", w->row_stride,
                         (unsigned long long)*row_bytes);
    return RW_OK;
}

/* Runs the pieces; with share_x every piece multiplies the same rows
 * (x_rows NULL, the same n_rows), which are converted once (piece 0's). */
static rw_status run_specs(const rw_mm_kernel *k, int64_t n_in, const mm_spec *specs, int64_t n_specs, bool share_x,
                           const float *x, int64_t x_stride, rw_threadpool *pool, rw_error *err) {
    mm_job j = {.k = k, .n_in = n_in, .x = x, .x_stride = x_stride, .n_groups = n_specs};
    const size_t row_slot = (size_t)round_up((int64_t)k->x_bytes(n_in), 64);
    const mm_form group = {RW_MM_GROUP, k->max_ng, k->g_max_nw ? k->g_max_nw : k->max_nw, k->convert_g, k->tile_g},
                  quad = {RW_MM_QUAD, k->max_nq, k->max_nw, k->convert_q, k->tile_q},
                  panel = {1, k->max_np, k->p_rows, k->convert_p, k->tile_p},
                  spanel = {1, k->max_np, k->p_rows, k->convert_p, k->tile_s},
                  tpanel = {1, k->max_np, k->p_rows, k->convert_p, k->tile_t};
    const size_t group_slot = k->g_bytes ? (size_t)round_up((int64_t)k->g_bytes(n_in), 64) : 0;
    const size_t quad_slot = k->q_bytes ? (size_t)round_up((int64_t)k->q_bytes(n_in), 64) : 0;
    const size_t panel_slot = k->p_bytes ? (size_t)round_up((int64_t)k->p_bytes(n_in), 64) : 0;
    const int64_t panel_min = k->p_min_rows ? k->p_min_rows : 2;
    const int64_t fly_min = k->fly_min_rows ? k->fly_min_rows : FLY_MIN;
    j.groups = malloc(sizeof *j.groups * (size_t)n_specs); /* freed before returning */
    if (!j.groups) return rw_errorf(err, RW_ERR_NOMEM, "matmul: out of memory");

    /* Tasks per group: activation-row blocks of up to 64 rows; weight blocks
     * small enough that each thread gets several tasks (load balance), as a
     * multiple of the tile width. */
    int n_threads = rw_threadpool_size(pool);
    /* Groups with work: in a grouped product (a mixture of experts' pass)
     * the threads share out the groups, so each group's stream of weights
     * can be that many times longer (below). */
    int64_t live = 0;
    for (int64_t gi = 0; gi < n_specs && !share_x; gi++) live += specs[gi].n_rows > 0 && specs[gi].n_out > 0;
    if (live < 1) live = 1;
    int64_t slot0 = 0, task0 = 0, total = 0;
    size_t off = 0;
    for (int64_t gi = 0; gi < n_specs; gi++) {
        mm_group *g = &j.groups[gi];
        const mm_spec *sp = &specs[gi];
        int64_t n = sp->n_rows;
        /* from 2 rows the panel form if the matrix has panels (measured on
         * Zen 4 for Q8_0: faster than the quad form at every row count and
         * than the group form by 1.4-1.5x from 32 to 256 rows; one row keeps
         * the one-row tile, which streams the rows 10% faster); else the
         * quad form for 2 .. QUAD_MAX rows, the group form from PACK_MIN
         * rows beyond that, else the tile */
        /* stored panels of the same bytes as the rows (k->tile_s) take
         * every row count: the matrix has no other copy in use */
        const bool stored = sp->panels && k->p_bytes && (k->tile_s ? n >= 1 : n >= panel_min);
        /* many rows over stored panels: each panel expanded per call into
         * the panel form's layout, as the rows would be packed */
        const bool fly_stored =
            stored && k->tile_s && k->expand_s && n >= (k->expand_min_rows ? k->expand_min_rows(n_in) : fly_min);
        const bool fly =
            fly_stored || (!stored && sp->can_fly && k->p_bytes && k->pack_p && n >= panel_min && n >= fly_min);
        /* few rows without stored panels: the rows put into their layout
         * per call (k->tile_t) */
        const bool trans = !stored && !fly && sp->can_fly && k->tile_t && n >= k->t_min_rows && n <= k->t_max_rows;
        const mm_form *form = stored && k->tile_s && !fly_stored                                        ? &spanel
                              : trans                                                                   ? &tpanel
                              : stored || fly                                                           ? &panel
                              : n >= 2 && n <= (k->q_max_rows ? k->q_max_rows : QUAD_MAX) && k->q_bytes ? &quad
                              : k->g_bytes && n >= (k->g_min_rows ? k->g_min_rows : PACK_MIN)           ? &group
                                                                                                        : NULL;
        *g = (mm_group){.sp = *sp,
                        .form = form,
                        .slot0 = slot0,
                        .off0 = off,
                        .task0 = task0,
                        .slot_bytes = form == &panel || form == &spanel || form == &tpanel ? panel_slot
                                      : form == &quad                                      ? quad_slot
                                      : form                                               ? group_slot
                                                                                           : row_slot};
        if (stored) {
            g->sp.w = sp->panels;
            g->sp.w_stride = k->tile_s ? sp->s_stride : sp->p_stride;
        }
        g->fly = fly;
        g->fly_stored = fly_stored;
        if (fly) j.wpack_bytes = (size_t)round_up((int64_t)sp->p_stride * k->p_rows, 64);
        g->n_slots = form ? (n + form->rows - 1) / form->rows : n;
        if (n && sp->n_out) {
            int64_t unit = form ? form->rows * form->max_slots : k->max_nx;
            /* a quad-form task takes all rows, a panel-form one up to
             * PANEL_ROWS (their converted rows stay in the core's cache): the
             * weights are read once, or once per PANEL_ROWS rows */
            g->bx = form == &quad ? round_up(n, unit)
                    : form == &panel || form == &spanel || form == &tpanel
                        ? (n < PANEL_ROWS ? round_up(n, unit) : PANEL_ROWS)
                    : form   ? unit
                    : n < 64 ? round_up(n, unit)
                             : 64;
            g->n_xblocks = (n + g->bx - 1) / g->bx;
            /* Few rows (one block of them, weights not in panels): the work
             * streams the weights once, so each task takes one long run of
             * rows, STREAM_TASKS per thread. Tasks of 64 rows (a few tens of
             * KB) cost a task start and a cold prefetch each: measured on
             * Zen 5 with 2 threads, one activation row of Q4_K then streamed
             * at 27 GB/s, with long runs at 48-56 GB/s (the read loop: 53).
             * A grouped product's groups share the threads: a group of
             * few rows is then one task when there are enough groups (an
             * expert's matrix read in one run; measured on Zen 4,
             * qwen3-next decode, 10 experts of 512 rows a call).
             * So too a panel-form group of a grouped product (experts
             * packed on the fly): its packer prefetches each panel's rows
             * while it packs the one before, so a task's first panel is
             * the one that waits for memory (measured on Zen 5, 2 threads,
             * 128 Q4_K experts of 512 x 2048 from memory: 17-64 rows an
             * expert 5-15% faster in one task an expert than in tasks of
             * 32 weight rows; Qwen3.5-35B-A3B pp512 2-6%).
             * Otherwise blocks small enough for several tasks a thread. */
            const int64_t streams = STREAM_TASKS * (int64_t)n_threads;
            int64_t bw = sp->n_out * g->n_xblocks / (8 * (int64_t)n_threads);
            const bool panels = form == &panel || form == &spanel || form == &tpanel;
            const int64_t bw_max = panels ? 256 : 64; /* panels: longer streams, fewer task starts */
            if (g->n_xblocks == 1 && (!panels || live > 1 || form == &spanel || form == &tpanel))
                bw = (sp->n_out * live + streams - 1) / streams;
            else if (bw > bw_max) bw = bw_max;
            g->bw = round_up(bw > 0 ? bw : 1, form ? form->nw : k->max_nw);
            g->n_wblocks = (sp->n_out + g->bw - 1) / g->bw;
        } else {
            g->bx = g->bw = 1;
            g->n_xblocks = g->n_wblocks = 0;
        }
        task0 += g->n_wblocks * g->n_xblocks;
        if (share_x && gi > 0) { /* reads piece 0's slots; placed past the end for the slot search */
            g->off0 = j.groups[0].off0;
            g->n_slots = 0;
            continue;
        }
        /* the same rows as the group before, converted alike: its slots
         * (no slots of its own, so the slot search skips past it) */
        const mm_group *prev = gi > 0 && !share_x ? &j.groups[gi - 1] : NULL;
        if (prev && n && prev->sp.n_rows == n && prev->sp.x_rows == sp->x_rows && prev->form == g->form &&
            prev->slot_bytes == g->slot_bytes) {
            g->off0 = prev->off0;
            g->n_slots = 0;
            continue;
        }
        slot0 += g->n_slots;
        off += (size_t)g->n_slots * g->slot_bytes;
        total += n;
    }
    if (share_x)
        for (int64_t gi = 1; gi < n_specs; gi++) j.groups[gi].slot0 = slot0;
    if (task0 == 0) {
        free(j.groups);
        return RW_OK;
    }
    j.total_slots = slot0;
    j.xq = aligned_alloc(64, off); /* the converted activations; freed before returning */
    if (!j.xq) {
        free(j.groups);
        return rw_errorf(err, RW_ERR_NOMEM, "matmul: cannot allocate %zu bytes of scratch", off);
    }
    if (j.wpack_bytes) { /* one panel per thread, in its own cache: freed before returning */
        j.wpack = aligned_alloc(64, j.wpack_bytes * (size_t)n_threads);
        if (!j.wpack) {
            free(j.xq);
            free(j.groups);
            return rw_errorf(err, RW_ERR_NOMEM, "matmul: cannot allocate %zu bytes of panel scratch",
                             j.wpack_bytes * (size_t)n_threads);
        }
    }
    j.conv_slots = slot0 / (4 * n_threads) > 1 ? slot0 / (4 * n_threads) : 1;
    const int64_t conv_tasks = (slot0 + j.conv_slots - 1) / j.conv_slots;
    if (total * n_in <= SERIAL_CONVERT) /* decode: cheaper than waking the pool for it */
        for (int64_t t = 0; t < conv_tasks; t++) convert_task(&j, t, 0);
    else rw_threadpool_run(pool, convert_task, &j, conv_tasks);
    rw_threadpool_run(pool, matmul_task, &j, task0);
    free(j.wpack);
    free(j.xq);
    free(j.groups);
    return RW_OK;
}

/* The calling thread's observer (rw_matmul_observe): set by one thread for
 * its own products, so no lock. */
static _Thread_local rw_matmul_observer_fn observer;
static _Thread_local void *observer_ctx;

void rw_matmul_observe(rw_matmul_observer_fn fn, void *ctx) {
    observer = fn;
    observer_ctx = ctx;
}

rw_status rw_matmul_grouped(const rw_matrix *w, const rw_matmul_group *groups, int64_t n_groups, const float *x,
                            int64_t x_stride, float *y, int64_t y_stride, rw_threadpool *pool, rw_error *err) {
    if (!w || n_groups < 0 || w->n_in <= 0 || w->n_out < 0 || (n_groups && !groups))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad sizes");
    if (w->lowrank) return rw_errorf(err, RW_ERR_UNSUPPORTED, "matmul: low-rank updates of grouped products");
    int64_t total = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        if (groups[g].n_rows < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad row count");
        if (groups[g].n_rows && !groups[g].data) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL weights");
        total += groups[g].n_rows;
    }
    if (total == 0 || w->n_out == 0) return RW_OK;
    if (!x) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL pointer");
    for (int64_t g = 0; g < n_groups; g++)
        if (groups[g].n_rows && !y && !groups[g].y) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL pointer");
    const rw_mm_kernel *k = kernel_for(rw_kernel_tier_current(), w->type, NULL);
    if (!k) return rw_errorf(err, RW_ERR_UNSUPPORTED, "matmul: no kernel for type %s", rw_dtype_name(w->type));
    uint64_t row_bytes;
    rw_status st = check_matrix(w, &row_bytes, err);
    if (st) return st;
    mm_spec *specs = malloc(sizeof *specs * (size_t)n_groups); /* freed below */
    if (!specs) return rw_errorf(err, RW_ERR_NOMEM, "matmul: out of memory");
    for (int64_t g = 0; observer && g < n_groups; g++)
        if (groups[g].n_rows)
            observer(observer_ctx, groups[g].data, w->n_in, x, x_stride, groups[g].x_rows, groups[g].n_rows);
    for (int64_t g = 0; g < n_groups; g++) {
        float *yg = groups[g].y ? groups[g].y : y; /* the output its rows index */
        specs[g] = (mm_spec){.w = groups[g].data,
                             .w_stride = w->row_stride ? w->row_stride : (size_t)row_bytes,
                             .panels = panels_of(k, groups[g].panels ? groups[g].panels : w->panels, groups[g].data,
                                                 w->row_stride ? w->row_stride : (size_t)row_bytes, w->n_in, row_bytes,
                                                 w->n_out),
                             .p_stride = panel_row_bytes(k, w->n_in, row_bytes),
                             .s_stride = (size_t)row_bytes,
                             .can_fly = panels_enabled(),
                             .n_out = w->n_out,
                             .y = groups[g].y_rows ? yg : yg + groups[g].y_row0 * y_stride,
                             .y_stride = y_stride,
                             .x_rows = groups[g].x_rows,
                             .y_rows = groups[g].y_rows,
                             .n_rows = groups[g].n_rows};
    }
    st = run_specs(k, w->n_in, specs, n_groups, false, x, x_stride, pool, err);
    free(specs);
    return st;
}

static rw_status add_lowrank(const rw_matrix *w, const float *x, int64_t x_stride, const int32_t *x_rows, float *y,
                             int64_t y_stride, const int32_t *y_rows, int64_t n_rows, rw_threadpool *pool,
                             rw_error *err);

rw_status rw_matmul_multi(const rw_matrix *const *ws, float *const *ys, const int64_t *y_strides, int n_w,
                          const float *x, int64_t x_stride, int64_t n_rows, rw_threadpool *pool, rw_error *err) {
    enum { MAX_MULTI = 8 };
    if (n_w < 0 || n_rows < 0 || (n_w && (!ws || !ys || !y_strides)))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad sizes");
    for (int i = 0; i < n_w; i++)
        if (!ws[i] || ws[i]->n_in <= 0 || ws[i]->n_out < 0)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad sizes");
    /* runs of consecutive matrices with one type and row length share a call */
    for (int i0 = 0, i1; i0 < n_w; i0 = i1) {
        for (i1 = i0 + 1; i1 < n_w && i1 - i0 < MAX_MULTI; i1++)
            if (ws[i1]->type != ws[i0]->type || ws[i1]->n_in != ws[i0]->n_in) break;
        const rw_mm_kernel *k = kernel_for(rw_kernel_tier_current(), ws[i0]->type, NULL);
        if (i1 - i0 == 1 || !k) { /* rw_matmul reports what is wrong */
            rw_status st = rw_matmul(ws[i0], x, x_stride, n_rows, ys[i0], y_strides[i0], pool, err);
            if (st) return st;
            i1 = i0 + 1;
            continue;
        }
        if (n_rows == 0) continue;
        if (!x) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL pointer");
        mm_spec specs[MAX_MULTI];
        for (int i = i0; i < i1; i++) {
            uint64_t row_bytes;
            rw_status st = check_matrix(ws[i], &row_bytes, err);
            if (st) return st;
            if (!ws[i]->data || !ys[i]) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: NULL pointer");
            specs[i - i0] = (mm_spec){.w = ws[i]->data,
                                      .w_stride = ws[i]->row_stride ? ws[i]->row_stride : (size_t)row_bytes,
                                      .panels = panels_of(k, ws[i]->panels, ws[i]->data,
                                                          ws[i]->row_stride ? ws[i]->row_stride : (size_t)row_bytes,
                                                          ws[i]->n_in, row_bytes, ws[i]->n_out),
                                      .p_stride = panel_row_bytes(k, ws[i]->n_in, row_bytes),
                                      .s_stride = (size_t)row_bytes,
                                      .can_fly = panels_enabled(),
                                      .n_out = ws[i]->n_out,
                                      .y = ys[i],
                                      .y_stride = y_strides[i],
                                      .n_rows = n_rows};
        }
        for (int i = i0; observer && i < i1; i++)
            observer(observer_ctx, ws[i]->data, ws[i]->n_in, x, x_stride, NULL, n_rows);
        rw_status st = run_specs(k, ws[i0]->n_in, specs, i1 - i0, true, x, x_stride, pool, err);
        for (int i = i0; !st && i < i1; i++)
            if (ws[i]->lowrank)
                st = add_lowrank(ws[i], x, x_stride, NULL, ys[i], y_strides[i], NULL, n_rows, pool, err);
        if (st) return st;
    }
    return RW_OK;
}

/* B (A x) for rows [r0, r1) of a low-rank update: per row and output, the
 * rank products added in order from 0 (u = ((0 + b0 t0) + b1 t1) + ...,
 * each product rounded, then the sum), then y += u * scale. Plain C, so
 * every tier runs the same operations (vectorized over outputs only, which
 * keeps each output's order). */
typedef struct {
    const rw_lowrank *u;
    const float *ax; /* [n_rows][rank] */
    float *bax;      /* [n_rows][n_out] scratch */
    float *y;
    int64_t y_stride, n_out, n_rows, rows_per_task;
    const int32_t *y_rows;
} lowrank_job;

/* One row: acc[o] = sum over k of bt[k * stride + o] * t[k] for o < n, in
 * order k = 0, 1, ... from 0: each product rounded, then added. Only the
 * outputs are vectorized (each lane one output's sum, in the same order,
 * mul then add, never fused), so the AVX2 copy computes the plain one's
 * bits. */
static void lowrank_row_plain(const float *restrict bt, int64_t stride, const float *restrict t, int64_t r, int64_t n,
                              float *restrict acc) {
    for (int64_t o = 0; o < n; o++) acc[o] = 0.0f;
    for (int64_t k = 0; k < r; k++)
        for (int64_t o = 0; o < n; o++) {
            const float prod = bt[k * stride + o] * t[k];
            acc[o] += prod;
        }
}

#if defined(__x86_64__)
/* 64 outputs at a time in eight registers over all k, then 8, then the
 * plain loop for the last few. */
__attribute__((target("avx2"))) static void lowrank_row_avx2(const float *restrict bt, const float *restrict t,
                                                             int64_t r, int64_t n_out, float *restrict acc) {
    int64_t o0 = 0;
    for (; o0 + 64 <= n_out; o0 += 64) {
        __m256 a[8];
        for (int c = 0; c < 8; c++) a[c] = _mm256_setzero_ps();
        for (int64_t k = 0; k < r; k++) {
            const __m256 tk = _mm256_set1_ps(t[k]);
            const float *bk = bt + k * n_out + o0;
            for (int c = 0; c < 8; c++) a[c] = _mm256_add_ps(a[c], _mm256_mul_ps(_mm256_loadu_ps(bk + 8 * c), tk));
        }
        for (int c = 0; c < 8; c++) _mm256_storeu_ps(acc + o0 + 8 * c, a[c]);
    }
    for (; o0 + 8 <= n_out; o0 += 8) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t k = 0; k < r; k++)
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(bt + k * n_out + o0), _mm256_set1_ps(t[k])));
        _mm256_storeu_ps(acc + o0, a);
    }
    lowrank_row_plain(bt + o0, n_out, t, r, n_out - o0, acc + o0);
}
#endif

static void lowrank_rows(void *ctx, int64_t task, int thread) {
    (void)thread;
    const lowrank_job *j = ctx;
    const int64_t r = j->u->a.n_out, n_out = j->n_out;
    const int64_t r0 = task * j->rows_per_task,
                  r1 = r0 + j->rows_per_task < j->n_rows ? r0 + j->rows_per_task : j->n_rows;
#if defined(__x86_64__)
    const bool avx2 = rw_cpu_has_avx2();
#endif
    for (int64_t i = r0; i < r1; i++) {
        float *restrict acc = j->bax + i * n_out;
#if defined(__x86_64__)
        if (avx2) lowrank_row_avx2(j->u->bt, j->ax + i * r, r, n_out, acc);
        else
#endif
            lowrank_row_plain(j->u->bt, n_out, j->ax + i * r, r, n_out, acc);
        float *restrict yr = j->y + (j->y_rows ? j->y_rows[i] : i) * j->y_stride;
        const float scale = j->u->scale;
        for (int64_t o = 0; o < n_out; o++) {
            const float scaled = acc[o] * scale; /* rounded before the sum, as ggml_scale then ggml_add */
            yr[o] += scaled;
        }
    }
}

/* y += (B (A x)) * scale for each of w's low-rank updates (rw_lowrank),
 * rows gathered as rw_matmul_gather's: A x through rw_matmul, then
 * lowrank_rows. A row's update, like its product, depends on that row
 * alone. */
static rw_status add_lowrank(const rw_matrix *w, const float *x, int64_t x_stride, const int32_t *x_rows, float *y,
                             int64_t y_stride, const int32_t *y_rows, int64_t n_rows, rw_threadpool *pool,
                             rw_error *err) {
    for (const rw_lowrank *u = w->lowrank; u; u = u->next) {
        const int64_t r = u->a.n_out;
        if (u->a.n_in != w->n_in || r <= 0 || !u->bt || u->a.lowrank)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: low-rank update of the wrong shape");
        /* A x, and B (A x) row by row: freed below */
        float *ax = malloc(sizeof *ax * (size_t)(n_rows * r)), *bax = malloc(sizeof *bax * (size_t)(n_rows * w->n_out));
        rw_status st = ax && bax ? RW_OK : rw_errorf(err, RW_ERR_NOMEM, "matmul: out of memory");
        /* A x is rank dot products a row: below 16 rows (decode, drafts) a
         * parallel dispatch would cost more than the products */
        if (!st) st = rw_matmul_gather(&u->a, x, x_stride, x_rows, ax, r, NULL, n_rows, n_rows < 16 ? NULL : pool, err);
        if (!st && u->t_type == RW_TYPE_F16)
            for (int64_t q = 0; q < n_rows * r; q++) ax[q] = rw_f16_to_f32(rw_f32_to_f16(ax[q]));
        else if (!st && u->t_type == RW_TYPE_BF16)
            for (int64_t q = 0; q < n_rows * r; q++) ax[q] = rw_bf16_to_f32(rw_f32_to_bf16(ax[q]));
        if (!st) {
            lowrank_job j = {.u = u,
                             .ax = ax,
                             .bax = bax,
                             .y = y,
                             .y_stride = y_stride,
                             .n_out = w->n_out,
                             .n_rows = n_rows,
                             .rows_per_task = 8,
                             .y_rows = y_rows};
            const int64_t n_tasks = (n_rows + j.rows_per_task - 1) / j.rows_per_task;
            if (pool && n_tasks > 1) rw_threadpool_run(pool, lowrank_rows, &j, n_tasks);
            else
                for (int64_t t = 0; t < n_tasks; t++) lowrank_rows(&j, t, 0);
        }
        free(ax);
        free(bax);
        if (st) return st;
    }
    return RW_OK;
}

rw_status rw_matmul_gather(const rw_matrix *w, const float *x, int64_t x_stride, const int32_t *x_rows, float *y,
                           int64_t y_stride, const int32_t *y_rows, int64_t n_rows, rw_threadpool *pool,
                           rw_error *err) {
    if (!w || n_rows < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "matmul: bad sizes");
    rw_matrix base = *w;
    base.lowrank = NULL;
    rw_matmul_group g = {.data = w->data, .x_rows = x_rows, .y_rows = y_rows, .n_rows = n_rows};
    rw_status st = rw_matmul_grouped(&base, &g, 1, x, x_stride, y, y_stride, pool, err);
    if (st || !w->lowrank || n_rows == 0) return st;
    return add_lowrank(w, x, x_stride, x_rows, y, y_stride, y_rows, n_rows, pool, err);
}

rw_status rw_matmul(const rw_matrix *w, const float *x, int64_t x_stride, int64_t n_rows, float *y, int64_t y_stride,
                    rw_threadpool *pool, rw_error *err) {
    return rw_matmul_gather(w, x, x_stride, NULL, y, y_stride, NULL, n_rows, pool, err);
}

static _Atomic bool panels_off; /* rw_matmul_set_panels(false) */

void rw_matmul_set_panels(bool on) { atomic_store(&panels_off, !on); }

/* The kernel whose panel form would take w, and w's dense row size; NULL
 * when there is none (or panels are turned off). */
static const rw_mm_kernel *panel_kernel(const rw_matrix *w, uint64_t *row_bytes) {
    if (!w || !w->data || w->n_in <= 0 || w->n_out <= 0) return NULL;
    const rw_mm_kernel *k = kernel_for(rw_kernel_tier_current(), w->type, NULL);
    if (!k || !(k->pack_p || k->pack_s) || atomic_load(&panels_off)) return NULL;
    if (check_matrix(w, row_bytes, NULL)) return NULL;
    return k;
}

/* Panels hold whole panels of rows. */
static size_t panel_bytes(const rw_mm_kernel *k, const rw_matrix *w, uint64_t row_bytes) {
    return (size_t)round_up(w->n_out, k->p_rows) * stored_row_bytes(k, w->n_in, row_bytes);
}

bool rw_matmul_panels_replace_rows(const rw_matrix *w) {
    uint64_t row_bytes;
    const rw_mm_kernel *k = panel_kernel(w, &row_bytes);
    return k && k->pack_s && k->tile_s && (!w->row_stride || w->row_stride == row_bytes);
}

size_t rw_matmul_pack_bytes(const rw_matrix *w) {
    uint64_t row_bytes;
    const rw_mm_kernel *k = panel_kernel(w, &row_bytes);
    return k ? PANEL_HEADER + panel_bytes(k, w, row_bytes) : 0;
}

/* Packing shared out: task t packs PACK_TASK_ROWS rows (whole panels). */
enum { PACK_TASK_ROWS = 256 };
typedef struct {
    const rw_mm_kernel *k;
    const rw_matrix *w;
    size_t stride, row_out; /* bytes per row in the rows and in the panels */
    uint8_t *dst;
} pack_job;

static void pack_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const pack_job *j = ctx;
    const int64_t r0 = task * PACK_TASK_ROWS, n = j->w->n_out - r0 < PACK_TASK_ROWS ? j->w->n_out - r0 : PACK_TASK_ROWS;
    (j->k->pack_s ? j->k->pack_s : j->k->pack_p)((const uint8_t *)j->w->data + (size_t)r0 * j->stride, j->stride,
                                                 j->w->n_in, n, j->dst + (size_t)r0 * j->row_out);
}

rw_status rw_matmul_pack(const rw_matrix *w, void **panels, rw_error *err) {
    return rw_matmul_pack_pool(w, panels, NULL, err);
}

rw_status rw_matmul_pack_pool(const rw_matrix *w, void **panels, rw_threadpool *pool, rw_error *err) {
    _Static_assert(PACK_TASK_ROWS % 16 == 0, "tasks of whole panels");
    *panels = NULL;
    uint64_t row_bytes;
    const rw_mm_kernel *k = panel_kernel(w, &row_bytes);
    if (!k) return RW_OK; /* no panel form for w (or w unusable: rw_matmul says why) */
    const size_t bytes = PANEL_HEADER + panel_bytes(k, w, row_bytes);
    uint8_t *p = aligned_alloc(64, (size_t)round_up((int64_t)bytes, 64)); /* the caller's, freed with free() */
    if (!p) return rw_errorf(err, RW_ERR_NOMEM, "matmul: cannot allocate %zu bytes of panels", bytes);
#if defined(MADV_HUGEPAGE)
    /* advice, before the pages exist: panels a model keeps are streamed
     * like the weights (fewer TLB misses in huge pages) */
    const uintptr_t hp = (uintptr_t)2 << 20, a0 = ((uintptr_t)p + hp - 1) & ~(hp - 1),
                    a1 = ((uintptr_t)p + bytes) & ~(hp - 1);
    if (a1 > a0) madvise((void *)a0, a1 - a0, MADV_HUGEPAGE);
#endif
    memset(p, 0, PANEL_HEADER);
    const panel_header h = {k, w->data, w->row_stride ? w->row_stride : (size_t)row_bytes, w->n_out};
    memcpy(p, &h, sizeof h);
    pack_job j = {k, w, h.stride, stored_row_bytes(k, w->n_in, row_bytes), p + PANEL_HEADER};
    const int64_t n_tasks = (w->n_out + PACK_TASK_ROWS - 1) / PACK_TASK_ROWS;
    if (pool && k->pack_s && n_tasks > 1 && PACK_TASK_ROWS % k->p_rows == 0) /* stored panels: panel after panel */
        rw_threadpool_run(pool, pack_task, &j, n_tasks);
    else (k->pack_s ? k->pack_s : k->pack_p)(w->data, h.stride, w->n_in, w->n_out, p + PANEL_HEADER);
    *panels = p;
    return RW_OK;
}

uint64_t rw_stream_read(const void *p, size_t n) {
#if defined(__x86_64__)
    if (rw_cpu_has_avx512()) return rw_stream_read_avx512(p, n);
    if (rw_cpu_has_avx2()) return rw_stream_read_avx2(p, n);
#elif defined(__aarch64__)
    return rw_stream_read_neon(p, n);
#endif
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
