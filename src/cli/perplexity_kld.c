/* perplexity_kld.c - the KL divergence of `rewind perplexity`: a base file
 * of one model's log-probabilities over a text (--kl-divergence-base), and
 * the statistics of another model against it (--kl-divergence), in the
 * layout llama.cpp's llama-perplexity reads and writes, so that a base file
 * written by either program is read by the other.
 *
 * The file, little-endian as every host of either program: the 8 bytes
 * "_logits_", n_ctx (u32), n_vocab (i32), n_chunk (i32), the chunks'
 * tokens (i32, n_chunk * n_ctx, as the text gave them: a BOS put first for
 * the evaluation is not stored), then for each chunk its scored rows
 * (positions n_ctx / 2 .. n_ctx - 2, each predicting the next token) of
 * nv = 2 * ((n_vocab + 1) / 2) + 4 u16 each: two f32, scale and lo, then
 * one q per vocabulary token, whose log-probability is scale * q + lo. The
 * writer keeps the 16 nats below the row's largest logit in 65535 steps
 * (about 2.4e-4 nats) and stores anything lower as q = 0 (the KL sum leaves
 * such tokens out, as below 1e-7 of probability).
 *
 * Per scored token the statistics take the evaluated model's log-softmax
 * (log q, in double) and the base's decoded log p: KL = sum over tokens with
 * log p > -16 of p (log p - log q); the two NLLs of the actual next token;
 * dp = its probability under the model minus under the base; whether the
 * two argmaxes agree. Means and their standard errors as llama-perplexity
 * prints them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

static const char MAGIC[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
enum { KLD_HEAD = 8 + 3 * 4 };
#define SPAN  16.0f /* nats kept below a row's largest logit */
#define FLOOR -16.0f

struct rw_cli_kld {
    double nll, nll2, nllb, nllb2, nll_nllb, kld, kld2, dp, dp2, dp4;
    int64_t same_top, count, cap;
    float *kld_v, *dp_v; /* per scored token, for the percentiles; owned, cap each */
};

double rw_cli_log_prob(const float *row, int64_t n_vocab, int32_t tok) {
    double max = -INFINITY;
    for (int64_t v = 0; v < n_vocab; v++)
        if (row[v] > max) max = row[v];
    double sum = 0.0;
    for (int64_t v = 0; v < n_vocab; v++) sum += exp((double)row[v] - max);
    return (double)row[tok] - max - log(sum);
}

size_t rw_cli_kld_row_u16(int64_t n_vocab) { return (size_t)(2 * ((n_vocab + 1) / 2) + 4); }

static bool put_i32(FILE *f, int32_t v) { return fwrite(&v, 4, 1, f) == 1; }

bool rw_cli_kld_write_head(FILE *f, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk, const int32_t *tokens) {
    return fwrite(MAGIC, 8, 1, f) == 1 && put_i32(f, n_ctx) && put_i32(f, n_vocab) && put_i32(f, n_chunk) &&
           fwrite(tokens, 4, (size_t)n_ctx * (size_t)n_chunk, f) == (size_t)n_ctx * (size_t)n_chunk;
}

double rw_cli_kld_encode_row(const float *row, int64_t n_vocab, int32_t tok, uint16_t *out) {
    float max = row[0], min = row[0];
    for (int64_t v = 1; v < n_vocab; v++) {
        if (row[v] > max) max = row[v];
        if (row[v] < min) min = row[v];
    }
    const float lo = min > max - SPAN ? min : max - SPAN;
    double sum = 0.0;
    for (int64_t v = 0; v < n_vocab; v++) sum += exp((double)row[v] - max);
    const double ls = log(sum);
    const float head[2] = {(max - lo) / 65535.0f, (float)((double)lo - max - ls)}; /* scale, lo */
    memcpy(out, head, sizeof head);
    uint16_t *q = out + 4;
    const size_t nv = rw_cli_kld_row_u16(n_vocab);
    memset(q, 0, (nv - 4) * sizeof *q);
    if (head[0] > 0.0f)
        for (int64_t v = 0; v < n_vocab; v++)
            if (row[v] > lo) {
                const long s = lroundf((row[v] - lo) / head[0]);
                q[v] = (uint16_t)(s > 65535 ? 65535 : s);
            }
    return -((double)row[tok] - max - ls); /* rw_cli_log_prob's operations */
}

int rw_cli_kld_read_head(FILE *f, const char *path, int64_t n_vocab, int32_t *n_ctx, int32_t *n_chunk, int32_t **tokens,
                         char *msg, size_t msg_len) {
    *tokens = NULL;
    char magic[8];
    int32_t h[3];
    struct stat sb;
    if (fread(magic, 8, 1, f) != 1 || memcmp(magic, MAGIC, 8) || fread(h, 4, 3, f) != 3)
        return snprintf(msg, msg_len, "%s is not a base file of log-probabilities (llama-perplexity's layout)", path),
               1;
    if (h[1] != n_vocab)
        return snprintf(msg, msg_len, "%s holds a vocabulary of %d tokens, the model %lld", path, h[1],
                        (long long)n_vocab),
               1;
    if (h[0] < 4 || h[0] > (1 << 24) || h[2] < 1)
        return snprintf(msg, msg_len, "%s: bad sizes (context %d, %d chunks)", path, h[0], h[2]), 1;
    const double want =
        KLD_HEAD + 4.0 * h[0] * h[2] + 2.0 * (double)rw_cli_kld_row_u16(n_vocab) * (double)(h[0] - 1 - h[0] / 2) * h[2];
    if (fstat(fileno(f), &sb) || (double)sb.st_size != want)
        return snprintf(msg, msg_len, "%s has %lld bytes, not the %.0f of %d chunks of %d tokens", path,
                        (long long)sb.st_size, want, h[2], h[0]),
               1;
    const size_t n = (size_t)h[0] * (size_t)h[2];
    if (!(*tokens = malloc(n * sizeof **tokens))) return snprintf(msg, msg_len, "out of memory"), 1;
    if (fread(*tokens, 4, n, f) != n) {
        free(*tokens), *tokens = NULL;
        return snprintf(msg, msg_len, "%s: cannot read its tokens", path), 1;
    }
    for (size_t i = 0; i < n; i++)
        if ((*tokens)[i] < 0 || (*tokens)[i] >= n_vocab) {
            free(*tokens), *tokens = NULL;
            return snprintf(msg, msg_len, "%s: token %zu is out of the vocabulary", path, i), 1;
        }
    *n_ctx = h[0];
    *n_chunk = h[2];
    return 0;
}

rw_cli_kld *rw_cli_kld_new(int64_t n_values) {
    rw_cli_kld *k = calloc(1, sizeof *k); /* freed by rw_cli_kld_free */
    if (!k) return NULL;
    k->cap = n_values;
    k->kld_v = malloc((size_t)n_values * sizeof *k->kld_v);
    k->dp_v = malloc((size_t)n_values * sizeof *k->dp_v);
    if (!k->kld_v || !k->dp_v) rw_cli_kld_free(k), k = NULL;
    return k;
}

void rw_cli_kld_free(rw_cli_kld *k) {
    if (!k) return;
    free(k->kld_v);
    free(k->dp_v);
    free(k);
}

double rw_cli_kld_add(rw_cli_kld *k, const float *row, int64_t n_vocab, const uint16_t *base, int32_t tok) {
    float head[2];
    memcpy(head, base, sizeof head);
    const uint16_t *q = base + 4;
    int64_t top = 0, top_base = 0;
    for (int64_t v = 1; v < n_vocab; v++) {
        if (row[v] > row[top]) top = v;
        if (q[v] > q[top_base]) top_base = v; /* log p grows with q */
    }
    const double max = row[top];
    double sum = 0.0;
    for (int64_t v = 0; v < n_vocab; v++) sum += exp((double)row[v] - max);
    const double ls = log(sum), lse = max + ls; /* log q_v = row[v] - lse */
    double kld = 0.0;
    for (int64_t v = 0; v < n_vocab; v++) {
        const float lp = head[0] * (float)q[v] + head[1];
        if (lp > FLOOR) kld += exp((double)lp) * ((double)lp - ((double)row[v] - lse));
    }
    const double nll = -((double)row[tok] - max - ls), nllb = -(double)(head[0] * (float)q[tok] + head[1]);
    const double dp = exp(-nll) - exp(-nllb);
    k->nll += nll, k->nll2 += nll * nll;
    k->nllb += nllb, k->nllb2 += nllb * nllb;
    k->nll_nllb += nll * nllb;
    k->kld += kld, k->kld2 += kld * kld;
    k->dp += dp, k->dp2 += dp * dp, k->dp4 += dp * dp * dp * dp;
    k->same_top += top == top_base;
    if (k->count < k->cap) k->kld_v[k->count] = (float)kld, k->dp_v[k->count] = (float)dp;
    k->count++;
    return nll;
}

/* The mean of values with these sums and its standard error. */
typedef struct {
    double mean, err;
} est;

static est mean_err(double sum, double sum2, int64_t n) {
    if (n < 1) return (est){0, 0};
    const double m = sum / (double)n, var = sum2 / (double)n - m * m;
    return (est){m, var > 0 && n > 1 ? sqrt(var / (double)(n - 1)) : 0.0};
}

/* The covariance of the two means. */
static double mean_cov(double sa, double sb, double sab, int64_t n) {
    return n > 1 ? (sab / (double)n - (sa / (double)n) * (sb / (double)n)) / (double)(n - 1) : 0.0;
}

static est ln_ratio(const rw_cli_kld *k) {
    const est a = mean_err(k->nll, k->nll2, k->count), b = mean_err(k->nllb, k->nllb2, k->count);
    const double v = a.err * a.err + b.err * b.err - 2 * mean_cov(k->nll, k->nllb, k->nll_nllb, k->count);
    return (est){a.mean - b.mean, v > 0 ? sqrt(v) : 0.0};
}

static est rms_dp(const rw_cli_kld *k) {
    const est ms = mean_err(k->dp2, k->dp4, k->count);
    const double r = sqrt(ms.mean);
    return (est){r, r > 0 ? 0.5 / r * ms.err : 0.0};
}

static est same_top(const rw_cli_kld *k) {
    const double f = k->count ? (double)k->same_top / (double)k->count : 0.0;
    return (est){f, k->count > 1 ? sqrt(f * (1 - f) / (double)(k->count - 1)) : 0.0};
}

void rw_cli_kld_print_chunk(const rw_cli_kld *k, int64_t chunk, FILE *out) {
    if (chunk == 1)
        fprintf(out, "chunk        PPL              ln(PPL(Q)/PPL(base))      KL divergence             "
                     "RMS dp             same top\n");
    const est l = mean_err(k->nll, k->nll2, k->count), r = ln_ratio(k), d = mean_err(k->kld, k->kld2, k->count);
    const est p = rms_dp(k), t = same_top(k);
    fprintf(out, "%4lld %12.4f +/- %9.4f %10.5f +/- %9.5f %10.5f +/- %9.5f %7.3f +/- %6.3f %% %7.3f +/- %6.3f %%\n",
            (long long)chunk, exp(l.mean), exp(l.mean) * l.err, r.mean, r.err, d.mean, d.err, 100 * p.mean, 100 * p.err,
            100 * t.mean, 100 * t.err);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The value at fraction f of sorted v[0..n), interpolated between the two
 * nearest. */
static double pct(const float *v, int64_t n, double f) {
    const double at = f * (double)(n - 1);
    const int64_t i = (int64_t)at;
    return i + 1 < n ? v[i] + (at - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void print_spread(FILE *out, const char *name, float *v, int64_t n, double scale, const char *unit) {
    static const double F[] = {0.999, 0.99, 0.95, 0.90, 0.75, 0.5, 0.25, 0.10, 0.05, 0.01, 0.001};
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    fprintf(out, "Maximum %-4s: %12.6f%s\n", name, scale * v[n - 1], unit);
    for (size_t i = 0; i < sizeof F / sizeof *F; i++)
        fprintf(out, "%5.1f%%  %-4s: %12.6f%s\n", 100 * F[i], name, scale * pct(v, n, F[i]), unit);
    fprintf(out, "Minimum %-4s: %12.6f%s\n", name, scale * v[0], unit);
}

void rw_cli_kld_print_final(rw_cli_kld *k, FILE *out) {
    if (k->count < 1) return;
    const est l = mean_err(k->nll, k->nll2, k->count), lb = mean_err(k->nllb, k->nllb2, k->count);
    const est r = ln_ratio(k), d = mean_err(k->kld, k->kld2, k->count), dp = mean_err(k->dp, k->dp2, k->count);
    const est p = rms_dp(k), t = same_top(k);
    const double ppl = exp(l.mean), ppl_b = exp(lb.mean), cov = mean_cov(k->nll, k->nllb, k->nll_nllb, k->count);
    const double dv = ppl * l.err * ppl * l.err + ppl_b * lb.err * ppl_b * lb.err - 2 * ppl * ppl_b * cov;
    fprintf(out, "\n====== Perplexity statistics ======\n");
    fprintf(out, "Mean PPL(Q)                   : %12.6f +/- %10.6f\n", ppl, ppl * l.err);
    fprintf(out, "Mean PPL(base)                : %12.6f +/- %10.6f\n", ppl_b, ppl_b * lb.err);
    if (l.err > 0 && lb.err > 0)
        fprintf(out, "Cor(ln(PPL(Q)), ln(PPL(base))): %8.2f%%\n", 100 * cov / (l.err * lb.err));
    fprintf(out, "Mean ln(PPL(Q)/PPL(base))     : %12.6f +/- %10.6f\n", r.mean, r.err);
    fprintf(out, "Mean PPL(Q)/PPL(base)         : %12.6f +/- %10.6f\n", exp(r.mean), exp(r.mean) * r.err);
    fprintf(out, "Mean PPL(Q)-PPL(base)         : %12.6f +/- %10.6f\n", ppl - ppl_b, dv > 0 ? sqrt(dv) : 0.0);
    const int64_t n = k->count < k->cap ? k->count : k->cap;
    fprintf(out, "\n====== KL divergence statistics ======\n");
    fprintf(out, "Mean    KLD : %12.6f +/- %10.6f\n", d.mean, d.err);
    print_spread(out, "KLD", k->kld_v, n, 1.0, "");
    fprintf(out, "\n====== Token probability statistics ======\n");
    fprintf(out, "Mean    dp  : %12.6f +/- %10.6f %%\n", 100 * dp.mean, 100 * dp.err);
    print_spread(out, "dp", k->dp_v, n, 100.0, " %");
    fprintf(out, "RMS dp      : %12.6f +/- %10.6f %%\n", 100 * p.mean, 100 * p.err);
    fprintf(out, "Same top p  : %12.6f +/- %10.6f %%\n", 100 * t.mean, 100 * t.err);
}
