/* bench_experts.c - `rewind bench experts`: a mixture of experts' products
 * at the row counts a prefill gives each expert.
 *
 * A MoE prefill of T tokens with k of E experts a token gives each expert
 * about T*k/E rows: Qwen3-Next (512 experts, 10 a token) about 10 at 512
 * tokens, Qwen3.5-35B-A3B (256, 8) about 16. Those products are few-row
 * products whose weights come from memory once each, which `bench kernels`
 * (one dense matrix, its rows spread over all the threads) does not show.
 * Here one grouped product (rw_matmul_grouped, as the models call it: rows
 * gathered from a batch of activations, outputs in place) multiplies
 * --experts experts of one shape with the same number of rows each, for
 * each row count of --rows, on the two shapes of the experts' FFN of
 * Qwen3.5-35B-A3B and Qwen3-Next (hidden 2048, expert FFN 512): gate/up
 * (2048 -> 512) and down (512 -> 2048). With the default 128 experts a
 * Q4_K call reads 75 MB of weights, beyond any cache.
 *
 * Reported per type, shape and row count: the best call's time (passes of
 * at least 0.3 s), its GOP/s (2 operations per multiply-add) and its time
 * relative to one row an expert.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "base/threadpool.h"
#include "cli/cli.h"
#include "kernels/matmul.h"

enum { MAX_ROW_COUNTS = 16, N_TOKENS = 512 };

typedef struct {
    const char *name;
    int64_t n_in, n_out;
} expert_shape;

static const expert_shape shapes[] = {{"gate/up", 2048, 512}, {"down", 512, 2048}};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --rows 1,2,4,...: counts in 1..N_TOKENS */
typedef struct {
    int64_t *v;
    int *n;
} row_counts;

static int opt_rows(void *ctx, const char *cmd, const char *name, const char *v) {
    const row_counts *rc = ctx;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    *rc->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        const long r = strtol(tok, &end, 10);
        if (*end || r < 1 || r > N_TOKENS || *rc->n >= MAX_ROW_COUNTS) {
            rw_cli_error(cmd, "bad %s '%s' (comma-separated row counts, 1..%d, at most %d)", name, v, N_TOKENS,
                         MAX_ROW_COUNTS);
            return 2;
        }
        rc->v[(*rc->n)++] = r;
    }
    return 0;
}

/* The best time (s) of one grouped call of n_experts experts with rows
 * rows each, over passes of at least 0.3 s; -1 on an error (in err). */
static double time_call(const rw_matrix *w, size_t expert_bytes, const void *panels, int n_experts, int64_t rows,
                        const float *x, float *y, rw_threadpool *pool, rw_error *err) {
    rw_matmul_group *g = calloc((size_t)n_experts, sizeof *g); /* freed below */
    int32_t *xr = malloc(sizeof *xr * (size_t)(n_experts * rows));
    double best = -1;
    if (g && xr) {
        for (int e = 0; e < n_experts; e++) {
            /* rows of the batch spread as a router would (no two alike within an expert) */
            for (int64_t r = 0; r < rows; r++) xr[e * rows + r] = (int32_t)((r * 37 + e * 11) % N_TOKENS);
            g[e] = (rw_matmul_group){.data = (const uint8_t *)w->data + (size_t)e * expert_bytes,
                                     .x_rows = xr + e * rows,
                                     .n_rows = rows,
                                     .y_row0 = e * rows,
                                     .panels = panels};
        }
        const double start = now_s();
        int passes = 0;
        do {
            const double t0 = now_s();
            if (rw_matmul_grouped(w, g, n_experts, x, w->n_in, y, w->n_out, pool, err) != RW_OK) {
                best = -1;
                break;
            }
            const double dt = now_s() - t0;
            if (best < 0 || dt < best) best = dt;
            passes++;
        } while (now_s() - start < 0.3 || passes < 3);
    } else {
        rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    free(xr);
    free(g);
    return best;
}

int rw_bench_experts(int argc, char **argv) {
    bool json = false, stored = false;
    long threads = 0, n_experts = 128;
    rw_dtype types[64] = {RW_TYPE_Q4_K, RW_TYPE_Q6_K};
    int n_types = 2;
    int64_t rows[MAX_ROW_COUNTS] = {1, 2, 4, 8, 12, 16, 24, 32, 64};
    int n_rows = 9;
    rw_bench_types bt = {types, &n_types};
    row_counts rc = {rows, &n_rows};
    const rw_cli_opt opts[] = {
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--experts", RW_OPT_INT, &n_experts, 1, 4096, 0, 0, NULL, NULL, NULL},
        {"--stored-panels", RW_OPT_FLAG, &stored, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--types", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_bench_opt_types, &bt},
        {"--rows", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_rows, &rc},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        RW_OPT_END,
    };
    if (rw_cli_parse_opts("bench experts", argc, argv, opts, NULL, 0, NULL)) return 2;
    rw_error err;
    rw_threadpool *pool = NULL; /* freed at the end */
    if (rw_threadpool_new((int)threads, &pool, &err) != RW_OK) {
        rw_cli_error("bench experts", "%s", err.msg);
        return 1;
    }
    char cpu[256];
    rw_bench_cpu_model(cpu, sizeof cpu);
    const int n_threads = rw_threadpool_size(pool);
    const rw_kernel_tier tier = rw_kernel_tier_current();
    rw_json_writer jw;
    if (json) {
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
        rw_json_key(&jw, "cpu"), rw_json_cstring(&jw, cpu);
        rw_json_key(&jw, "threads"), rw_json_int(&jw, n_threads);
        rw_json_key(&jw, "tier"), rw_json_cstring(&jw, rw_kernel_tier_name(tier));
        rw_json_key(&jw, "experts"), rw_json_int(&jw, n_experts);
        rw_json_key(&jw, "results");
        rw_json_begin_array(&jw);
    } else {
        printf("rewind bench experts: %s, %d thread%s, kernels %s, numerics %s, %ld experts a call, each expert's "
               "rows gathered from %d%s\n",
               cpu, n_threads, n_threads > 1 ? "s" : "", rw_kernel_tier_name(tier), rw_get_numerics(), n_experts,
               N_TOKENS, stored ? ", stored panels where the tier has them" : "");
        printf("%-6s %-8s %9s | %s\n", "type", "shape", "MB", "rows an expert: call ms, GOP/s, time vs 1 row");
    }
    /* activations: N_TOKENS rows of the widest n_in; outputs: the most rows of the widest n_out */
    int64_t max_rows = 1;
    for (int i = 0; i < n_rows; i++) max_rows = rows[i] > max_rows ? rows[i] : max_rows;
    float *x = malloc(sizeof(float) * N_TOKENS * 2048),
          *y = malloc(sizeof(float) * (size_t)(n_experts * max_rows) * 2048);
    int status = x && y ? 0 : 1;
    for (int64_t i = 0; x && i < (int64_t)N_TOKENS * 2048; i++)
        x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    for (int ti = 0; ti < n_types && !status; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !status; si++) {
            const expert_shape *s = &shapes[si];
            uint64_t rb = 0;
            rw_dtype_row_bytes(types[ti], (uint64_t)s->n_in, &rb);
            const size_t eb = (size_t)rb * (size_t)s->n_out;
            uint8_t *wbuf = malloc(eb * (size_t)n_experts); /* freed below */
            if (!wbuf) {
                status = 1;
                break;
            }
            rw_bench_fill_weights(types[ti], wbuf, eb * (size_t)n_experts);
            const rw_matrix w = {.type = types[ti], .data = wbuf, .n_in = s->n_in, .n_out = s->n_out};
            /* --stored-panels: the experts as one matrix in stored panels, as a
             * model keeps them where they take the rows' bytes (models/experts.c) */
            void *panels = NULL;
            if (stored) {
                rw_matrix all = w;
                all.n_out = s->n_out * n_experts;
                if (rw_matmul_pack(&all, &panels, &err) != RW_OK) {
                    rw_cli_error("bench experts", "%s", err.msg);
                    free(wbuf);
                    status = 1;
                    break;
                }
            }
            if (!json)
                printf("%-6s %-8s %9.1f |", rw_dtype_name(types[ti]), s->name, 1e-6 * (double)(eb * (size_t)n_experts));
            double one = 0;
            for (int ri = 0; ri < n_rows && !status; ri++) {
                const double t = time_call(&w, eb, panels, (int)n_experts, rows[ri], x, y, pool, &err);
                if (t < 0) {
                    rw_cli_error("bench experts", "%s", err.msg);
                    status = 1;
                    break;
                }
                if (rows[ri] == 1) one = t;
                const double gops = 2.0 * (double)(n_experts * rows[ri]) * (double)(s->n_in * s->n_out) / t * 1e-9;
                if (json) {
                    rw_json_begin_object(&jw);
                    rw_json_key(&jw, "type"), rw_json_cstring(&jw, rw_dtype_name(types[ti]));
                    rw_json_key(&jw, "shape"), rw_json_cstring(&jw, s->name);
                    rw_json_key(&jw, "n_in"), rw_json_int(&jw, s->n_in);
                    rw_json_key(&jw, "n_out"), rw_json_int(&jw, s->n_out);
                    rw_json_key(&jw, "rows"), rw_json_int(&jw, rows[ri]);
                    rw_json_key(&jw, "call_ms"), rw_json_double(&jw, 1e3 * t, 4);
                    rw_json_key(&jw, "gops"), rw_json_double(&jw, gops, 4);
                    if (one > 0) rw_json_key(&jw, "time_vs_one_row"), rw_json_double(&jw, t / one, 4);
                    rw_json_end_object(&jw);
                } else {
                    printf(" %lld: %.2f ms %.0f", (long long)rows[ri], 1e3 * t, gops);
                    if (one > 0 && rows[ri] > 1) printf(" %.2fx", t / one);
                    printf(";");
                    fflush(stdout);
                }
            }
            if (!json) printf("\n");
            free(wbuf);
            free(panels);
        }
    if (json) {
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        putchar('\n');
    }
    if (!x || !y) rw_cli_error("bench experts", "out of memory");
    free(x);
    free(y);
    rw_threadpool_free(pool);
    return status;
}
