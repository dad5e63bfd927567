/* bench_grammar.c - `rewind bench grammar VOCAB.gguf [--walks N] [--tokens N] [--json]`.
 *
 * The cost of grammar-constrained decoding per token on a real vocabulary
 * (e.g. ../shared/fixtures/tokenizer/ggml-vocab-qwen3.gguf, 151,936 tokens),
 * as the engine pays it: for each case a fresh grammar per generation (the
 * engine compiles one per request, so its caches start cold), then per
 * token: copy the logit row, compute the mask, apply it, accept the chosen
 * token. The tokens come from a seeded random walk over the allowed ones
 * (biased towards closing quotes and brackets so that outputs end), N walks
 * of up to T tokens each. Reported per case: schema -> GBNF -> compiled
 * grammar time (median of 20), and microseconds per token (mean, p50, p99,
 * max) with the masks computed (cache misses), the dearest token's work
 * units (grammar.h's budget) and the nanoseconds per unit over all tokens. Times are the thread's CPU
 * time (CLOCK_THREAD_CPUTIME_ID), not wall time: on a loaded machine the
 * wall-time tail is the scheduler's, not ours. The vocabulary
 * trie's build time (once per tokenizer) is printed first.
 *
 * Cases: a flat object, a nested object with arrays, an enum-heavy object,
 * and a recursive any-JSON grammar (GBNF). Compare the p99 with a decode
 * step of the model (rewind bench model). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_writer.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

static const char *CMD = "bench grammar";

/* CPU time of this thread: on a shared machine, wall time per token is
 * dominated by preemption at the tail (a 20 us mask "taking" 10 ms) */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char FLAT[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\"},\"active\":{\"type\":\"boolean\"},\"score\":{\"type\":\"number\"}},"
    "\"required\":[\"name\",\"age\",\"email\",\"active\",\"score\"],\"additionalProperties\":false}";
static const char NESTED[] =
    "{\"type\":\"object\",\"properties\":{\"user\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
    "\"string\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":8},\"address\":{"
    "\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\",\"pattern\":"
    "\"^[0-9]{5}$\"}},\"required\":[\"city\",\"zip\"],\"additionalProperties\":false}},\"required\":[\"name\","
    "\"tags\",\"address\"],\"additionalProperties\":false},\"orders\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"items\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"number\"}},\"date\":{\"type\":\"string\",\"format\":\"date\"}},\"required\":[\"id\",\"items\",\"date\"],"
    "\"additionalProperties\":false},\"maxItems\":5}},\"required\":[\"user\",\"orders\"],"
    "\"additionalProperties\":false}";
static const char ENUMS[] =
    "{\"type\":\"object\",\"properties\":{\"country\":{\"enum\":[\"Afghanistan\",\"Albania\",\"Algeria\","
    "\"Andorra\",\"Angola\",\"Argentina\",\"Armenia\",\"Australia\",\"Austria\",\"Azerbaijan\",\"Bahamas\","
    "\"Bahrain\",\"Bangladesh\",\"Barbados\",\"Belarus\",\"Belgium\",\"Belize\",\"Benin\",\"Bhutan\",\"Bolivia\","
    "\"Botswana\",\"Brazil\",\"Brunei\",\"Bulgaria\",\"Burundi\",\"Cambodia\",\"Cameroon\",\"Canada\",\"Chad\","
    "\"Chile\",\"China\",\"Colombia\",\"Comoros\",\"Congo\",\"Croatia\",\"Cuba\",\"Cyprus\",\"Denmark\","
    "\"Djibouti\",\"Dominica\",\"Ecuador\",\"Egypt\",\"Eritrea\",\"Estonia\",\"Ethiopia\",\"Fiji\",\"Finland\","
    "\"France\",\"Gabon\",\"Gambia\",\"Georgia\",\"Germany\",\"Ghana\",\"Greece\",\"Grenada\",\"Guatemala\","
    "\"Guinea\",\"Guyana\",\"Haiti\",\"Honduras\",\"Hungary\",\"Iceland\",\"India\",\"Indonesia\",\"Iran\","
    "\"Iraq\",\"Ireland\",\"Israel\",\"Italy\",\"Jamaica\",\"Japan\",\"Jordan\",\"Kazakhstan\",\"Kenya\"]},"
    "\"colors\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"orange\",\"yellow\",\"green\",\"blue\","
    "\"indigo\",\"violet\",\"black\",\"white\",\"grey\",\"brown\",\"pink\"]},\"maxItems\":6},\"size\":{\"enum\":"
    "[\"xs\",\"s\",\"m\",\"l\",\"xl\",\"xxl\"]},\"status\":{\"enum\":[\"active\",\"inactive\",\"pending\","
    "\"deleted\",\"archived\"]}},\"required\":[\"country\",\"colors\",\"size\",\"status\"],"
    "\"additionalProperties\":false}";
static const char JSON_GBNF[] =
    "root   ::= value\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)* )? \"}\"\n"
    "array  ::= \"[\" ws ( value ws (\",\" ws value ws)* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\"\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?\n"
    "ws     ::= [ \\t\\n]{0,4}\n";

typedef struct {
    const char *name;
    const char *text;
    bool schema;
} bcase;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static rw_status compile_case(const bcase *c, rw_grammar **g, rw_error *err) {
    if (!c->schema) return rw_grammar_compile(c->text, strlen(c->text), NULL, g, err);
    return rw_grammar_compile_schema(c->text, strlen(c->text), g, err);
}

int rw_bench_grammar(int argc, char **argv) {
    const char *path = NULL;
    long walks = 20, max_tok = 300;
    bool json = false;
    const char *schema_file = NULL, *gbnf_file = NULL;
    const rw_cli_opt opts[] = {
        {"--schema", RW_OPT_STR, &schema_file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--gbnf", RW_OPT_STR, &gbnf_file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--walks", RW_OPT_INT, &walks, 1, 100000, 0, 0, NULL, NULL, NULL},
        {"--tokens", RW_OPT_INT, &max_tok, 1, 1000000, 0, 0, NULL, NULL, NULL},
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &path, 1, NULL);
    if (prc == RW_CLI_HELP) return 0;
    if (prc == 2) return 2;
    if (prc || !path) {
        fprintf(stderr, "usage: rewind bench grammar VOCAB.gguf [--walks N] [--tokens N] [--schema FILE.json | --gbnf "
                        "FILE.gbnf] [--json]\n");
        return 2;
    }
    rw_error err = {0};
    rw_gguf *gg = NULL;
    rw_tokenizer *tok = NULL;
    if (rw_gguf_open(path, &gg, &err) || rw_tokenizer_load(gg, &tok, &err)) {
        rw_cli_error(CMD, "%s: %s", path, err.msg);
        rw_gguf_close(gg);
        return 1;
    }
    const int32_t nv = rw_tokenizer_n_vocab(tok);
    double t0 = now_s();
    rw_grammar_vocab *v = NULL;
    if (rw_grammar_vocab_from_tokenizer(tok, &v, &err)) {
        rw_cli_error(CMD, "%s", err.msg);
        return 1;
    }
    const double t_vocab = now_s() - t0;
    /* closers for the walk: '"', '}', ']' as single tokens */
    int32_t closers[3] = {-1, -1, -1};
    const char *cl[3] = {"\"", "}", "]"};
    for (int i = 0; i < 3; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (!rw_tokenize(tok, cl[i], 1, false, false, &ids, &n, NULL) && n == 1) closers[i] = ids[0];
        free(ids);
    }
    const size_t words = rw_grammar_mask_words(nv);
    uint32_t *mask = malloc(words * sizeof *mask);
    float *logits = malloc((size_t)nv * sizeof *logits), *row = malloc((size_t)nv * sizeof *row);
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    double *per_tok = malloc((size_t)(walks * max_tok) * sizeof *per_tok);
    if (!mask || !logits || !row || !allowed || !per_tok) {
        rw_cli_error(CMD, "out of memory");
        return 1;
    }
    for (int32_t i = 0; i < nv; i++) logits[i] = (float)((i * 2654435761u) % 1000) * 0.001f;
    bcase cases[] = {{"flat object", FLAT, true},
                     {"nested + arrays", NESTED, true},
                     {"enum-heavy", ENUMS, true},
                     {"recursive JSON (GBNF)", JSON_GBNF, false}};
    size_t n_cases = sizeof cases / sizeof *cases;
    char *own = NULL; /* --schema / --gbnf: that file is the one case; freed at the end */
    if (schema_file || gbnf_file) {
        size_t len = 0;
        own = rw_cli_read_file(schema_file ? schema_file : gbnf_file, &len);
        if (!own) {
            rw_cli_error(CMD, "cannot read %s", schema_file ? schema_file : gbnf_file);
            return 1;
        }
        cases[0] = (bcase){schema_file ? schema_file : gbnf_file, own, schema_file != NULL};
        n_cases = 1;
    }
    rw_json_writer jw;
    if (json) {
        rw_json_init(&jw, stdout);
        rw_json_begin_object(&jw);
    } else {
        printf("vocabulary: %s, %d tokens; trie built in %.1f ms\n", path, (int)nv, t_vocab * 1e3);
        printf("%-24s %10s %8s %8s %8s %8s %8s %7s %9s %6s\n", "case", "compile ms", "tokens", "mean us", "p50 us",
               "p99 us", "max us", "misses", "max work", "ns/w");
    }
    if (json) {
        rw_json_key(&jw, "vocab_tokens");
        rw_json_int(&jw, nv);
        rw_json_key(&jw, "vocab_build_ms");
        rw_json_double(&jw, t_vocab * 1e3, 3);
        rw_json_key(&jw, "cases");
        rw_json_begin_array(&jw);
    }
    for (size_t c = 0; c < n_cases; c++) {
        double comp[20];
        for (int r = 0; r < 20; r++) {
            rw_grammar *g = NULL;
            double a = now_s();
            if (compile_case(&cases[c], &g, &err)) {
                rw_cli_error(CMD, "%s: %s", cases[c].name, err.msg);
                return 1;
            }
            comp[r] = now_s() - a;
            rw_grammar_free(g);
        }
        qsort(comp, 20, sizeof *comp, cmp_d);
        long n_tok = 0, misses = 0;
        int64_t work_max = 0, work_sum = 0;
        double time_sum = 0;
        uint64_t x = 88172645463325252ull;
        for (long w = 0; w < walks; w++) {
            rw_grammar *g = NULL;
            rw_grammar_matcher *m = NULL;
            if (compile_case(&cases[c], &g, &err) || rw_grammar_matcher_new(g, v, &m, &err)) {
                rw_cli_error(CMD, "%s", err.msg);
                return 1;
            }
            for (long t = 0; t < max_tok; t++) {
                /* the engine's work for one token: copy, mask, apply, accept */
                const int64_t w0 = rw_grammar_get_stats(g).work;
                double a = now_s();
                memcpy(row, logits, (size_t)nv * sizeof *row);
                if (rw_grammar_matcher_fill_mask(m, mask, &err)) {
                    rw_cli_error(CMD, "%s", err.msg);
                    return 1;
                }
                rw_grammar_apply_mask(mask, row, nv, NULL, 0);
                double spent = now_s() - a;
                int na = 0;
                for (size_t wd = 0; wd < words; wd++)
                    for (uint32_t bits = mask[wd]; bits; bits &= bits - 1)
                        allowed[na++] = (int32_t)(wd * 32 + (size_t)__builtin_ctz(bits));
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                if (rw_grammar_matcher_can_end(m) && (na == 0 || x % 2 == 0)) break;
                if (na == 0) break;
                int32_t pick = -1;
                if (x % 3 == 1)
                    for (int i = 0; i < 3 && pick < 0; i++)
                        if (closers[i] >= 0 && ((mask[closers[i] >> 5] >> (closers[i] & 31)) & 1)) pick = closers[i];
                if (pick < 0) pick = allowed[(x >> 11) % (uint64_t)na];
                a = now_s();
                rw_grammar_matcher_accept(m, pick, NULL);
                spent += now_s() - a;
                const int64_t wk = rw_grammar_get_stats(g).work - w0;
                if (wk > work_max) work_max = wk;
                work_sum += wk;
                time_sum += spent;
                per_tok[n_tok++] = spent;
            }
            misses += rw_grammar_get_stats(g).masks_computed;
            rw_grammar_matcher_free(m);
            rw_grammar_free(g);
        }
        double sum = 0;
        for (long i = 0; i < n_tok; i++) sum += per_tok[i];
        qsort(per_tok, (size_t)n_tok, sizeof *per_tok, cmp_d);
        const double mean = n_tok ? sum / (double)n_tok : 0, p50 = n_tok ? per_tok[n_tok / 2] : 0;
        const double p99 = n_tok ? per_tok[(long)floor(0.99 * (double)(n_tok - 1))] : 0;
        const double mx = n_tok ? per_tok[n_tok - 1] : 0;
        if (json) {
            rw_json_begin_object(&jw);
            rw_json_key(&jw, "case");
            rw_json_cstring(&jw, cases[c].name);
            rw_json_key(&jw, "compile_ms_median");
            rw_json_double(&jw, comp[10] * 1e3, 3);
            rw_json_key(&jw, "tokens");
            rw_json_int(&jw, n_tok);
            rw_json_key(&jw, "us_mean");
            rw_json_double(&jw, mean * 1e6, 3);
            rw_json_key(&jw, "us_p50");
            rw_json_double(&jw, p50 * 1e6, 3);
            rw_json_key(&jw, "us_p99");
            rw_json_double(&jw, p99 * 1e6, 3);
            rw_json_key(&jw, "us_max");
            rw_json_double(&jw, mx * 1e6, 3);
            rw_json_key(&jw, "masks_computed");
            rw_json_int(&jw, misses);
            rw_json_key(&jw, "work_max");
            rw_json_int(&jw, work_max);
            rw_json_key(&jw, "ns_per_work");
            rw_json_double(&jw, work_sum ? time_sum * 1e9 / (double)work_sum : 0, 3);
            rw_json_end_object(&jw);
        } else
            printf("%-24s %10.2f %8ld %8.1f %8.1f %8.1f %8.1f %7ld %9lld %6.1f\n", cases[c].name, comp[10] * 1e3, n_tok,
                   mean * 1e6, p50 * 1e6, p99 * 1e6, mx * 1e6, misses, (long long)work_max,
                   work_sum ? time_sum * 1e9 / (double)work_sum : 0);
    }
    if (json) {
        rw_json_end_array(&jw);
        rw_json_end_object(&jw);
        printf("\n");
    }
    free(mask);
    free(logits);
    free(row);
    free(allowed);
    free(per_tok);
    free(own);
    rw_grammar_vocab_free(v);
    rw_tokenizer_free(tok);
    rw_gguf_close(gg);
    return 0;
}
