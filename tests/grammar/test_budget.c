/* test_budget.c - the grammar work budget (grammar.h): work units are
 * counted exactly and deterministically, a mask or accept past the per-mask
 * or per-request budget fails with a one-line RW_ERR_INVALID_ARG naming it
 * and leaves the matcher usable, a cached mask costs nothing, a prefetched
 * mask is the same mask (or the same error) at the same cost, and with the
 * default budgets on Qwen3's vocabulary the grammar fuzz_gbnf found (masks
 * of up to 170 ms) is refused at admission while ordinary grammars are
 * admitted with masks identical to unbudgeted ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "harness.h"

static rw_grammar_vocab *toy_vocab(void) { /* every single byte, plus a few pieces */
    static char bytes[256];
    static const char *const extra[] = {"ab", "abc", "aa", "ba", "xyz"};
    const char *pieces[256 + 5];
    size_t lens[256 + 5];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, pieces[i] = &bytes[i], lens[i] = 1;
    for (int i = 0; i < 5; i++) pieces[256 + i] = extra[i], lens[256 + i] = strlen(extra[i]);
    rw_grammar_vocab *v = NULL;
    CHECK(rw_grammar_vocab_new(256 + 5, pieces, lens, &v, NULL) == RW_OK);
    return v;
}

static rw_grammar *compile(const char *text) {
    rw_grammar *g = NULL;
    rw_error err = {0};
    CHECK_MSG(rw_grammar_compile(text, strlen(text), NULL, &g, &err) == RW_OK, "%s", err.msg);
    return g;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static const char AMBIG[] = "root ::= (x | y)* \"!\"\nx ::= [a-c]+ | [a-b] [a-c]*\ny ::= \"a\"+ | (\"ab\")+ [a-c]?\n";

/* The work of each of the first masks along one output, on a fresh grammar. */
static void mask_costs(const rw_grammar_vocab *v, const char *out, int64_t *cost, int n) {
    rw_grammar *g = compile(AMBIG);
    rw_grammar_matcher *m = NULL;
    CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
    uint32_t mask[(256 + 5 + 31) / 32];
    for (int i = 0; i < n; i++) {
        const int64_t w0 = rw_grammar_get_stats(g).work;
        CHECK(rw_grammar_matcher_fill_mask(m, mask, NULL) == RW_OK);
        cost[i] = rw_grammar_get_stats(g).work - w0;
        const int64_t w1 = rw_grammar_get_stats(g).work;
        CHECK(rw_grammar_matcher_fill_mask(m, mask, NULL) == RW_OK); /* cached: free */
        CHECK_MSG(rw_grammar_get_stats(g).work == w1, "a cached mask cost %lld units",
                  (long long)(rw_grammar_get_stats(g).work - w1));
        CHECK(rw_grammar_matcher_accept_bytes(m, out + i, 1, NULL));
        CHECK(rw_grammar_get_stats(g).work == w1); /* the mask's walk made these transitions */
    }
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
}

static void test_counting(void) {
    rw_grammar_vocab *v = toy_vocab();
    const char *out = "abab";
    int64_t a[4], b[4];
    mask_costs(v, out, a, 4);
    mask_costs(v, out, b, 4);
    for (int i = 0; i < 4; i++) {
        printf("mask %d: %lld units\n", i, (long long)a[i]);
        CHECK(a[i] > 0);
        CHECK_MSG(a[i] == b[i], "mask %d: %lld then %lld units", i, (long long)a[i], (long long)b[i]);
    }
    uint32_t want[(256 + 5 + 31) / 32], got[(256 + 5 + 31) / 32];
    rw_error err = {0};
    /* per mask: the first mask fits a budget of exactly its cost, not one unit less */
    for (int64_t budget = a[0] - 1; budget <= a[0]; budget++) {
        rw_grammar *g = compile(AMBIG);
        rw_grammar_matcher *m = NULL;
        CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
        CHECK(rw_grammar_set_budget(g, NULL, budget, 0, &err) == RW_OK);
        const rw_status st = rw_grammar_matcher_fill_mask(m, got, &err);
        if (budget < a[0]) {
            CHECK_MSG(st == RW_ERR_INVALID_ARG && strstr(err.msg, "budget of one mask") && !strchr(err.msg, '\n'),
                      "%d %s", (int)st, err.msg);
            /* the matcher stays usable: unbounded again, the same mask as without a budget */
            CHECK(rw_grammar_set_budget(g, NULL, 0, 0, &err) == RW_OK);
            CHECK(rw_grammar_matcher_fill_mask(m, got, &err) == RW_OK);
            rw_grammar *g2 = compile(AMBIG);
            rw_grammar_matcher *m2 = NULL;
            CHECK(rw_grammar_matcher_new(g2, v, &m2, NULL) == RW_OK);
            CHECK(rw_grammar_matcher_fill_mask(m2, want, &err) == RW_OK);
            CHECK(!memcmp(want, got, sizeof want));
            rw_grammar_matcher_free(m2);
            rw_grammar_free(g2);
        } else CHECK_MSG(st == RW_OK, "a budget of %lld: %s", (long long)budget, err.msg);
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
    }
    /* per request: the first two masks and the accepts between fit a[0] + a[1], the third does not */
    {
        rw_grammar *g = compile(AMBIG);
        rw_grammar_matcher *m = NULL;
        CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
        CHECK(rw_grammar_set_budget(g, NULL, 0, a[0] + a[1], &err) == RW_OK);
        CHECK(rw_grammar_matcher_fill_mask(m, got, &err) == RW_OK);
        CHECK(rw_grammar_matcher_accept_bytes(m, out, 1, &err));
        CHECK(rw_grammar_matcher_fill_mask(m, got, &err) == RW_OK);
        CHECK(rw_grammar_matcher_accept_bytes(m, out + 1, 1, &err));
        const rw_status st = rw_grammar_matcher_fill_mask(m, got, &err);
        CHECK_MSG(st == RW_ERR_INVALID_ARG && strstr(err.msg, "budget of a request"), "%d %s", (int)st, err.msg);
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
    }
    /* an accept whose steps need new states (past the 256 the compile-time
     * probe makes) fails the same way, and the matcher stays put */
    {
        char text[400], run[301];
        memset(run, 'a', 300);
        run[300] = 0;
        snprintf(text, sizeof text, "root ::= \"%s\" [a-c]\n", run);
        rw_grammar *g = compile(text);
        rw_grammar_matcher *m = NULL;
        CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
        CHECK(rw_grammar_set_budget(g, NULL, 0, 1, &err) == RW_OK);
        memset(&err, 0, sizeof err);
        CHECK_MSG(!rw_grammar_matcher_accept_bytes(m, run, 300, &err) && strstr(err.msg, "budget of a request"), "%s",
                  err.msg);
        CHECK(rw_grammar_matcher_n_steps(m) == 0);
        CHECK(rw_grammar_set_budget(g, NULL, 0, 0, &err) == RW_OK);
        CHECK(rw_grammar_matcher_accept_bytes(m, run, 300, &err) && rw_grammar_matcher_n_steps(m) == 1);
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
    }
    rw_grammar_vocab_free(v);
}

/* A prefetched mask (computed ahead, as the engine does during the forward
 * pass) is the same mask at the same cost, and a prefetch over the budget
 * gives fill_mask the same error as computing it then. */
static void test_prefetch(void) {
    rw_grammar_vocab *v = toy_vocab();
    uint32_t want[(256 + 5 + 31) / 32], got[(256 + 5 + 31) / 32];
    rw_error err = {0};
    char text[800], run[301];
    memset(run, 'a', 300);
    run[300] = 0;
    snprintf(text, sizeof text, "root ::= \"%s\" [a-c] | \"%s\" \"b\"+\n", run, run);
    for (int budget = 0; budget < 2; budget++) {
        rw_grammar *g = compile(text), *ref = compile(text);
        rw_grammar_matcher *m = NULL, *mr = NULL;
        CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK && rw_grammar_matcher_new(ref, v, &mr, NULL) == RW_OK);
        CHECK(rw_grammar_matcher_accept_bytes(m, run, 300, NULL) &&
              rw_grammar_matcher_accept_bytes(mr, run, 300, NULL));
        if (budget) {
            CHECK(rw_grammar_set_budget(g, NULL, 3, 0, &err) == RW_OK);
            CHECK(rw_grammar_set_budget(ref, NULL, 3, 0, &err) == RW_OK);
        }
        CHECK(!rw_grammar_matcher_mask_ready(m));
        const int64_t w0 = rw_grammar_get_stats(g).work, r0 = rw_grammar_get_stats(ref).work;
        rw_grammar_matcher_prefetch(m);
        rw_error e1 = {0}, e2 = {0};
        const rw_status s1 = rw_grammar_matcher_fill_mask(m, got, &e1),
                        s2 = rw_grammar_matcher_fill_mask(mr, want, &e2);
        CHECK_MSG(s1 == s2 && !strcmp(e1.msg, e2.msg), "prefetched: %d %s, not: %d %s", (int)s1, e1.msg, (int)s2,
                  e2.msg);
        CHECK(rw_grammar_get_stats(g).work - w0 == rw_grammar_get_stats(ref).work - r0);
        if (budget) CHECK(s1 == RW_ERR_INVALID_ARG && strstr(e1.msg, "budget of one mask"));
        else CHECK(s1 == RW_OK && !memcmp(want, got, sizeof want) && rw_grammar_matcher_mask_ready(m));
        rw_grammar_matcher_free(m);
        rw_grammar_matcher_free(mr);
        rw_grammar_free(g);
        rw_grammar_free(ref);
    }
    /* another operation in between forgets the prefetched result */
    rw_grammar *g = compile(text);
    rw_grammar_matcher *m = NULL;
    CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
    CHECK(rw_grammar_matcher_accept_bytes(m, run, 300, NULL));
    CHECK(rw_grammar_set_budget(g, NULL, 3, 0, &err) == RW_OK);
    rw_grammar_matcher_prefetch(m); /* fails: over 3 units */
    CHECK(rw_grammar_set_budget(g, NULL, 0, 0, &err) == RW_OK);
    CHECK(!rw_grammar_matcher_accept_bytes(m, "x", 1, NULL)); /* an operation (refused byte) */
    CHECK_MSG(rw_grammar_matcher_fill_mask(m, got, &err) == RW_OK, "%s", err.msg);
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
    rw_grammar_vocab_free(v);
}

/* With the defaults on a real vocabulary: the costly grammar is refused at
 * admission, ordinary ones are admitted and mask exactly as unbudgeted. */
static void test_admission(void) {
    rw_gguf *gg = NULL;
    rw_tokenizer *tok = NULL;
    rw_grammar_vocab *qv = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path("tokenizer/ggml-vocab-qwen3.gguf"), &gg, &err) ||
        rw_tokenizer_load(gg, &tok, &err)) {
        fprintf(stderr, "note: no qwen3 vocabulary (%s): admission not checked\n", err.msg);
        rw_gguf_close(gg);
        return;
    }
    CHECK(rw_grammar_vocab_from_tokenizer(tok, &qv, &err) == RW_OK);
    char *costly = read_file("tests/grammar/costly/masks.gbnf");
    CHECK_MSG(costly, "tests/grammar/costly/masks.gbnf");
    if (costly) {
        rw_grammar *g = compile(costly);
        const rw_status st = rw_grammar_set_budget(g, qv, RW_GRAMMAR_MASK_BUDGET, RW_GRAMMAR_REQUEST_BUDGET, &err);
        printf("costly grammar: %s\n", st ? err.msg : "admitted");
        CHECK_MSG(st == RW_ERR_INVALID_ARG && strstr(err.msg, "budget of one mask") && !strchr(err.msg, '\n'), "%d %s",
                  (int)st, err.msg);
        rw_grammar_free(g);
        free(costly);
    }
    const char *files[] = {"json", "arithmetic", "list", "chess"};
    const size_t words = rw_grammar_mask_words(rw_grammar_vocab_size(qv));
    uint32_t *want = malloc(words * 4), *got = malloc(words * 4);
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[128];
        snprintf(path, sizeof path, "tests/grammar/gbnf/%s.gbnf", files[f]);
        char *text = read_file(path);
        CHECK_MSG(text, "%s", path);
        if (!text) continue;
        rw_grammar *g = compile(text), *ref = compile(text);
        const rw_status st = rw_grammar_set_budget(g, qv, RW_GRAMMAR_MASK_BUDGET, RW_GRAMMAR_REQUEST_BUDGET, &err);
        CHECK_MSG(st == RW_OK, "%s refused: %s", files[f], err.msg);
        rw_grammar_matcher *m = NULL, *mr = NULL;
        CHECK(rw_grammar_matcher_new(g, qv, &m, NULL) == RW_OK && rw_grammar_matcher_new(ref, qv, &mr, NULL) == RW_OK);
        /* a walk of up to 40 tokens, the same choices on both: masks identical */
        uint64_t x = 12345 + f;
        for (int t = 0; t < 40 && m && mr; t++) {
            CHECK(rw_grammar_matcher_fill_mask(m, got, &err) == RW_OK);
            CHECK(rw_grammar_matcher_fill_mask(mr, want, &err) == RW_OK);
            CHECK_MSG(!memcmp(want, got, words * 4), "%s token %d: masks differ", files[f], t);
            int32_t n_ok = 0;
            for (size_t w = 0; w < words; w++) n_ok += __builtin_popcount(want[w]);
            if (!n_ok) break;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int32_t k = (int32_t)(x % (uint64_t)n_ok), pick = -1;
            for (size_t w = 0; w < words && pick < 0; w++)
                for (uint32_t bits = want[w]; bits && pick < 0; bits &= bits - 1)
                    if (k-- == 0) pick = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
            CHECK(rw_grammar_matcher_accept(m, pick, NULL) && rw_grammar_matcher_accept(mr, pick, NULL));
        }
        printf("%s: admitted, %lld work units\n", files[f], (long long)rw_grammar_get_stats(g).work);
        rw_grammar_matcher_free(m);
        rw_grammar_matcher_free(mr);
        rw_grammar_free(g);
        rw_grammar_free(ref);
        free(text);
    }
    free(want);
    free(got);
    rw_grammar_vocab_free(qv);
    rw_tokenizer_free(tok);
    rw_gguf_close(gg);
}

int main(void) {
    test_counting();
    test_prefetch();
    test_admission();
    return rw_test_done();
}
