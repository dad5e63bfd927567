/* bench_kernels.c - `rewind bench kernels`: matmul speed per weight type.
 *
 * On the matrix shapes of a Qwen3.5-0.8B layer (n_embd 1024, FFN 3584, the
 * gated-DeltaNet and attention projections) it measures, per weight type:
 *   - one-row (decode) speed as GB/s of weights streamed, over a working set
 *     of >= 256 MiB (many copies of one layer's matrices, so nothing stays
 *     in cache), and its share of the machine's read bandwidth, measured
 *     first by a streaming read of 512 MiB with the same threads;
 *     timings are the best pass of several (>= 0.5 s), bandwidth the best
 *     of 5 rounds of 3 ways of cutting the read (rw_cli_read_bandwidth);
 *     and, less subject to the memory speed's drift, "paired": the median
 *     share of a read of the same bytes timed just before each pass;
 *   - the same one-row speed with the weights in cache ("in L2": a
 *     1024-column matrix of about 384 KiB a thread, multiplied over and
 *     over): the kernel's own speed, memory aside. Where it is not well
 *     above the one-row GB/s, decode is bound by the kernel's arithmetic,
 *     not by the memory (a faster kernel helps); where it is, by the
 *     memory (CPUs with more bandwidth a core than this one run closer to
 *     this figure);
 *   - few-row cost: the time of 2, 4, 8 and 16-row matmuls over the same
 *     working set relative to one row (speculative verify passes and small
 *     decode batches: at best 1.0x, the weights streamed once for all rows);
 *   - many-row (prefill, 512 rows) throughput in GOP/s (2 ops per
 *     multiply-add) on the FFN up (1024 -> 3584) and down (3584 -> 1024)
 *     shapes;
 *   - the same with the reference kernels (fewer repetitions / rows: its
 *     speed per element does not depend on the row count), and speedups.
 * Weights are random bytes with sane block scales; speed does not depend on
 * the values.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "base/threadpool.h"
#include "cli/cli.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

#define MIB (1024.0 * 1024.0)

typedef struct {
    const char *name;
    int64_t n_in, n_out;
} shape;

/* Every distinct matrix shape of a Qwen3.5-0.8B layer: a gated-DeltaNet
 * mixer (18 of the 24 layers), a full-attention mixer (the other 6; its
 * attn_output has ssm_out's shape) and the FFN. The LM head (1024 x 248320,
 * 270 MB in Q8_0, 1 GB in F32) is left out to keep the benchmark's memory
 * small; its rows are as long as these. */
static const shape layer_shapes[] = {
    {"attn_qkv", 1024, 6144}, {"attn_gate", 1024, 2048}, {"ssm_out", 2048, 1024},
    {"attn_q", 1024, 4096},   {"attn_k", 1024, 512},     {"attn_v", 1024, 512},
    {"ffn_gate", 1024, 3584}, {"ffn_up", 1024, 3584},    {"ffn_down", 3584, 1024},
};
#define N_LAYER_SHAPES (int)(sizeof layer_shapes / sizeof layer_shapes[0])
static const shape many_shapes[] = {{"ffn_up", 1024, 3584}, {"ffn_down", 3584, 1024}};
#define MANY_ROWS 512
static const int64_t few_rows[4] = {2, 4, 8, 16};
#define REF_MANY_ROWS 16

/* --stored-panels: measure with panels packed once beforehand, as models
 * once held them (a second copy of the weights), for comparison */
static bool stored_panels;

static const rw_dtype bench_types[] = {
    RW_TYPE_Q8_0, RW_TYPE_Q4_0, RW_TYPE_Q4_1,   RW_TYPE_Q5_0,   RW_TYPE_Q5_1, RW_TYPE_Q2_K, RW_TYPE_Q3_K, RW_TYPE_Q4_K,
    RW_TYPE_Q5_K, RW_TYPE_Q6_K, RW_TYPE_IQ4_NL, RW_TYPE_IQ4_XS, RW_TYPE_F16,  RW_TYPE_BF16, RW_TYPE_F32,
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float frand(void) { return (float)rnd() / 2097152.0f - 1.0f; } /* [-1, 1) for 22-bit rnd */

/* ---- memory bandwidth ------------------------------------------------- */

typedef struct {
    const uint8_t *buf;
    size_t chunk;
    uint64_t sink[256];
} read_job;

static void read_task(void *ctx, int64_t task, int thread) {
    read_job *j = ctx;
    j->sink[thread & 255] ^= rw_stream_read(j->buf + (size_t)task * j->chunk, j->chunk);
}

/* The best read bandwidth a streaming read loop reaches over `bytes` (GB/s,
 * 1e9): the fastest of `reps` rounds, each trying the buffer cut into 1, 4
 * and 16 chunks per thread (which is fastest depends on the CPU and on
 * what else runs), so that decode speeds can be set against the most the
 * machine gives rather than one way of reading. */
double rw_cli_read_bandwidth_over(rw_threadpool *pool, const void *buf, size_t bytes, int reps) {
    static const int per_thread[] = {1, 4, 16};
    double best = 0;
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < 3; c++) {
            int n_tasks = per_thread[c] * rw_threadpool_size(pool);
            read_job j = {.buf = buf, .chunk = bytes / (size_t)n_tasks / 256 * 256};
            if (j.chunk == 0) continue;
            double t0 = now_s();
            rw_threadpool_run(pool, read_task, &j, n_tasks);
            double gbs = (double)j.chunk * n_tasks / (now_s() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
    return best;
}

double rw_cli_read_bandwidth(rw_threadpool *pool, size_t bytes, int reps) {
    uint8_t *buf = aligned_alloc(4096, bytes); /* freed below */
    if (!buf) return 0;
    memset(buf, 0x5A, bytes);
    double best = rw_cli_read_bandwidth_over(pool, buf, bytes, reps);
    free(buf);
    return best;
}

/* ---- weights ----------------------------------------------------------- */

/* Random blocks of type t with finite, moderate scales (n_blocks of them). */
static void fill_blocks(rw_dtype t, uint8_t *p, size_t n_blocks) {
    size_t bs = rw_dtype_type_size(t);
    for (size_t i = 0; i < n_blocks * bs; i++) p[i] = (uint8_t)rnd();
    for (size_t b = 0; b < n_blocks; b++, p += bs) {
        /* f16 bit patterns: scales in [2^-7, 2^-6), mins +-[2^-8, 2^-7), weights +-[0.5, 1) */
        rw_f16 d = (rw_f16)(0x2000 | (rnd() & 0x3FF)), m = (rw_f16)(0x1C00 | (rnd() & 0x83FF));
        switch (t) {
        case RW_TYPE_F32: *(float *)p = frand(); break;
        case RW_TYPE_F16: *(rw_f16 *)p = (rw_f16)(0x3800 | (rnd() & 0x83FF)); break;
        case RW_TYPE_BF16: *(rw_bf16 *)p = (rw_bf16)(0x3F00 | (rnd() & 0x807F)); break;
        case RW_TYPE_Q4_0:
        case RW_TYPE_Q5_0:
        case RW_TYPE_Q8_0:
        case RW_TYPE_IQ4_NL: memcpy(p, &d, 2); break;
        case RW_TYPE_Q4_1:
        case RW_TYPE_Q5_1: memcpy(p, &d, 2), memcpy(p + 2, &m, 2); break;
        case RW_TYPE_Q4_K:
        case RW_TYPE_Q5_K: memcpy(p, &d, 2), memcpy(p + 2, &m, 2); break;
        case RW_TYPE_IQ4_XS: memcpy(p, &d, 2); break;
        case RW_TYPE_Q2_K: memcpy(p + bs - 4, &d, 2), memcpy(p + bs - 2, &m, 2); break;
        case RW_TYPE_Q3_K:
        case RW_TYPE_Q6_K: memcpy(p + bs - 2, &d, 2); break;
        default: break;
        }
    }
}

/* Fills `bytes` of weights by repeating a 1 MiB random pattern (quick). */
void rw_bench_fill_weights(rw_dtype t, uint8_t *buf, size_t bytes) {
    size_t bs = rw_dtype_type_size(t), pat = (size_t)MIB / bs * bs;
    if (pat > bytes) pat = bytes / bs * bs;
    fill_blocks(t, buf, pat / bs);
    for (size_t off = pat; off < bytes; off += pat) memcpy(buf + off, buf, bytes - off < pat ? bytes - off : pat);
}

static size_t matrix_bytes(rw_dtype t, const shape *s) {
    uint64_t rb = 0;
    rw_dtype_row_bytes(t, (uint64_t)s->n_in, &rb);
    return (size_t)rb * (size_t)s->n_out;
}

/* ---- one type ---------------------------------------------------------- */

typedef struct {
    rw_dtype type;
    rw_kernel_tier tier;
    double one_gbs, one_ref_gbs;     /* decode */
    double one_paired;               /* decode against a read of the same bytes, pass by pass (median) */
    double one_cached_gbs;           /* decode with the weights in cache */
    double many_gops, many_ref_gops; /* prefill */
    double few_cost[4];              /* FEW_ROWS rows: time relative to one row */
    size_t working_set;
} type_result;

/* Fastest pass (seconds) of n_rows-row matmuls over every matrix (every
 * shape of every copy), among passes run for at least min_time and
 * min_passes: the best pass, because the machine may be shared and a pass
 * can be interrupted. */
static double time_rows(const rw_matrix *mats, int n_mats, const float *x, float *y, int64_t n_rows,
                        rw_threadpool *pool, double min_time, int min_passes) {
    double start = now_s(), best = 1e30;
    int passes = 0;
    do {
        double t0 = now_s();
        for (int i = 0; i < n_mats; i++) rw_matmul(&mats[i], x, mats[i].n_in, n_rows, y, mats[i].n_out, pool, NULL);
        double dt = now_s() - t0;
        if (dt < best) best = dt;
        passes++;
    } while (now_s() - start < min_time || passes < min_passes);
    return best;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The one-row passes against the memory they read, pass by pass: each pass
 * of one-row matmuls over every matrix follows a streaming read of the same
 * weight copies with the same threads, and the result is the median over
 * passes of read time / matmul time. The machine's memory speed moves
 * between runs and within one (shared hosts); a read of the same bytes just
 * before each pass cancels that, where set against the best of a separate
 * read loop it does not. */
static double paired_share(const rw_matrix *mats, int n_mats, uint8_t *const *copies, int n_copies, size_t layer_bytes,
                           const float *x, float *y, rw_threadpool *pool, int passes) {
    double ratio[32];
    if (passes > 32) passes = 32;
    int n_tasks = rw_threadpool_size(pool);
    read_job j = {.chunk = layer_bytes / (size_t)n_tasks / 256 * 256};
    if (j.chunk == 0) return 0;
    for (int p = 0; p < passes; p++) {
        double t0 = now_s();
        for (int c = 0; c < n_copies; c++) {
            j.buf = copies[c];
            rw_threadpool_run(pool, read_task, &j, n_tasks);
        }
        double t_read = (now_s() - t0) * (double)layer_bytes / (double)(j.chunk * (size_t)n_tasks);
        t0 = now_s();
        for (int i = 0; i < n_mats; i++) rw_matmul(&mats[i], x, mats[i].n_in, 1, y, mats[i].n_out, pool, NULL);
        ratio[p] = t_read / (now_s() - t0);
    }
    qsort(ratio, (size_t)passes, sizeof ratio[0], cmp_double);
    return passes % 2 ? ratio[passes / 2] : 0.5 * (ratio[passes / 2 - 1] + ratio[passes / 2]);
}

/* One-row GB/s over a matrix that stays in each thread's L2 (every CPU
 * here has at least 1 MiB a core): 1024 columns, rows for about 384 KiB a
 * thread, from wbuf (at least that many bytes), timed as time_rows times
 * a pass over one matrix: that matrix repeated to about a millisecond of
 * work a pass. */
static double cached_gbs(rw_dtype t, const uint8_t *wbuf, size_t wbuf_bytes, const float *x, float *y,
                         rw_threadpool *pool, double min_time) {
    enum { MAX_REPS = 64 };
    uint64_t rb = 0;
    rw_dtype_row_bytes(t, 1024, &rb);
    int64_t rows = (int64_t)(384 * 1024) * rw_threadpool_size(pool) / (int64_t)rb / 16 * 16;
    if (rows < 16) rows = 16;
    if ((size_t)rows * rb > wbuf_bytes) rows = (int64_t)(wbuf_bytes / rb);
    if (rows > 6144) rows = 6144; /* y holds 6144 outputs a row */
    const double bytes = (double)rows * (double)rb;
    int reps = (int)(1e-3 * 20e9 / bytes) + 1; /* about 1 ms at 20 GB/s */
    if (reps > MAX_REPS) reps = MAX_REPS;
    rw_matrix ms[MAX_REPS];
    for (int r = 0; r < reps; r++) ms[r] = (rw_matrix){t, wbuf, 1024, rows, 0, NULL, NULL};
    time_rows(ms, 1, x, y, 1, pool, 0, 1); /* warm-up: into the caches */
    return bytes * reps / time_rows(ms, reps, x, y, 1, pool, min_time, 3) / 1e9;
}

/* GOP/s of n_rows-row matmuls over the many-row shapes (best of reps). */
static double many_row_gops(rw_dtype t, const uint8_t *wbuf, const float *x, float *y, int64_t n_rows,
                            rw_threadpool *pool, int reps) {
    double ops = 0, time = 0;
    for (size_t s = 0; s < sizeof many_shapes / sizeof many_shapes[0]; s++) {
        rw_matrix w = {t, wbuf, many_shapes[s].n_in, many_shapes[s].n_out, 0, NULL, NULL};
        void *panels = NULL; /* --stored-panels: packed once (rw_matmul_pack); else as a model: on the fly */
        if (stored_panels && rw_matmul_pack(&w, &panels, NULL) == RW_OK) w.panels = panels;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            rw_matmul(&w, x, many_shapes[s].n_in, n_rows, y, many_shapes[s].n_out, pool, NULL);
            double dt = now_s() - t0;
            if (dt < best) best = dt;
        }
        ops += 2.0 * (double)many_shapes[s].n_in * (double)many_shapes[s].n_out * (double)n_rows;
        time += best;
        free(panels);
    }
    return ops / time / 1e9;
}

static bool bench_type(rw_dtype t, rw_threadpool *pool, bool quick, type_result *r) {
    memset(r, 0, sizeof *r);
    r->type = t;
    rw_kernel_tier fast = rw_kernel_tier_current();
    r->tier = rw_kernel_tier_for(fast, t);
    size_t layer_bytes = 0;
    for (int s = 0; s < N_LAYER_SHAPES; s++) layer_bytes += matrix_bytes(t, &layer_shapes[s]);
    size_t target = (size_t)((quick ? 16 : 256) * MIB);
    int n_copies = (int)((target + layer_bytes - 1) / layer_bytes);
    r->working_set = layer_bytes * (size_t)n_copies;
    /* the weight copies, one buffer each; freed at the end */
    uint8_t **copies = calloc((size_t)n_copies, sizeof *copies);
    float *x = malloc(sizeof(float) * MANY_ROWS * 3584), *y = malloc(sizeof(float) * MANY_ROWS * 6144);
    bool ok = copies && x && y;
    for (int c = 0; ok && c < n_copies; c++) {
        copies[c] = aligned_alloc(64, (layer_bytes + 63) / 64 * 64);
        if (!copies[c]) ok = false;
        else rw_bench_fill_weights(t, copies[c], layer_bytes);
    }
    /* every matrix of every copy, as a loaded model has them (the rows as
     * they are; the panel form packs them on the fly), or with
     * --stored-panels their panels packed once (rw_matmul_pack) where the
     * kernel has a panel form */
    const int n_mats = n_copies * N_LAYER_SHAPES;
    rw_matrix *mats = ok ? calloc((size_t)n_mats, sizeof *mats) : NULL;
    void **panels = ok ? calloc((size_t)n_mats, sizeof *panels) : NULL;
    ok = ok && mats && panels;
    for (int c = 0; ok && c < n_copies; c++) {
        size_t off = 0;
        for (int s = 0; ok && s < N_LAYER_SHAPES; s++) {
            rw_matrix *w = &mats[c * N_LAYER_SHAPES + s];
            *w = (rw_matrix){
                .type = t, .data = copies[c] + off, .n_in = layer_shapes[s].n_in, .n_out = layer_shapes[s].n_out};
            ok = !stored_panels || rw_matmul_pack(w, &panels[c * N_LAYER_SHAPES + s], NULL) == RW_OK;
            w->panels = panels[c * N_LAYER_SHAPES + s];
            off += matrix_bytes(t, &layer_shapes[s]);
        }
    }
    if (ok) {
        for (int i = 0; i < MANY_ROWS * 3584; i++) x[i] = frand();
        double wbytes = (double)r->working_set;
        time_rows(mats, n_mats, x, y, 1, pool, 0, 1); /* warm-up: page faults, caches */
        double one = time_rows(mats, n_mats, x, y, 1, pool, quick ? 0 : 0.5, quick ? 1 : 3);
        r->one_gbs = wbytes / one / 1e9;
        r->one_paired = paired_share(mats, n_mats, copies, n_copies, layer_bytes, x, y, pool, quick ? 3 : 15);
        r->one_cached_gbs = cached_gbs(t, copies[0], layer_bytes, x, y, pool, quick ? 0.02 : 0.3);
        for (int f = 0; f < 4; f++)
            r->few_cost[f] = time_rows(mats, n_mats, x, y, few_rows[f], pool, quick ? 0 : 0.3, quick ? 1 : 2) / one;
        rw_kernel_tier_set(RW_TIER_REF);
        r->one_ref_gbs = wbytes / time_rows(mats, n_mats, x, y, 1, pool, 0, 1) / 1e9;
        r->many_ref_gops = many_row_gops(t, copies[0], x, y, quick ? 2 : REF_MANY_ROWS, pool, 1);
        rw_kernel_tier_set(fast);
        r->many_gops = many_row_gops(t, copies[0], x, y, quick ? 32 : MANY_ROWS, pool, quick ? 1 : 3);
    }
    for (int i = 0; panels && i < n_mats; i++) free(panels[i]);
    free(panels);
    free(mats);
    for (int c = 0; copies && c < n_copies; c++) free(copies[c]);
    free(copies);
    free(x);
    free(y);
    return ok;
}

/* ---- output -------------------------------------------------------------- */

void rw_bench_cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *p = strchr(line, ':');
        if (!p) break;
        p++;
        while (*p == ' ') p++;
        p[strcspn(p, "\n")] = 0;
        snprintf(buf, cap, "%s", p);
        break;
    }
    fclose(f);
}

static bool parse_types(const char *list, rw_dtype *out, int *n) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        rw_dtype t;
        if (!rw_dtype_from_name(tok, &t) || !rw_matmul_supports(t) || *n >= 64) return false;
        out[(*n)++] = t;
    }
    return *n > 0;
}

int rw_bench_opt_types(void *ctx, const char *cmd, const char *name, const char *v) {
    const rw_bench_types *kt = ctx;
    if (parse_types(v, kt->types, kt->n)) return 0;
    rw_cli_error(cmd, "bad %s '%s' (comma-separated matmul weight types)", name, v);
    return 2;
}

int rw_bench_kernels(int argc, char **argv) {
    bool json = false, quick = false;
    long threads = 0;
    rw_dtype types[64];
    int n_types = (int)(sizeof bench_types / sizeof bench_types[0]);
    memcpy(types, bench_types, sizeof bench_types);
    rw_bench_types kt = {types, &n_types};
    const rw_cli_opt opts[] = {
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--quick", RW_OPT_FLAG, &quick, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--stored-panels", RW_OPT_FLAG, &stored_panels, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        {"--types", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_bench_opt_types, &kt},
        RW_OPT_END,
    };
    if (rw_cli_parse_opts("bench kernels", argc, argv, opts, NULL, 0, NULL)) return 2;
    rw_error err;
    rw_threadpool *pool = NULL; /* freed at the end */
    if (rw_threadpool_new((int)threads, &pool, &err) != RW_OK) {
        rw_cli_error("bench", "%s", err.msg);
        return 1;
    }
    int n_threads = rw_threadpool_size(pool);
    char cpu[256];
    rw_bench_cpu_model(cpu, sizeof cpu);
    rw_kernel_tier tier = rw_kernel_tier_current();
    double bw = rw_cli_read_bandwidth(pool, (size_t)((quick ? 32 : 512) * MIB), quick ? 2 : 5);
    const double peak = rw_bench_int8_peak_gmacs();
    if (!json) {
        printf("rewind bench kernels: %s, %d thread%s, kernels %s, numerics %s, weights prefetched into %s\n", cpu,
               n_threads, n_threads > 1 ? "s" : "", rw_kernel_tier_name(tier), rw_get_numerics(),
               rw_get_weight_prefetch());
        printf("read bandwidth (streaming read of %d MiB): %.1f GB/s\n", quick ? 32 : 512, bw);
        if (peak > 0) /* a GOP/s figure below is two operations per multiply-add */
            printf("int8 peak of one core (512-bit vpdpbusd): %.1f GMAC/s = %.1f GOP/s a thread\n", peak, 2 * peak);
        printf("shapes (n_in x n_out): Qwen3.5-0.8B layer matrices 1024x6144, 1024x2048, 2048x1024, 1024x4096, "
               "1024x512 x2, 1024x3584 x2, 3584x1024; many-row: 1024x3584 and 3584x1024 with %d rows\n\n",
               quick ? 32 : MANY_ROWS);
        printf("%-7s %-6s | %9s %6s %6s %7s %9s %7s | %6s %6s %6s %6s | %9s %9s %7s\n", "type", "tier", "1-row",
               "of bw", "paired", "in L2", "ref", "speedup", "2-row", "4-row", "8-row", "16-row", "512-row", "ref",
               "speedup");
        printf("%-7s %-6s | %9s %6s %6s %7s %9s %7s | %27s | %9s %9s %7s\n", "", "", "GB/s", "", "", "GB/s", "GB/s", "",
               "time vs 1 row", "GOP/s", "GOP/s", "");
    }
    rw_json_writer jw;
    if (json) {
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "cpu"), rw_json_cstring(&jw, cpu);
        rw_json_key(&jw, "threads"), rw_json_int(&jw, n_threads);
        rw_json_key(&jw, "tier"), rw_json_cstring(&jw, rw_kernel_tier_name(tier));
        rw_json_key(&jw, "numerics"), rw_json_cstring(&jw, rw_get_numerics());
        rw_json_key(&jw, "read_bandwidth_gbs"), rw_json_double(&jw, bw, 4);
        rw_json_key(&jw, "int8_peak_gmacs_per_core"), rw_json_double(&jw, peak, 4);
        rw_json_key(&jw, "many_rows"), rw_json_int(&jw, quick ? 32 : MANY_ROWS);
        rw_json_key(&jw, "types");
        rw_json_begin_array(&jw);
    }
    int status = 0;
    for (int i = 0; i < n_types; i++) {
        type_result r;
        if (!bench_type(types[i], pool, quick, &r)) {
            rw_cli_error("bench", "out of memory benchmarking %s", rw_dtype_name(types[i]));
            status = 1;
            break;
        }
        if (json) {
            rw_json_begin_object(&jw);
            rw_json_key(&jw, "type"), rw_json_cstring(&jw, rw_dtype_name(r.type));
            rw_json_key(&jw, "tier"), rw_json_cstring(&jw, rw_kernel_tier_name(r.tier));
            rw_json_key(&jw, "working_set_bytes"), rw_json_uint(&jw, r.working_set);
            rw_json_key(&jw, "one_row_gbs"), rw_json_double(&jw, r.one_gbs, 4);
            rw_json_key(&jw, "one_row_share_of_bandwidth"), rw_json_double(&jw, r.one_gbs / bw, 4);
            rw_json_key(&jw, "one_row_share_of_paired_read"), rw_json_double(&jw, r.one_paired, 4);
            rw_json_key(&jw, "one_row_in_cache_gbs"), rw_json_double(&jw, r.one_cached_gbs, 4);
            rw_json_key(&jw, "one_row_ref_gbs"), rw_json_double(&jw, r.one_ref_gbs, 4);
            rw_json_key(&jw, "one_row_speedup"), rw_json_double(&jw, r.one_gbs / r.one_ref_gbs, 4);
            rw_json_key(&jw, "few_row_cost");
            rw_json_begin_object(&jw);
            for (int f = 0; f < 4; f++) {
                char k[8];
                snprintf(k, sizeof k, "%d", (int)few_rows[f]);
                rw_json_key(&jw, k), rw_json_double(&jw, r.few_cost[f], 4);
            }
            rw_json_end_object(&jw);
            rw_json_key(&jw, "many_row_gops"), rw_json_double(&jw, r.many_gops, 4);
            rw_json_key(&jw, "many_row_ref_gops"), rw_json_double(&jw, r.many_ref_gops, 4);
            rw_json_key(&jw, "many_row_speedup"), rw_json_double(&jw, r.many_gops / r.many_ref_gops, 4);
            rw_json_end_object(&jw);
        } else {
            printf("%-7s %-6s | %9.2f %5.0f%% %5.0f%% %7.2f %9.2f %6.1fx | %5.2fx %5.2fx %5.2fx %5.2fx | %9.1f %9.2f "
                   "%6.1fx\n",
                   rw_dtype_name(r.type), rw_kernel_tier_name(r.tier), r.one_gbs, 100 * r.one_gbs / bw,
                   100 * r.one_paired, r.one_cached_gbs, r.one_ref_gbs, r.one_gbs / r.one_ref_gbs, r.few_cost[0],
                   r.few_cost[1], r.few_cost[2], r.few_cost[3], r.many_gops, r.many_ref_gops,
                   r.many_gops / r.many_ref_gops);
            fflush(stdout);
        }
    }
    if (json) {
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        putchar('\n');
    }
    rw_threadpool_free(pool);
    return status;
}
