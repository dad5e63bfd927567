/* test_tokenizer_gemma4.c - BPE over SentencePiece-style text
 * (tokenizer.ggml.model = "gemma4", or pre = "gemma4" / "sarvam-moe"), on a
 * small hand-made vocabulary, checked against llama.cpp's algorithm worked
 * by hand: spaces become U+2581, the text splits only at newline runs, words
 * merge by rank over UTF-8 characters (not GPT-2's byte alphabet), what is
 * no token falls back to <0xXX> byte tokens, a newline run that is a token
 * is taken whole, BOS is always added (gemma4). No real Gemma 4 vocabulary
 * is among the fixtures, so this is not a comparison with llama.cpp's output. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tokenizer/tokenizer.h"

enum { PAD, EOS, BOS, BYTE0, SPACE = BYTE0 + 256, H, E, L, O, HE, LL, HELL, HELLO, SP_HELLO, NL, NL2, E_ACUTE, N_TOK };

static rw_tokenizer *load(const char *model, const char *pre) {
    static char bytes[256][7];
    const char *tokens[N_TOK] = {"<pad>", "<eos>", "<bos>"};
    int32_t types[N_TOK];
    for (int i = 0; i < N_TOK; i++) types[i] = i < BYTE0 ? 3 : i < SPACE ? 6 : 1;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tokens[BYTE0 + b] = bytes[b];
    }
    const char *rest[] = {"\xe2\x96\x81", "h", "e", "l", "o", "he", "ll", "hell", "hello", "\xe2\x96\x81hello", "\n",
                          "\n\n", "\xc3\xa9"};
    for (int i = SPACE; i < N_TOK; i++) tokens[i] = rest[i - SPACE];
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xe2\x96\x81 hello"};
    rw_gguf_writer *w = rw_gguf_writer_new();
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", model, NULL);
    if (pre) rw_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, N_TOK, NULL);
    rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, N_TOK, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 5, NULL);
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", BOS, NULL);
    rw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", EOS, NULL);
    rw_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false, NULL); /* gemma4 adds it anyway */
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
        if (rw_tokenizer_load(g, &t, &err) != RW_OK) CHECK_MSG(false, "%s/%s: %s", model, pre ? pre : "-", err.msg);
        rw_gguf_close(g);
    }
    free(buf);
    return t;
}

static void check(rw_tokenizer *t, const char *text, bool add_special, const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n;
    rw_error err;
    CHECK(rw_tokenize(t, text, strlen(text), add_special, false, &ids, &n, &err) == RW_OK);
    bool same = n == n_want && !memcmp(ids, want, n * sizeof *ids);
    CHECK_MSG(same, "\"%s\": got %zu ids, want %zu", text, n, n_want);
    for (size_t i = 0; !same && i < n; i++) printf("  got %d\n", ids[i]);
    /* and back: spaces restored, byte tokens as their bytes */
    char *back;
    size_t bl;
    const int32_t *body = add_special ? ids + 1 : ids;
    size_t nb = add_special && n ? n - 1 : n;
    CHECK(rw_detokenize(t, body, nb, false, &back, &bl, &err) == RW_OK);
    CHECK_MSG(bl == strlen(text) && !memcmp(back, text, bl), "\"%s\" came back as \"%s\"", text, back);
    free(back);
    free(ids);
}

int main(void) {
    rw_tokenizer *t = load("gemma4", NULL);
    CHECK(t != NULL);
    if (t) {
        CHECK(rw_tokenizer_add_bos(t));
        /* "hello▁hello": h+e and l+l (rank 0, 1; leftmost first), he+ll, hell+o,
         * then ▁+hello; "\n\n\n" is no token and has no merge: three "\n";
         * "x" is no token: its byte; "é" is one */
        check(t, "hello hello\n\n\nx\xc3\xa9", true,
              (const int32_t[]){BOS, HELLO, SP_HELLO, NL, NL, NL, BYTE0 + 'x', E_ACUTE}, 8);
        /* "\n\n" is a token: taken whole although no merge makes it */
        check(t, "a\n\nb", false, (const int32_t[]){BYTE0 + 'a', NL2, BYTE0 + 'b'}, 3);
        /* a space alone is U+2581; "hel" stops at he + l */
        check(t, "hel  o", false, (const int32_t[]){HE, L, SPACE, SPACE, O}, 5);
        /* arbitrary bytes (invalid UTF-8 included) tokenize, and come back
         * byte for byte as long as they hold no U+2581 of their own */
        uint32_t seed = 12345;
        char text[300];
        for (int round = 0; round < 300; round++) {
            size_t len = (seed = seed * 1103515245u + 12345u) >> 24;
            for (size_t i = 0; i < len; i++) {
                seed = seed * 1103515245u + 12345u;
                static const char alphabet[] = "hello \n\xc3\xa9\xe2\x96\xff\x80";
                text[i] = (seed >> 28) < 12 ? alphabet[(seed >> 16) % (sizeof alphabet - 1)] : (char)(seed >> 16);
            }
            int32_t *ids;
            size_t n;
            rw_error err;
            CHECK(rw_tokenize(t, text, len, false, false, &ids, &n, &err) == RW_OK);
            char *back;
            size_t bl;
            CHECK(rw_detokenize(t, ids, n, false, &back, &bl, &err) == RW_OK);
            bool has_escape = memmem(text, len, "\xe2\x96\x81", 3) != NULL;
            CHECK_MSG(has_escape || (bl == len && !memcmp(back, text, len)), "round %d does not come back", round);
            free(back);
            free(ids);
        }
        rw_tokenizer_free(t);
    }
    /* the same splitting through tokenizer.ggml.pre with a gpt2 model */
    t = load("gpt2", "sarvam-moe");
    CHECK(t != NULL);
    if (t) {
        CHECK(!rw_tokenizer_add_bos(t)); /* only gemma4 forces BOS */
        check(t, "hello hello", false, (const int32_t[]){HELLO, SP_HELLO}, 2);
        /* no newline-run rule outside gemma4: "\n\n" is two newlines */
        check(t, "\n\n", false, (const int32_t[]){NL, NL}, 2);
        rw_tokenizer_free(t);
    }
    return rw_test_done();
}
