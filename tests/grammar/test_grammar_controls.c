/* A grammar over a vocabulary that holds some control tokens as their text
 * (rw_grammar_vocab_with_controls, for outputs that render control tokens
 * such as harmony's markers): the listed control token is allowed where the
 * grammar's literal begins, the others never, and the plain vocabulary
 * never allows a control token. Qwen3's vocabulary from the fixtures. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "gguf/gguf.h"
#include "harness.h"
#include "tokenizer/tokenizer.h"

static bool allowed(const uint32_t *mask, int32_t id) { return (mask[id / 32] >> (id % 32)) & 1; }

/* The mask at the grammar's start over vocabulary v. */
static uint32_t *start_mask(const char *gbnf, const rw_grammar_vocab *v) {
    rw_grammar *g = NULL;
    rw_grammar_matcher *m = NULL;
    rw_error err = {0};
    uint32_t *mask = calloc(rw_grammar_mask_words(rw_grammar_vocab_size(v)), sizeof *mask);
    CHECK_MSG(rw_grammar_compile(gbnf, strlen(gbnf), NULL, &g, &err) == RW_OK, "%s", err.msg);
    if (g) CHECK(rw_grammar_matcher_new(g, v, &m, &err) == RW_OK);
    if (m) CHECK(rw_grammar_matcher_fill_mask(m, mask, &err) == RW_OK);
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
    return mask;
}

/* The id of the control token whose text is s, or -1. */
static int32_t control_id(const rw_tokenizer *tok, const char *s) {
    int32_t *ids = NULL, id = -1;
    size_t n = 0;
    rw_error err = {0};
    if (!rw_tokenize(tok, s, strlen(s), false, true, &ids, &n, &err) && n == 1 && rw_tokenizer_is_control(tok, ids[0]))
        id = ids[0];
    free(ids);
    return id;
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_gguf *gg = NULL;
    rw_tokenizer *tok = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path("tokenizer/ggml-vocab-qwen3.gguf"), &gg, &err) ||
        rw_tokenizer_load(gg, &tok, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return rw_test_done();
    }
    const int32_t open = control_id(tok, "<|im_start|>");
    const int32_t other = control_id(tok, "<|object_ref_start|>");
    CHECK_MSG(open >= 0 && other >= 0, "control tokens %d %d", (int)open, (int)other);
    rw_grammar_vocab *plain = NULL, *with = NULL;
    CHECK(rw_grammar_vocab_from_tokenizer(tok, &plain, &err) == RW_OK);
    CHECK_MSG(rw_grammar_vocab_with_controls(tok, &open, 1, &with, &err) == RW_OK, "%s", err.msg);
    if (plain && with && open >= 0 && other >= 0) {
        const char *gbnf = "root ::= \"<|im_start|>\" \"user\" | \"<|object_ref_start|>\"\n";
        uint32_t *a = start_mask(gbnf, plain), *b = start_mask(gbnf, with);
        CHECK_MSG(!allowed(a, open) && !allowed(a, other), "the plain vocabulary allows a control token");
        CHECK_MSG(allowed(b, open), "the listed control token is not allowed where its text begins");
        CHECK_MSG(!allowed(b, other), "a control token that is not listed is allowed");
        /* the text can still be spelled with plain tokens: both masks allow "<" */
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(rw_tokenize(tok, "<", 1, false, false, &ids, &n, &err) == RW_OK && n == 1);
        if (n == 1) CHECK(allowed(a, ids[0]) && allowed(b, ids[0]));
        free(ids);
        /* after the control token, the grammar goes on with its text */
        rw_grammar *g = NULL;
        rw_grammar_matcher *m = NULL;
        CHECK(rw_grammar_compile(gbnf, strlen(gbnf), NULL, &g, &err) == RW_OK);
        if (g) CHECK(rw_grammar_matcher_new(g, with, &m, &err) == RW_OK);
        if (m) {
            CHECK(rw_grammar_matcher_accept(m, open, &err));
            CHECK(!rw_grammar_matcher_can_end(m));
            CHECK(rw_grammar_matcher_accept_bytes(m, "user", 4, &err) && rw_grammar_matcher_can_end(m));
        }
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
        free(a);
        free(b);
    }
    rw_grammar_vocab_free(plain);
    rw_grammar_vocab_free(with);
    rw_tokenizer_free(tok);
    rw_gguf_close(gg);
    return rw_test_done();
}
