/* fuzz_tokenize.c - libFuzzer harness for the tokenizer: any bytes tokenize
 * (with and without special-token parsing) and detokenize back to the same
 * bytes for a byte-level BPE vocabulary; the stream never emits invalid
 * UTF-8. Uses the fixtures' 512-token vocabulary ($RW_FIXTURES or
 * ../shared/fixtures); without it every input is a no-op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static rw_tokenizer *tok;
static int loaded;

static void load(void) {
    loaded = 1;
    const char *fx = getenv("RW_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-tiny-bpe512-qwen2.gguf", fx && *fx ? fx : "../shared/fixtures");
    rw_gguf *g;
    if (rw_gguf_open(path, &g, NULL) != RW_OK) return;
    rw_tokenizer_load(g, &tok, NULL);
    rw_gguf_close(g);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!loaded) load();
    if (!tok) return 0;
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        size_t n;
        if (rw_tokenize(tok, (const char *)data, size, false, special, &ids, &n, NULL) != RW_OK) continue;
        char *back;
        size_t bl;
        if (rw_detokenize(tok, ids, n, true, &back, &bl, NULL) == RW_OK) {
            if (bl != size || memcmp(back, data, size)) __builtin_trap();
            free(back);
        }
        rw_detok_stream st = {0};
        char out[4096];
        for (size_t i = 0; i < n; i++) {
            size_t k = rw_detok_stream_feed(tok, &st, ids[i], true, out, sizeof out);
            if (k > sizeof out) __builtin_trap();
        }
        free(ids);
    }
    return 0;
}
