/* test_tokenizer_unit.c - special tokens, BOS/EOS, the streaming
 * detokenizer on characters split across byte tokens, and malformed
 * vocabularies (clear errors, no crash). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tokenizer/tokenizer.h"

static rw_tokenizer *load(const char *rel) {
    rw_gguf *g;
    rw_error err;
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) != RW_OK) return NULL;
    rw_tokenizer *t = NULL;
    rw_tokenizer_load(g, &t, &err);
    rw_gguf_close(g);
    return t;
}

/* A vocabulary built with the writer, for the malformed cases. */
/* Builds a vocabulary with build() and loads it; *keep (if given) gets the
 * tokenizer (caller frees), otherwise it is freed here. */
static rw_status load_built_keep(void (*build)(rw_gguf_writer *), rw_tokenizer **keep, rw_error *err) {
    rw_gguf_writer *w = rw_gguf_writer_new();
    build(w);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rw_gguf_writer_write_stream(w, f, NULL);
    fclose(f);
    rw_gguf_writer_free(w);
    rw_gguf *g;
    rw_status s = rw_gguf_open_memory(buf, len, &g, err);
    rw_tokenizer *t = NULL;
    if (!s) {
        s = rw_tokenizer_load(g, &t, err);
        rw_gguf_close(g);
    }
    if (keep) *keep = t;
    else rw_tokenizer_free(t);
    free(buf);
    return s;
}

static rw_status load_built(void (*build)(rw_gguf_writer *), rw_error *err) { return load_built_keep(build, NULL, err); }

static const char *const toks[] = {"a", "b", "ab"};
static void no_model(rw_gguf_writer *w) { rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL); }
static void bad_model(rw_gguf_writer *w) {
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "unigram-xyz", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
}
static void no_merges(rw_gguf_writer *w) {
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
}
static void tokens_not_strings(rw_gguf_writer *w) {
    int32_t v[3] = {1, 2, 3};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.tokens", v, 3, NULL);
}
static void types_not_ints(rw_gguf_writer *w) {
    no_merges(w);
    static const char *const merges[] = {"a b"};
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 1, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.token_type", toks, 3, NULL);
}
static void types_short(rw_gguf_writer *w) {
    int32_t ty[2] = {1, 1};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
    rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", ty, 2, NULL);
}
static void scores_not_floats(rw_gguf_writer *w) {
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.scores", toks, 3, NULL);
}
static void merges_not_strings(rw_gguf_writer *w) {
    int32_t v[3] = {1, 2, 3};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
    rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.merges", v, 3, NULL);
}
static void pre_not_string(rw_gguf_writer *w) {
    static const char *const merges[] = {"a b"};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.pre", 7, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 1, NULL);
}
static void model_not_string(rw_gguf_writer *w) {
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.model", 2, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
}
/* "a b" makes "ab", which is not a token; "ab c" then makes "abc", which is:
 * the second merge has a side that is no token (the string-keyed path) */
static void merge_through_non_token(rw_gguf_writer *w) {
    static const char *const t4[] = {"a", "b", "c", "abc"};
    static const char *const merges[] = {"a b", "ab c"};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    rw_gguf_writer_add_str(w, "tokenizer.ggml.pre", "gpt-2", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", t4, 4, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 2, NULL);
}
static void duplicate_token(rw_gguf_writer *w) {
    static const char *const dup[] = {"a", "b", "a"};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", dup, 3, NULL);
}
/* an empty token (renamed, as llama.cpp) and harmony's end markers: with
 * <|return|> and <|call|> there, <|end|> is printed text, not an end */
static void harmony(rw_gguf_writer *w) {
    static const char *const t6[] = {"a", "", "<|end|>", "<|return|>", "<|call|>", "<|channel|>"};
    int32_t ty[6] = {1, 1, 3, 3, 3, 3};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", t6, 6, NULL);
    rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", ty, 6, NULL);
}
static void odd_but_valid(rw_gguf_writer *w) { /* bad merges and an out-of-range BOS are tolerated */
    static const char *const merges[] = {"a b", "nonsense", "x y z"};
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 3, NULL);
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 999, NULL);
}

int main(void) {
    rw_error err;
    CHECK(load_built(no_model, &err) == RW_ERR_NOT_FOUND);
    CHECK(load_built(bad_model, &err) == RW_ERR_UNSUPPORTED && strstr(err.msg, "unigram-xyz"));
    CHECK(load_built(no_merges, &err) == RW_ERR_FORMAT && strstr(err.msg, "merges"));
    CHECK(load_built(tokens_not_strings, &err) == RW_ERR_FORMAT);
    CHECK(load_built(types_not_ints, &err) == RW_ERR_FORMAT && strstr(err.msg, "token_type"));
    CHECK(load_built(types_short, &err) == RW_ERR_FORMAT && strstr(err.msg, "token_type"));
    CHECK(load_built(scores_not_floats, &err) == RW_ERR_FORMAT && strstr(err.msg, "scores"));
    CHECK(load_built(merges_not_strings, &err) == RW_ERR_FORMAT && strstr(err.msg, "merges"));
    CHECK(load_built(pre_not_string, &err) != RW_OK && strstr(err.msg, "tokenizer.ggml.pre"));
    CHECK(load_built(model_not_string, &err) != RW_OK && strstr(err.msg, "tokenizer.ggml.model"));
    CHECK_MSG(load_built(odd_but_valid, &err) == RW_OK, "%s", err.msg);
    CHECK(load_built(duplicate_token, &err) == RW_ERR_FORMAT && strstr(err.msg, "duplicate"));
    rw_tokenizer *h = NULL;
    CHECK_MSG(load_built_keep(harmony, &h, &err) == RW_OK, "%s", err.msg);
    if (h) {
        CHECK(!strcmp(rw_tokenizer_token_text(h, 1), "[EMPTY_1]"));
        CHECK(!rw_tokenizer_is_eog(h, 2) && !rw_tokenizer_is_control(h, 2));
        CHECK(rw_tokenizer_is_eog(h, 3) && rw_tokenizer_is_eog(h, 4) && !rw_tokenizer_is_eog(h, 5));
        CHECK(!rw_tokenizer_is_control(h, 5)); /* <|channel|> is always printed */
        rw_tokenizer_free(h);
    }
    rw_tokenizer *m = NULL;
    CHECK_MSG(load_built_keep(merge_through_non_token, &m, &err) == RW_OK, "%s", err.msg);
    if (m) {
        int32_t *ids;
        size_t n;
        CHECK(rw_tokenize(m, "abcab", 5, false, false, &ids, &n, &err) == RW_OK);
        CHECK_MSG(n == 3 && ids[0] == 3 && ids[1] == 0 && ids[2] == 1, "abcab -> %zu ids", n); /* abc, then a b */
        free(ids);
        rw_tokenizer_free(m);
    }

    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures (malformed-vocabulary checks passed)");
    rw_tokenizer *q = load("tokenizer/ggml-vocab-qwen3.gguf");
    CHECK(q != NULL);
    if (q) {
        int32_t *ids;
        size_t n;
        const char *s = "<|im_start|>user\nHi<|im_end|>";
        CHECK(rw_tokenize(q, s, strlen(s), true, true, &ids, &n, &err) == RW_OK);
        CHECK(n >= 4 && ids[0] == 151644 && ids[n - 1] == 151645);
        CHECK(rw_tokenizer_is_eog(q, ids[n - 1]) && rw_tokenizer_is_control(q, ids[0]));
        free(ids);
        CHECK(rw_tokenize(q, s, strlen(s), true, false, &ids, &n, &err) == RW_OK);
        CHECK(n > 6 && ids[0] != 151644); /* not parsed: plain text */
        free(ids);
        /* invalid UTF-8 tokenizes to byte tokens and comes back byte for byte */
        const char bad[] = "ok \xff\xfe end \xe2\x82";
        CHECK(rw_tokenize(q, bad, sizeof bad - 1, false, false, &ids, &n, &err) == RW_OK);
        char *back;
        size_t bl;
        CHECK(rw_detokenize(q, ids, n, false, &back, &bl, &err) == RW_OK);
        CHECK(bl == sizeof bad - 1 && !memcmp(back, bad, bl));
        free(back);
        /* the stream never emits a broken sequence: the invalid bytes become U+FFFD */
        rw_detok_stream st = {0};
        char out[256];
        size_t o = 0;
        for (size_t i = 0; i < n; i++) o += rw_detok_stream_feed(q, &st, ids[i], false, out + o, sizeof out - o);
        o += rw_detok_stream_flush(&st, out + o, sizeof out - o);
        const char *want = "ok \xef\xbf\xbd\xef\xbf\xbd end \xef\xbf\xbd\xef\xbf\xbd"; /* one per invalid byte */
        CHECK(o == strlen(want) && !memcmp(out, want, o));
        free(ids);
        CHECK(rw_detokenize(q, (int32_t[]){-1}, 1, false, &back, &bl, &err) == RW_ERR_INVALID_ARG);
        rw_tokenizer_free(q);
    }
    /* Phi-3 (by general.name, as llama.cpp): white space after a special
     * token is dropped where the token is cut out */
    rw_tokenizer *phi = load("tokenizer/ggml-vocab-phi-3.gguf");
    CHECK(phi != NULL);
    if (phi) {
        static const char *const pairs[][3] = {
            {"<|user|>\nHello<|end|>\n<|assistant|>", "<|user|>Hello<|end|><|assistant|>", "1"},
            {"a </s>  \n b", "a </s>b", "1"},
        };
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            int32_t *a, *b;
            size_t na, nb;
            bool special = pairs[i][2][0] == '1';
            CHECK(rw_tokenize(phi, pairs[i][0], strlen(pairs[i][0]), false, special, &a, &na, &err) == RW_OK);
            CHECK(rw_tokenize(phi, pairs[i][1], strlen(pairs[i][1]), false, special, &b, &nb, &err) == RW_OK);
            CHECK_MSG(na == nb && !memcmp(a, b, na * sizeof *a), "phi-3 case %zu: %zu vs %zu ids", i, na, nb);
            free(a);
            free(b);
        }
        int32_t *a, *b;
        size_t na, nb;
        /* </s> is user-defined in the file, but its text makes it a control
         * token (llama.cpp's end-of-generation list): plain text without
         * parse_special, not printed by default */
        CHECK(rw_tokenize(phi, "a </s>", 6, false, false, &a, &na, &err) == RW_OK);
        for (size_t i = 0; i < na; i++) CHECK(a[i] != 2);
        free(a);
        CHECK(rw_tokenizer_is_control(phi, 2) && rw_tokenizer_is_eog(phi, 2) && rw_tokenizer_is_eog(phi, 32007));
        CHECK(rw_tokenize(phi, "<s> x", 5, false, true, &a, &na, &err) == RW_OK);
        CHECK(rw_tokenize(phi, "<s>x", 4, false, true, &b, &nb, &err) == RW_OK);
        CHECK(na >= 2 && a[0] == 1 && (na != nb || memcmp(a, b, na * sizeof *a))); /* " x" stays " x" */
        free(a);
        free(b);
        rw_tokenizer_free(phi);
    }
    rw_tokenizer *spm = load("tokenizer/ggml-vocab-llama-spm.gguf");
    CHECK(spm != NULL);
    if (spm) {
        /* an emoji not in the vocabulary: byte fallback, 4 byte tokens; the
         * stream holds bytes back until the character is complete */
        const char *s = "\xf0\x9f\xa6\x99";
        int32_t *ids;
        size_t n;
        CHECK(rw_tokenize(spm, s, strlen(s), true, false, &ids, &n, &err) == RW_OK);
        CHECK(n >= 5 && ids[0] == rw_tokenizer_bos(spm));
        rw_detok_stream st = {0};
        char out[64];
        size_t o = 0, step_sizes[8] = {0};
        for (size_t i = 0; i < n && i < 8; i++) o += step_sizes[i] = rw_detok_stream_feed(spm, &st, ids[i], false, out + o, sizeof out - o);
        CHECK(o == 4 && !memcmp(out, s, 4));
        CHECK(step_sizes[n - 1] == 4); /* all four bytes at once, with the last one */
        free(ids);
        /* an invalid lead byte swallows the next bytes as its sequence (the
         * length its top bits announce, as llama.cpp), so "ab" is not merged:
         * all three go to byte tokens */
        CHECK(rw_tokenize(spm, "\xf8" "ab", 3, false, false, &ids, &n, &err) == RW_OK);
        CHECK(n == 4 && !strcmp(rw_tokenizer_token_text(spm, ids[1]), "<0xF8>") &&
              !strcmp(rw_tokenizer_token_text(spm, ids[2]), "<0x61>") &&
              !strcmp(rw_tokenizer_token_text(spm, ids[3]), "<0x62>"));
        free(ids);
        rw_tokenizer_free(spm);
    }
    return rw_test_done();
}
