/* test_tokenizer_fim.c - which tokens fill in the middle (rw_tokenizer_fim),
 * on small hand-made vocabularies: the file's tokenizer.ggml.fim_*_token_id
 * first, then the older prefix/suffix/middle_token_id keys, then the usual
 * texts (<|fim_prefix|> as Qwen2.5-Coder's files have it, with no key); the
 * tokens found by text are control tokens, and the repository and file
 * separator ones end a generation; a vocabulary without any has none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tokenizer/tokenizer.h"

enum { PAD, EOS, BOS, BYTE0, FOO = BYTE0 + 256, BAR, BAZ, FPRE, FSUF, FMID, FREP, FSEP, N_TOK };

/* A vocabulary of n_tok tokens (FIM texts only when n_tok is N_TOK) with
 * the u32 keys given (NULL-terminated names, values alongside). */
static rw_tokenizer *load(int n_tok, const char *const *keys, const uint32_t *vals) {
    static char bytes[256][7];
    const char *tokens[N_TOK] = {"<pad>", "<eos>", "<bos>"};
    int32_t types[N_TOK];
    for (int i = 0; i < N_TOK; i++) types[i] = i < BYTE0 ? 3 : i < FOO ? 6 : 1;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tokens[BYTE0 + b] = bytes[b];
    }
    const char *rest[] = {"foo",           "bar",         "baz", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                          "<|repo_name|>", "<|file_sep|>"};
    for (int i = FOO; i < N_TOK; i++) tokens[i] = rest[i - FOO];
    rw_gguf_writer *w = rw_gguf_writer_new();
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gemma4", NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n_tok, NULL);
    rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n_tok, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", NULL, 0, NULL);
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", BOS, NULL);
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", EOS, NULL);
    for (int i = 0; keys && keys[i]; i++) rw_gguf_writer_add_u32(w, keys[i], vals[i], NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rw_gguf_writer_write_stream(w, f, NULL);
    fclose(f);
    rw_gguf_writer_free(w);
    rw_gguf *g;
    rw_tokenizer *t = NULL;
    rw_error err;
    if (rw_gguf_open_memory(buf, len, &g, &err) == RW_OK) {
        if (rw_tokenizer_load(g, &t, &err) != RW_OK) CHECK_MSG(false, "load: %s", err.msg);
        rw_gguf_close(g);
    } else CHECK_MSG(false, "open: %s", err.msg);
    free(buf);
    return t;
}

static void expect(const rw_tokenizer *t, const char *what, int32_t pre, int32_t suf, int32_t mid, int32_t rep,
                   int32_t sep) {
    if (!t) return;
    const int32_t got[] = {rw_tokenizer_fim(t, RW_FIM_PRE), rw_tokenizer_fim(t, RW_FIM_SUF),
                           rw_tokenizer_fim(t, RW_FIM_MID), rw_tokenizer_fim(t, RW_FIM_REP),
                           rw_tokenizer_fim(t, RW_FIM_SEP)};
    const int32_t want[] = {pre, suf, mid, rep, sep};
    for (int i = 0; i < 5; i++) CHECK_MSG(got[i] == want[i], "%s: role %d is %d, want %d", what, i, got[i], want[i]);
    CHECK_MSG(rw_tokenizer_fim(t, RW_FIM_COUNT) == -1 && rw_tokenizer_fim(t, (rw_fim_role)-1) == -1,
              "%s: a role out of range", what);
}

int main(void) {
    /* by text: control tokens; the repository and separator ones end a generation */
    rw_tokenizer *t = load(N_TOK, NULL, NULL);
    expect(t, "by text", FPRE, FSUF, FMID, FREP, FSEP);
    if (t) {
        CHECK(rw_tokenizer_is_control(t, FPRE) && rw_tokenizer_is_control(t, FSUF) && rw_tokenizer_is_control(t, FMID));
        CHECK(rw_tokenizer_is_eog(t, FSEP) && rw_tokenizer_is_eog(t, FREP) && !rw_tokenizer_is_eog(t, FPRE));
    }
    rw_tokenizer_free(t);

    /* the file's keys win over the texts */
    static const char *const keys[] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
                                       "tokenizer.ggml.fim_mid_token_id", NULL};
    static const uint32_t vals[] = {FOO, BAR, BAZ};
    t = load(N_TOK, keys, vals);
    expect(t, "keys", FOO, BAR, BAZ, FREP, FSEP);
    rw_tokenizer_free(t);

    /* the older keys, in a vocabulary without the texts */
    static const char *const old[] = {"tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id",
                                      "tokenizer.ggml.middle_token_id", NULL};
    t = load(FOO + 3, old, vals);
    expect(t, "older keys", FOO, BAR, BAZ, -1, -1);
    rw_tokenizer_free(t);

    /* the new key beside an older one: the new one; an id beyond the vocabulary is no key */
    static const char *const both[] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id",
                                       "tokenizer.ggml.fim_suf_token_id", NULL};
    static const uint32_t both_vals[] = {BAR, FOO, 100000};
    t = load(N_TOK, both, both_vals);
    expect(t, "both keys", BAR, FSUF, FMID, FREP, FSEP);
    rw_tokenizer_free(t);

    /* none at all */
    t = load(FOO + 3, NULL, NULL);
    expect(t, "none", -1, -1, -1, -1, -1);
    rw_tokenizer_free(t);
    return rw_test_done();
}
