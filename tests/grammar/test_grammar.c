/* test_grammar.c - the grammar module: GBNF parsing (and its errors),
 * matching bytes, rewinding, and token masks checked against a brute force
 * (every token tried with accept + rewind) on a small vocabulary and on
 * Qwen3's 151,936 tokens. Random walks through each example grammar end in
 * text a separate checker accepts (jansson for JSON). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "harness.h"
#include "tokenizer/tokenizer.h"

static rw_grammar *compile(const char *text) {
    rw_grammar *g = NULL;
    rw_error err = {0};
    rw_status st = rw_grammar_compile(text, strlen(text), NULL, &g, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", text, err.msg);
    return g;
}

static rw_grammar *compile_file(const char *path) {
    size_t n = 0;
    char *t = rw_test_read_file(path, &n);
    CHECK_MSG(t != NULL, "read %s", path);
    if (!t) return NULL;
    rw_grammar *g = NULL;
    rw_error err = {0};
    rw_status st = rw_grammar_compile(t, n, NULL, &g, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", path, err.msg);
    free(t);
    return g;
}

/* whole-string match: accepted and complete */
static bool matches_n(rw_grammar *g, const rw_grammar_vocab *v, const char *s, size_t n) {
    rw_grammar_matcher *m = NULL;
    if (rw_grammar_matcher_new(g, v, &m, NULL)) return false;
    bool ok = rw_grammar_matcher_accept_bytes(m, s, n, NULL) && rw_grammar_matcher_can_end(m);
    rw_grammar_matcher_free(m);
    return ok;
}
static bool matches(rw_grammar *g, const rw_grammar_vocab *v, const char *s) {
    rw_grammar_matcher *m = NULL;
    if (rw_grammar_matcher_new(g, v, &m, NULL)) return false;
    bool ok = rw_grammar_matcher_accept_bytes(m, s, strlen(s), NULL) && rw_grammar_matcher_can_end(m);
    rw_grammar_matcher_free(m);
    return ok;
}

static void expect_error(const char *text, const char *needle) {
    rw_grammar *g = NULL;
    rw_error err = {0};
    rw_status st = rw_grammar_compile(text, strlen(text), NULL, &g, &err);
    CHECK_MSG(st != RW_OK, "compiled: %s", text);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "'%s' -> '%s' (wanted '%s')", text, err.msg, needle);
    rw_grammar_free(g);
}

/* brute force: token t allowed iff accept succeeds */
static void check_mask(rw_grammar_matcher *m, const rw_grammar_vocab *v, const char *what) {
    int32_t n = rw_grammar_vocab_size(v);
    uint32_t *mask = calloc(rw_grammar_mask_words(n), sizeof *mask);
    CHECK(rw_grammar_matcher_fill_mask(m, mask, NULL) == RW_OK);
    int64_t k = rw_grammar_matcher_n_steps(m);
    int bad = 0;
    for (int32_t t = 0; t < n; t++) {
        bool ok = rw_grammar_matcher_accept(m, t, NULL);
        if (ok) rw_grammar_matcher_rewind(m, k);
        bool bit = (mask[t >> 5] >> (t & 31)) & 1;
        if (ok != bit && bad++ < 3) CHECK_MSG(ok == bit, "%s: token %d mask %d accept %d", what, t, bit, ok);
    }
    CHECK_EQ_INT(rw_grammar_matcher_n_steps(m), k);
    free(mask);
}

/* A random walk of up to max_tok tokens; checks masks at every check_every-th step; returns the text. */
static char *walk(rw_grammar *g, const rw_grammar_vocab *v, const char *const *pieces, const size_t *lens,
                  uint64_t seed, int max_tok, int check_every, bool *ended, size_t *out_len) {
    rw_grammar_matcher *m = NULL;
    CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
    int32_t n = rw_grammar_vocab_size(v);
    uint32_t *mask = calloc(rw_grammar_mask_words(n), sizeof *mask);
    int32_t *allowed = malloc((size_t)n * sizeof *allowed);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    *ended = false;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int step = 0; step < max_tok; step++) {
        if (check_every && step % check_every == 0) check_mask(m, v, "walk");
        rw_grammar_matcher_fill_mask(m, mask, NULL);
        int na = 0;
        for (int32_t t = 0; t < n; t++)
            if ((mask[t >> 5] >> (t & 31)) & 1) allowed[na++] = t;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* end with probability 1/4 when allowed, and always when nothing else is */
        if (rw_grammar_matcher_can_end(m) && (na == 0 || x % 4 == 0)) {
            *ended = true;
            break;
        }
        CHECK_MSG(na > 0, "dead end at step %d", step);
        if (na == 0) break;
        int32_t t = allowed[(x >> 8) % (uint64_t)na];
        CHECK(rw_grammar_matcher_accept(m, t, NULL));
        if (len + lens[t] + 1 > cap) out = realloc(out, cap = 2 * (cap + lens[t]));
        memcpy(out + len, pieces[t], lens[t]);
        len += lens[t];
    }
    out[len] = 0;
    *out_len = len;
    free(mask);
    free(allowed);
    rw_grammar_matcher_free(m);
    return out;
}

/* a toy vocabulary: every byte value once, plus some multi-byte pieces */
static const char *toy_extra[] = {"{\"", "\":", "\",", "true", "false", "null", "  ", "\n", "12", "3.", "e+",
                                  "\"}", "},", "[]", "{}", "ab", "é", "\xc3", "\xa9", "- ", "O-O", "1. ", "x",
                                  "Nf3", "=Q", "\"a", "aa\"", "\\u00", "\\n", "ok\"}"};

static void build_toy(rw_grammar_vocab **v, const char ***pieces, size_t **lens, int32_t *n) {
    int32_t ne = (int32_t)(sizeof toy_extra / sizeof *toy_extra);
    *n = 256 + ne + 1;
    *pieces = calloc((size_t)*n, sizeof **pieces);
    *lens = calloc((size_t)*n, sizeof **lens);
    static char bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        (*pieces)[i] = &bytes[i];
        (*lens)[i] = 1;
    }
    for (int i = 0; i < ne; i++) {
        (*pieces)[256 + i] = toy_extra[i];
        (*lens)[256 + i] = strlen(toy_extra[i]);
    }
    (*pieces)[*n - 1] = NULL; /* a control token: never allowed */
    rw_error err = {0};
    CHECK_MSG(rw_grammar_vocab_new(*n, *pieces, *lens, v, &err) == RW_OK, "%s", err.msg);
}

static bool json_ok(const char *s) {
    json_error_t e;
    json_t *j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (j) json_decref(j);
    return j != NULL;
}

int main(void) {
    rw_grammar_vocab *toy;
    const char **pieces;
    size_t *lens;
    int32_t n_toy;
    build_toy(&toy, &pieces, &lens, &n_toy);

    /* ---- syntax ---- */
    rw_grammar *g = compile("root ::= \"a\" [b-d]* \"e\"? | \"x\"{2,3}\n");
    CHECK(matches(g, toy, "a"));
    CHECK(matches(g, toy, "abcdde"));
    CHECK(matches(g, toy, "xx") && matches(g, toy, "xxx"));
    CHECK(!matches(g, toy, "x") && !matches(g, toy, "xxxx") && !matches(g, toy, "abf"));
    rw_grammar_free(g);

    g = compile("root ::= ( \"é\" | [α-ω]+ | [^a-z\\n] ) \"!\"  # comment\n");
    CHECK(matches(g, toy, "é!") && matches(g, toy, "αβγ!") && matches(g, toy, "Z!") && matches(g, toy, "€!"));
    CHECK(matches(g, toy, "Ω!")); /* not in α-ω, but in [^a-z\n] */
    CHECK(!matches(g, toy, "q!") && !matches(g, toy, "\n!") && !matches(g, toy, "αé!"));
    rw_grammar_free(g);

    g = compile("root ::= a b\na ::= \"\\x41\" | \"\\u00e9\"\nb ::=\n  \"z\"\n  # trailing\n");
    CHECK(matches(g, toy, "Az") && matches(g, toy, "éz") && !matches(g, toy, "A"));
    rw_grammar_free(g);

    g = compile("root ::= x{0} \"k\" y{3,}\nx ::= \"q\"\ny ::= \"ab\"\n");
    CHECK(matches(g, toy, "kababab") && matches(g, toy, "kabababab") && !matches(g, toy, "kabab"));
    rw_grammar_free(g);

    /* ---- errors say where and why ---- */
    expect_error("root ::= foo\n", "line 1 col 10: rule 'foo' is not defined");
    expect_error("root ::= \"abc\n", "newline inside a string literal");
    expect_error("root ::= [ab\n", "unterminated character class");
    expect_error("root ::= ( \"a\" \n", "unclosed '('");
    expect_error("root ::= \"a\" )\n", "unbalanced ')'");
    expect_error("root ::= * \"a\"\n", "nothing before it to repeat");
    expect_error("root ::= root \"a\" | \"b\"\n", "left-recursive");
    expect_error("root ::= (\"a\"?)*\n", "repeated without end");
    expect_error("root ::= \"a\"{3,2}\n", "max below min");
    expect_error("top ::= \"a\"\n", "no rule named 'root'");
    expect_error("root ::= \"\\q\"\n", "unknown escape");
    expect_error("root ::= [z-a]\n", "out of order");
    expect_error("", "no rules");
    expect_error("root ::= \"a\"{99999}\n", "repetition count over");

    /* ---- a grammar that makes stacks without end fails, and quickly ----
     * every letter may start a term one level deeper, so each step holds
     * more stacks than the last (fuzz_gbnf found such a grammar: it took
     * minutes; the stack limit ends it with a message) */
    g = compile("root ::= (expr \"=\" term \"\\n\")+\nexpr ::= term ([-+*/] term)*\n"
                "term ::= ident (expr \"=\" term \"\\n\")+ | ident\nident ::= [a-z] [a-z]{0,8}\n");
    {
        rw_grammar_matcher *bm = NULL;
        CHECK(rw_grammar_matcher_new(g, toy, &bm, NULL) == RW_OK);
        uint32_t *mask = calloc((size_t)rw_grammar_mask_words(n_toy), sizeof *mask);
        rw_error err = {0};
        bool failed = false;
        for (int step = 0; bm && step < 20000 && !failed; step++) {
            if (rw_grammar_matcher_fill_mask(bm, mask, &err)) failed = true;
            else if (!rw_grammar_matcher_accept_bytes(bm, step % 7 == 6 ? "+" : "a", 1, &err)) failed = true;
        }
        CHECK_MSG(failed && strstr(err.msg, "parser stacks") && !strchr(err.msg, '\n'), "'%s'", err.msg);
        free(mask);
        rw_grammar_matcher_free(bm);
    }
    rw_grammar_free(g);

    /* ---- rewind ---- */
    g = compile("root ::= \"{\" [a-z]* \"}\"\n");
    rw_grammar_matcher *m = NULL;
    CHECK(rw_grammar_matcher_new(g, toy, &m, NULL) == RW_OK);
    CHECK(rw_grammar_matcher_accept_bytes(m, "{", 1, NULL));
    CHECK(rw_grammar_matcher_accept_bytes(m, "ab", 2, NULL));
    CHECK(!rw_grammar_matcher_accept_bytes(m, "{", 1, NULL)); /* refused: state unchanged */
    CHECK(!rw_grammar_matcher_can_end(m));
    CHECK(rw_grammar_matcher_accept_bytes(m, "}", 1, NULL));
    CHECK(rw_grammar_matcher_can_end(m) && rw_grammar_matcher_must_end(m));
    CHECK_EQ_INT(rw_grammar_matcher_n_steps(m), 3);
    rw_grammar_matcher_rewind(m, 1);
    CHECK(!rw_grammar_matcher_can_end(m));
    CHECK(rw_grammar_matcher_accept_bytes(m, "}", 1, NULL) && rw_grammar_matcher_must_end(m));
    CHECK(!rw_grammar_matcher_accept(m, n_toy - 1, NULL)); /* NULL piece */
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);

    /* ---- example grammars: known sentences, then random walks over the toy vocabulary ---- */
    const char *files[] = {"json", "arithmetic", "list", "chess"};
    const char *good[][3] = {{"{\"a\": [1, 2.5e+3, \"x\\n\"], \"b\": null}", "[]", "-0.25"},
                             {"a+b=c\n", "(x1*2)= 3\n(a)=b\n", "12/4=3\n"},
                             {"- milk\n", "- a\n- b c\n", "- é\n"},
                             {"1. e4 e5\n", "1. Nf3 O-O-O\n2. exd5 Qxd5+\n", "1. e8=Q Kxe8#\n"}};
    const char *bad[][2] = {{"{\"a\" 1}", "01"}, {"a+=b\n", "a=b"}, {"-milk\n", "- \n"}, {"1. e9 e5\n", "e4"}};
    for (int f = 0; f < 4; f++) {
        char path[128];
        snprintf(path, sizeof path, "tests/grammar/gbnf/%s.gbnf", files[f]);
        g = compile_file(path);
        if (!g) continue;
        for (int i = 0; i < 3; i++) CHECK_MSG(matches(g, toy, good[f][i]), "%s: %s", files[f], good[f][i]);
        for (int i = 0; i < 2; i++) CHECK_MSG(!matches(g, toy, bad[f][i]), "%s: %s", files[f], bad[f][i]);
        for (uint64_t seed = 1; seed <= 12; seed++) {
            bool ended;
            size_t len;
            char *s = walk(g, toy, pieces, lens, seed, 300, 7, &ended, &len);
            if (ended) {
                CHECK_MSG(matches_n(g, toy, s, len), "%s seed %d: %s", files[f], (int)seed, s);
                if (f == 0) CHECK_MSG(json_ok(s), "json seed %d: not JSON: %s", (int)seed, s);
            }
            free(s);
        }
        rw_grammar_free(g);
    }

    /* ---- Qwen3's vocabulary: masks against the brute force ---- */
    const char *fx = rw_test_fixtures();
    if (fx) {
        rw_gguf *gg = NULL;
        rw_tokenizer *tok = NULL;
        rw_grammar_vocab *qv = NULL;
        rw_error err = {0};
        if (rw_gguf_open(rw_test_fixture_path("tokenizer/ggml-vocab-qwen3.gguf"), &gg, &err) == RW_OK &&
            rw_tokenizer_load(gg, &tok, &err) == RW_OK) {
            CHECK_MSG(rw_grammar_vocab_from_tokenizer(tok, &qv, &err) == RW_OK, "%s", err.msg);
            int32_t nq = rw_tokenizer_n_vocab(tok);
            char **qp = calloc((size_t)nq, sizeof *qp);
            size_t *ql = calloc((size_t)nq, sizeof *ql);
            for (int32_t i = 0; i < nq; i++) {
                char buf[512];
                size_t k = rw_tokenizer_is_control(tok, i) ? 0 : rw_token_to_piece(tok, i, false, buf, sizeof buf);
                if (k > sizeof buf) k = 0;
                qp[i] = malloc(k + 1);
                memcpy(qp[i], buf, k);
                ql[i] = k;
            }
            g = compile_file("tests/grammar/gbnf/json.gbnf");
            for (uint64_t seed = 1; g && seed <= 3; seed++) {
                bool ended;
                size_t len;
                char *s = walk(g, qv, (const char *const *)qp, ql, seed, 40, 10, &ended, &len);
                if (ended) CHECK_MSG(json_ok(s), "qwen3 json seed %d: %s", (int)seed, s);
                free(s);
            }
            /* the mask shortcuts (plain text inside strings, looping subtrees) at the states they
             * are for, against the brute force: inside a string, mid-character, after a backslash */
            const char *at[] = {"{\"a\": \"", "{\"a\": \"x", "{\"a\": \"\xc3", "{\"a\": \"\xe4\xbd", "{\"a\": \"\\",
                                "[1, \"\xc3\xa9", "[\"\\u00", "{\"a\": \"b\", \"", "[tru"};
            for (size_t k = 0; g && k < sizeof at / sizeof *at; k++) {
                rw_grammar_matcher *mm = NULL;
                CHECK(rw_grammar_matcher_new(g, qv, &mm, NULL) == RW_OK);
                CHECK_MSG(rw_grammar_matcher_accept_bytes(mm, at[k], strlen(at[k]), NULL), "prefix %s", at[k]);
                check_mask(mm, qv, at[k]);
                rw_grammar_matcher_free(mm);
            }
            rw_grammar_free(g);
            /* a string with a pattern (a class that is not "any character") */
            g = compile("root ::= \"\\\"\" [a-z ]{0,30} \"\\\"\"\n");
            for (int k = 0; g && k < 2; k++) {
                rw_grammar_matcher *mm = NULL;
                CHECK(rw_grammar_matcher_new(g, qv, &mm, NULL) == RW_OK);
                CHECK(rw_grammar_matcher_accept_bytes(mm, "\"ab", 1 + 2 * (size_t)k, NULL));
                check_mask(mm, qv, "pattern string");
                rw_grammar_matcher_free(mm);
            }
            rw_grammar_free(g);
            for (int32_t i = 0; i < nq; i++) free(qp[i]);
            free(qp);
            free(ql);
        } else
            fprintf(stderr, "note: qwen3 vocabulary not loaded (%s): brute-force check on the toy vocabulary only\n",
                    err.msg);
        rw_grammar_vocab_free(qv);
        rw_tokenizer_free(tok);
        rw_gguf_close(gg);
    }

    rw_grammar_vocab_free(toy);
    free(pieces);
    free(lens);
    return rw_test_done();
}
