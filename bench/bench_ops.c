/* bench_ops.c - `rewind bench ops [--ctx N] [--threads N] [--json] [--quick]`.
 *
 * Times the non-matmul kernels of kernels/ops.h on the shapes of one
 * Qwen3.5-0.8B layer (and a Granite-4.0-H-like Mamba2 layer), per token, in
 * the reference tier and the current one:
 *   attn decode   one query token at position ctx-1: 8 query heads, 2 KV heads,
 *                 head dim 256, f32 and f16 cache, and the f16 cache in
 *                 pages of 64 positions as the engine keeps it (each page
 *                 its own allocation); GB/s = KV bytes read once
 *   attn prefill  512 query tokens at positions 0..511, time per token
 *   delta rule    one token through 16 value heads with 128x128 states;
 *                 GB/s = state bytes read + written
 *   conv1d        one token of 6144 channels, kernel 4, SiLU
 *   ssm scan      one token of 48 heads x 64 dims x 128 states, 1 group
 * Each figure is the best of three timed passes of at least 0.1 s after a
 * warm-up call (a shared machine's hiccups are not counted); --quick makes
 * one pass of 0.01 s without warm-up (for tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "base/threadpool.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

static const char *CMD = "bench ops";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Everything one benchmark case needs; buffers are owned by main's arrays. */
typedef struct {
    int64_t ctx;
    rw_threadpool *pool;
    rw_attn_kv kv32, kv16;
    const void *kp32[1], *vp32[1], *kp16[1], *vp16[1]; /* one page each: the contiguous buffers */
    rw_attn_kv kv16p;         /* the f16 cache in pages of PAGE positions, as cache/kv.c keeps it */
    const void **kpp, **vpp; /* [ctx / PAGE], each page its own allocation */
    float *q, *out, *scratch;
    float *state, *dq, *dk, *dv, *dg, *dbeta, *dout, *dscratch;
    float *cx, *cw, *cstate, *cy;
    float *sx, *sdt, *sA, *sB, *sy, *sstate;
} bench_ctx;

enum { H = 8, HKV = 2, HD = 256, PAGE = 64, PREFILL = 512, NV = 16, DK = 128, CONV_C = 6144, CONV_K = 4 };
enum { SSM_H = 48, SSM_HD = 64, SSM_DS = 128 };

typedef enum { B_ATTN32, B_ATTN16, B_ATTN16P, B_PREFILL, B_DELTA, B_CONV, B_SSM, B_COUNT } bench_id;
static const char *const names[B_COUNT] = {"attn_decode_f32", "attn_decode_f16", "attn_decode_f16_paged",
                                           "attn_prefill_f32", "delta_rule",     "conv1d",
                                           "ssm_scan"};

/* Runs case b once; returns the number of tokens it processed. */
static int64_t run_once(bench_ctx *c, bench_id b) {
    switch (b) {
    case B_ATTN32:
    case B_ATTN16:
    case B_ATTN16P:
        rw_attn_causal(b == B_ATTN32 ? &c->kv32 : b == B_ATTN16 ? &c->kv16 : &c->kv16p, c->q, H * HD, c->ctx - 1, 1, H,
                       HKV, HD, HD, 0.0625f, c->out, H * HD, c->scratch, c->pool);
        return 1;
    case B_PREFILL:
        rw_attn_causal(&c->kv32, c->q, H * HD, 0, PREFILL, H, HKV, HD, HD, 0.0625f, c->out, H * HD, c->scratch,
                       c->pool);
        return PREFILL;
    case B_DELTA:
        rw_delta_rule(c->state, NV, NV, true, DK, DK, 1, c->dq, c->dk, NV * DK, c->dv, NV * DK, c->dg, c->dbeta,
                      0.088f, c->dout, NV * DK, c->dscratch, c->pool);
        return 1;
    case B_CONV:
        rw_conv1d_causal(c->cx, CONV_C, 1, CONV_C, CONV_K, c->cw, NULL, c->cstate, true, c->cy, CONV_C);
        return 1;
    case B_SSM:
        rw_ssm_scan(c->sstate, SSM_H, 1, SSM_HD, SSM_DS, 1, c->sx, SSM_H * SSM_HD, c->sdt, SSM_H, NULL, c->sA, c->sB,
                    c->sB + SSM_DS, 2 * SSM_DS, NULL, c->sy, SSM_H * SSM_HD, c->pool);
        return 1;
    default: return 0;
    }
}

/* Seconds per token: best of `passes` passes of at least min_s each. */
static double time_case(bench_ctx *c, bench_id b, int passes, double min_s, bool warm_up) {
    double best = 1e30;
    if (warm_up) run_once(c, b);
    for (int p = 0; p < passes; p++) {
        int64_t toks = 0;
        const double t0 = now_s();
        double t;
        do toks += run_once(c, b);
        while ((t = now_s() - t0) < min_s);
        if (t / (double)toks < best) best = t / (double)toks;
    }
    return best;
}

/* Bytes a token of case b must move at least (for GB/s), 0 when not meaningful. */
static double bytes_of(const bench_ctx *c, bench_id b) {
    switch (b) {
    case B_ATTN32: return (double)HKV * (double)c->ctx * 2 * HD * 4;
    case B_ATTN16:
    case B_ATTN16P: return (double)HKV * (double)c->ctx * 2 * HD * 2;
    case B_DELTA: return 2.0 * NV * DK * DK * 4;
    case B_SSM: return 2.0 * SSM_H * SSM_HD * SSM_DS * 4;
    default: return 0;
    }
}

static float *fill(int64_t n, float amp) {
    float *p = malloc((size_t)n * sizeof(float));
    if (p)
        for (int64_t i = 0; i < n; i++) p[i] = amp * (float)((double)((i * 2654435761u) % 1000) / 500.0 - 1.0);
    return p;
}

int rw_bench_ops(int argc, char **argv) {
    long ctx = 4096, threads = 0;
    bool json = false, quick = false;
    const rw_cli_opt opts[] = {
        {"--ctx", RW_OPT_INT, &ctx, PREFILL, 1 << 20, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--quick", RW_OPT_FLAG, &quick, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, NULL, 0, NULL);
    if (prc == RW_CLI_HELP) return 0;
    if (prc) {
        fprintf(stderr, "usage: rewind bench ops [--ctx N] [--threads N] [--kernels TIER] [--json] [--quick]\n");
        return 2;
    }
    rw_error err = {0};
    bench_ctx c = {.ctx = ctx};
    if (rw_threadpool_new((int)threads, &c.pool, &err)) {
        rw_cli_error(CMD, "%s", err.msg);
        return 1;
    }
    const int nt = rw_threadpool_size(c.pool);
    /* KV cache of one layer: K [HKV][ctx][HD], V transposed [HKV][HD][ctx] */
    const int64_t kvn = (int64_t)HKV * ctx * HD;
    float *k32 = fill(kvn, 1.0f), *v32 = fill(kvn, 1.0f);
    rw_f16 *k16 = malloc((size_t)kvn * 2), *v16 = malloc((size_t)kvn * 2);
    c.q = fill((int64_t)PREFILL * H * HD, 0.5f);
    c.out = malloc((size_t)PREFILL * H * HD * sizeof(float));
    c.scratch = malloc((size_t)rw_attn_scratch_floats(nt, H, HKV, ctx) * sizeof(float));
    c.state = fill((int64_t)NV * DK * DK, 0.1f), c.dq = fill(NV * DK, 0.1f), c.dk = fill(NV * DK, 0.1f);
    c.dv = fill(NV * DK, 1.0f), c.dg = fill(NV, 0.01f), c.dbeta = fill(NV, 0.5f);
    c.dout = malloc(NV * DK * sizeof(float)), c.dscratch = malloc((size_t)nt * DK * sizeof(float));
    c.cx = fill(CONV_C, 1.0f), c.cw = fill(CONV_C * CONV_K, 1.0f), c.cstate = fill(CONV_C * (CONV_K - 1), 1.0f);
    c.cy = malloc(CONV_C * sizeof(float));
    c.sx = fill(SSM_H * SSM_HD, 1.0f), c.sdt = fill(SSM_H, 1.0f), c.sA = fill(SSM_H, 1.0f);
    c.sB = fill(2 * SSM_DS, 1.0f), c.sy = malloc(SSM_H * SSM_HD * sizeof(float));
    c.sstate = fill((int64_t)SSM_H * SSM_HD * SSM_DS, 0.1f);
    int rc = 1;
    if (!k32 || !v32 || !k16 || !v16 || !c.q || !c.out || !c.scratch || !c.state || !c.dq || !c.dk || !c.dv ||
        !c.dg || !c.dbeta || !c.dout || !c.dscratch || !c.cx || !c.cw || !c.cstate || !c.cy || !c.sx || !c.sdt ||
        !c.sA || !c.sB || !c.sy || !c.sstate) {
        rw_cli_error(CMD, "out of memory");
        goto done;
    }
    for (int h = 0; h < SSM_H; h++) c.sA[h] = -1.0f - c.sA[h] * c.sA[h];
    for (int h = 0; h < NV; h++) c.dg[h] = -0.05f;
    rw_f32_to_f16_row(k32, k16, 1, kvn);
    rw_f32_to_f16_row(v32, v16, 1, kvn);
    c.kp32[0] = k32, c.vp32[0] = v32, c.kp16[0] = k16, c.vp16[0] = v16;
    c.kv32 = (rw_attn_kv){.k_pages = c.kp32, .v_pages = c.vp32, .page_len = ctx, .k_head_stride = ctx * HD,
                          .v_head_stride = HD * ctx, .v_stride = ctx};
    c.kv16 = c.kv32, c.kv16.k_pages = c.kp16, c.kv16.v_pages = c.vp16, c.kv16.f16 = true;
    /* the same f16 cache in pages (K [HKV][PAGE][HD] then V [HKV][HD][PAGE]) */
    const int64_t n_pages = (ctx + PAGE - 1) / PAGE;
    c.kpp = calloc((size_t)n_pages, sizeof *c.kpp), c.vpp = calloc((size_t)n_pages, sizeof *c.vpp);
    if (!c.kpp || !c.vpp) {
        rw_cli_error(CMD, "out of memory");
        goto done;
    }
    for (int64_t p = 0; p < n_pages; p++) {
        rw_f16 *pg = calloc((size_t)2 * HKV * PAGE * HD, sizeof(rw_f16));
        if (!pg) {
            rw_cli_error(CMD, "out of memory");
            goto done;
        }
        for (int g = 0; g < HKV; g++)
            for (int r = 0; r < PAGE && p * PAGE + r < ctx; r++) {
                const int64_t pos = p * PAGE + r;
                memcpy(pg + ((size_t)g * PAGE + r) * HD, k16 + ((size_t)g * ctx + pos) * HD, HD * sizeof(rw_f16));
                for (int i = 0; i < HD; i++)
                    pg[(size_t)HKV * PAGE * HD + ((size_t)g * HD + i) * PAGE + r] = v16[((size_t)g * HD + i) * ctx + pos];
            }
        c.kpp[p] = pg, c.vpp[p] = pg + (size_t)HKV * PAGE * HD;
    }
    c.kv16p = (rw_attn_kv){.k_pages = c.kpp, .v_pages = c.vpp, .page_len = PAGE, .k_head_stride = PAGE * HD,
                           .v_head_stride = HD * PAGE, .v_stride = PAGE, .f16 = true};

    const rw_kernel_tier tier = rw_kernel_tier_current();
    double fast[B_COUNT], ref[B_COUNT];
    const int passes = quick ? 1 : 3;
    const double min_s = quick ? 0.01 : 0.1;
    for (int b = 0; b < B_COUNT; b++) fast[b] = time_case(&c, (bench_id)b, passes, min_s, !quick);
    rw_kernel_tier_set(RW_TIER_REF);
    for (int b = 0; b < B_COUNT; b++) ref[b] = time_case(&c, (bench_id)b, passes, min_s, !quick);
    rw_kernel_tier_set(tier);

    if (json) {
        rw_json_writer jw;
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "threads"), rw_json_int(&jw, nt);
        rw_json_key(&jw, "kernels"), rw_json_cstring(&jw, rw_kernel_tier_name(tier));
        rw_json_key(&jw, "ctx"), rw_json_int(&jw, ctx);
        rw_json_key(&jw, "ops");
        rw_json_begin_array(&jw);
        for (int b = 0; b < B_COUNT; b++) {
            rw_json_begin_object(&jw);
            rw_json_key(&jw, "name"), rw_json_cstring(&jw, names[b]);
            rw_json_key(&jw, "us_per_token"), rw_json_double(&jw, fast[b] * 1e6, 6);
            rw_json_key(&jw, "ref_us_per_token"), rw_json_double(&jw, ref[b] * 1e6, 6);
            rw_json_key(&jw, "gb_s"), rw_json_double(&jw, bytes_of(&c, (bench_id)b) / fast[b] / 1e9, 6);
            rw_json_end_object(&jw);
        }
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        printf("\n");
    } else {
        printf("threads %d, kernels %s, ctx %ld (Qwen3.5-0.8B layer shapes; ssm: 48x64x128)\n", nt,
               rw_kernel_tier_name(tier), ctx);
        printf("%-22s %12s %12s %8s %8s\n", "op", "us/token", "ref us/tok", "speedup", "GB/s");
        for (int b = 0; b < B_COUNT; b++) {
            const double by = bytes_of(&c, (bench_id)b);
            printf("%-22s %12.2f %12.2f %7.1fx", names[b], fast[b] * 1e6, ref[b] * 1e6, ref[b] / fast[b]);
            if (by > 0) printf(" %8.1f", by / fast[b] / 1e9);
            printf("\n");
        }
    }
    rc = 0;
done:
    free(k32), free(v32), free(k16), free(v16), free(c.q), free(c.out), free(c.scratch);
    free(c.state), free(c.dq), free(c.dk), free(c.dv), free(c.dg), free(c.dbeta), free(c.dout), free(c.dscratch);
    free(c.cx), free(c.cw), free(c.cstate), free(c.cy), free(c.sx), free(c.sdt), free(c.sA), free(c.sB), free(c.sy);
    free(c.sstate);
    for (int64_t p = 0; c.kpp && p < (ctx + PAGE - 1) / PAGE; p++) free((void *)c.kpp[p]); /* a page: K then V */
    free(c.kpp), free(c.vpp);
    rw_threadpool_free(c.pool);
    return rc;
}
