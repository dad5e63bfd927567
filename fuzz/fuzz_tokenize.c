/* fuzz_tokenize.c - libFuzzer harness for the tokenizer. Any bytes tokenize
 * (with and without special-token parsing) and detokenize back to the same
 * bytes (the vocabulary is byte-level BPE, so nothing is lost); the streaming
 * detokenizer only ever emits valid UTF-8, and for valid UTF-8 input its
 * output is the input. Uses the fixtures' 512-token vocabulary ($RW_FIXTURES,
 * default ../shared/fixtures); without it every input is a no-op.
 * tests/tokenizer/test_tokenizer_regressions.c replays tests/corrupt/tokenize
 * through this file in every build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static rw_tokenizer *fuzz_tok;
static int fuzz_loaded;

static void fuzz_load(void) {
    fuzz_loaded = 1;
    const char *fx = getenv("RW_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-tiny-bpe512-qwen2.gguf", fx && *fx ? fx : "../shared/fixtures");
    rw_gguf *g;
    if (rw_gguf_open(path, &g, NULL) != RW_OK) return;
    rw_tokenizer_load(g, &fuzz_tok, NULL);
    rw_gguf_close(g);
}

/* Length of the valid UTF-8 sequence at s (RFC 3629), 0 if invalid. */
static size_t fuzz_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || len > n) return 0;
    unsigned cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

static int fuzz_valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t l = fuzz_utf8_len(s + i, n - i);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!fuzz_loaded) fuzz_load();
    if (!fuzz_tok) return 0;
    int input_valid = fuzz_valid_utf8(data, size);
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        size_t n;
        if (rw_tokenize(fuzz_tok, (const char *)data, size, false, special, &ids, &n, NULL) != RW_OK) continue;
        char *back;
        size_t bl;
        if (rw_detokenize(fuzz_tok, ids, n, true, &back, &bl, NULL) == RW_OK) {
            if (bl != size || memcmp(back, data, size)) __builtin_trap();
            free(back);
        }
        rw_detok_stream st = {0};
        size_t cap = 3 * size + 16, got = 0; /* each input byte becomes at most one U+FFFD */
        char *out = malloc(cap);
        if (!out) {
            free(ids);
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            size_t k = rw_detok_stream_feed(fuzz_tok, &st, ids[i], true, out + got, cap - got);
            if (k > cap - got) __builtin_trap();
            got += k;
        }
        size_t k = rw_detok_stream_flush(&st, out + got, cap - got);
        if (k > cap - got) __builtin_trap();
        got += k;
        if (!fuzz_valid_utf8((const unsigned char *)out, got)) __builtin_trap();
        if (input_valid && (got != size || memcmp(out, data, size))) __builtin_trap();
        free(out);
        free(ids);
    }
    return 0;
}
