/* perplexity_hellaswag.c - `rewind perplexity MODEL --hellaswag -f FILE`:
 * the HellaSwag score (acc_norm) as llama.cpp's llama-perplexity computes
 * it, on its data file: six lines a task (the context, the index 0-3 of
 * the right ending, the four endings).
 *
 * Each ending is scored as the context, a space and the ending, tokenized
 * as a text (BOS when the vocabulary asks): its tokens past the prefix the
 * four tokenizations share, each one's log-probability given all before
 * it, averaged over those tokens; the task counts as right when the right
 * ending has the highest average (the first of equal ones). The shared
 * prefix is evaluated once and the sequence rewound to its end before each
 * ending: a rewind is exact, so every ending sees the state it would have
 * after the prefix alone.
 *
 * llama-perplexity draws --hellaswag-tasks N tasks at random (with its own
 * generator); rewind takes the first N, so the two agree on the whole file,
 * and on the first N when N is every task. After each task: its number,
 * the accuracy so far in percent and its 95% Wilson score interval, as
 * llama-perplexity prints them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The line of text from *p (up to its '\n', which is dropped), *p moved
 * past it; NULL at the end. A "\r" before the '\n' is dropped too. */
static char *next_line(char **p, char *end) {
    if (*p >= end) return NULL;
    char *l = *p, *nl = memchr(l, '\n', (size_t)(end - l));
    char *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    if (e > l && e[-1] == '\r') e--;
    *e = 0;
    return l;
}

/* The 95% Wilson score interval of k right of n. */
static void wilson(double k, double n, double *lo, double *hi) {
    const double z = 1.959963984540054, z2n = z * z / n, p = k / n;
    const double mid = p + z2n / 2, half = z * sqrt(p * (1 - p) / n + z2n / (4 * n));
    *lo = (mid - half) / (1 + z2n);
    *hi = (mid + half) / (1 + z2n);
}

/* One task's average log-probability of each ending (ids[e], n[e] tokens,
 * past the shared prefix of cp tokens) on s; rows holds cap rows. */
static rw_status score_task(rw_seq *s, int32_t *const ids[4], const size_t n[4], size_t cp, float *rows, int64_t cap,
                            int64_t n_vocab, double score[4], rw_error *err) {
    rw_status st = rw_seq_rewind(s, 0, err);
    if (!st) st = rw_seq_eval(s, ids[0], (int64_t)cp, rows, err); /* the prefix's last row */
    if (st) return st;
    double first[4];
    for (int e = 0; e < 4; e++) first[e] = rw_cli_log_prob(rows, n_vocab, ids[e][cp]);
    for (int e = 0; e < 4; e++) {
        double sum = first[e];
        /* tokens cp .. n - 2 predict cp + 1 .. n - 1; the last one is not run */
        for (size_t at = cp; !st && at + 1 < n[e]; at += (size_t)cap) {
            const int64_t k = (int64_t)(n[e] - 1 - at) < cap ? (int64_t)(n[e] - 1 - at) : cap;
            const rw_seq_batch b = {.seq = s, .ids = ids[e] + at, .n = k, .logits = rows, .all_logits = true};
            if (at == cp) st = rw_seq_rewind(s, (int64_t)cp, err);
            if (!st) st = rw_seq_eval_batch(&b, 1, err);
            for (int64_t j = 0; !st && j < k; j++)
                sum += rw_cli_log_prob(rows + j * n_vocab, n_vocab, ids[e][at + j + 1]);
        }
        if (st) return st;
        score[e] = sum / (double)(n[e] - cp);
    }
    return RW_OK;
}

int rw_cli_hellaswag(const char *cmd, rw_model *m, char *text, size_t len, long max_tasks, long n_ctx, int kv_f32) {
    char *p = text, *end = text + len;
    size_t n_lines = 0;
    for (char *q = text; q < end; q++) n_lines += *q == '\n';
    n_lines += len && end[-1] != '\n';
    if (n_lines % 6 || !n_lines) {
        rw_cli_error(cmd, "a HellaSwag file has six lines a task; this one has %zu lines", n_lines);
        return 1;
    }
    size_t n_tasks = n_lines / 6;
    if (max_tasks > 0 && (size_t)max_tasks < n_tasks) n_tasks = (size_t)max_tasks;
    const int64_t n_vocab = rw_model_n_vocab(m);
    int64_t cap = (64 << 20) / (n_vocab * (int64_t)sizeof(float)); /* rows of logits at once */
    if (cap < 1) cap = 1;
    rw_seq *s = NULL;
    rw_error err = {0};
    float *rows = malloc((size_t)(cap * n_vocab) * sizeof *rows); /* freed below */
    int32_t *ids[4] = {0};                                        /* the library's (rw_free) */
    char *joined = NULL;                                          /* context, space, ending; freed below */
    int rc = 1;
    if (!rows) {
        rw_cli_error(cmd, "out of memory");
        goto done;
    }
    if (rw_seq_new(m, n_ctx, kv_f32, &s, &err)) goto fail;
    fprintf(stderr, "%s: %zu HellaSwag tasks of %zu\n", cmd, n_tasks, n_lines / 6);
    printf("task\tacc_norm\t95%% confidence interval\n");
    double right = 0;
    for (size_t t = 0; t < n_tasks; t++) {
        char *line[6];
        for (int i = 0; i < 6; i++) line[i] = next_line(&p, end);
        char *tail = NULL;
        const long gold = strtol(line[1], &tail, 10);
        if (tail == line[1] || *tail || gold < 0 || gold > 3) {
            rw_cli_error(cmd, "task %zu: the right ending's index is '%s', not 0-3", t + 1, line[1]);
            goto done;
        }
        size_t n[4];
        for (int e = 0; e < 4; e++) {
            const size_t lc = strlen(line[0]), le = strlen(line[2 + e]);
            free(joined);
            if (!(joined = malloc(lc + le + 2))) {
                rw_cli_error(cmd, "out of memory");
                goto done;
            }
            memcpy(joined, line[0], lc);
            joined[lc] = ' ';
            memcpy(joined + lc + 1, line[2 + e], le + 1);
            rw_free(ids[e]);
            ids[e] = NULL;
            if (rw_model_tokenize(m, joined, lc + le + 1, true, false, &ids[e], &n[e], &err)) goto fail;
            if ((int64_t)n[e] > n_ctx) {
                rw_cli_error(cmd, "task %zu: %zu tokens, more than --ctx %ld", t + 1, n[e], n_ctx);
                goto done;
            }
        }
        size_t cp = 0; /* the tokens all four share */
        while (cp < n[0] && cp < n[1] && cp < n[2] && cp < n[3] && ids[0][cp] == ids[1][cp] &&
               ids[0][cp] == ids[2][cp] && ids[0][cp] == ids[3][cp])
            cp++;
        if (!cp || cp == n[0] || cp == n[1] || cp == n[2] || cp == n[3]) {
            rw_cli_error(cmd, "task %zu: %s", t + 1,
                         cp ? "an ending adds no token to what the four share" : "the endings share no first token");
            goto done;
        }
        double score[4];
        if (score_task(s, ids, n, cp, rows, cap, n_vocab, score, &err)) goto fail;
        int best = 0;
        for (int e = 1; e < 4; e++)
            if (score[e] > score[best]) best = e;
        right += best == gold;
        double lo, hi;
        wilson(right, (double)(t + 1), &lo, &hi);
        printf("%zu\t%3.8f%%\t[%3.4f%%, %3.4f%%]\n", t + 1, 100 * right / (double)(t + 1), 100 * lo, 100 * hi);
        fflush(stdout);
    }
    double lo, hi;
    wilson(right, (double)n_tasks, &lo, &hi);
    printf("\nFinal HellaSwag acc_norm = %.4f%% [%.4f%%, %.4f%%] over %zu tasks\n", 100 * right / (double)n_tasks,
           100 * lo, 100 * hi, n_tasks);
    rc = 0;
    goto done;
fail:
    rw_cli_error(cmd, "%s", err.msg);
done:
    for (int e = 0; e < 4; e++) rw_free(ids[e]);
    free(joined);
    rw_seq_free(s);
    free(rows);
    return rc;
}
