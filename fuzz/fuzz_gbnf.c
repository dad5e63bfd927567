/* fuzz_gbnf.c - libFuzzer harness for the GBNF compiler and the matcher.
 *
 * The input is split at its first NUL byte: the part before is GBNF text,
 * the part after drives a walk (each byte picks one of the allowed tokens
 * of a small vocabulary: every single byte plus a few multi-byte pieces,
 * or rewinds). Properties: compiling succeeds or fails with a one-line
 * message; every token the mask allows is accepted, every token it refuses
 * is refused; a rewind restores the earlier state's mask; a grammar past
 * the stack limit or over its work budget (set for inputs whose first byte
 * is odd) fails with a one-line message; never a crash, a hang,
 * undefined behaviour or a leak. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static rw_grammar_vocab *vocab;
static const char *const extra[] = {"{\"", "\":", "\",", "true", "null", "  ", "12", "\"}", "é", "\xc3", "ab", "]}"};
enum { N_EXTRA = sizeof extra / sizeof *extra, N_TOK = 256 + N_EXTRA };

static void init_vocab(void) {
    static char bytes[256];
    const char *pieces[N_TOK];
    size_t lens[N_TOK];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, pieces[i] = &bytes[i], lens[i] = 1;
    for (int i = 0; i < N_EXTRA; i++) pieces[256 + i] = extra[i], lens[256 + i] = strlen(extra[i]);
    if (rw_grammar_vocab_new(N_TOK, pieces, lens, &vocab, NULL)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!vocab) init_vocab();
    const unsigned char *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    rw_grammar *g = NULL;
    rw_error err = {0};
    if (rw_grammar_compile((const char *)data, glen, NULL, &g, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n')) __builtin_trap();
        return 0;
    }
    /* the admission check with a per-mask budget (inputs with an odd first
     * byte): refused with one line, or admitted and bounded */
    if ((data[0] & 1) && rw_grammar_set_budget(g, vocab, 200000, 0, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n')) __builtin_trap();
        rw_grammar_free(g);
        return 0;
    }
    rw_grammar_matcher *m = NULL;
    if (rw_grammar_matcher_new(g, vocab, &m, &err)) __builtin_trap();
    uint32_t mask[(N_TOK + 31) / 32], again[(N_TOK + 31) / 32];
    const unsigned char *p = nul ? nul + 1 : data + size, *end = data + size;
    for (int step = 0; p < end && step < 64; step++, p++) {
        if (rw_grammar_matcher_fill_mask(m, mask, &err)) { /* past the stack limit: one line, then stop */
            if (!err.msg[0] || strchr(err.msg, '\n')) __builtin_trap();
            break;
        }
        int64_t k = rw_grammar_matcher_n_steps(m);
        /* the mask against accept + rewind, for a few tokens */
        for (int t = *p % 7; t < N_TOK; t += 13) {
            bool ok = rw_grammar_matcher_accept(m, t, NULL);
            if (ok) rw_grammar_matcher_rewind(m, k);
            if (ok != (bool)((mask[t >> 5] >> (t & 31)) & 1)) __builtin_trap();
        }
        if (*p == 0xFF && k > 0) { /* rewind one step: the mask is that state's again */
            rw_grammar_matcher_rewind(m, k - 1);
            continue;
        }
        int allowed[N_TOK], n = 0;
        for (int t = 0; t < N_TOK; t++)
            if ((mask[t >> 5] >> (t & 31)) & 1) allowed[n++] = t;
        if (n == 0) break;
        if (!rw_grammar_matcher_accept(m, allowed[*p % n], NULL)) __builtin_trap();
        rw_grammar_matcher_rewind(m, k);
        if (rw_grammar_matcher_fill_mask(m, again, &err) || memcmp(mask, again, sizeof mask)) __builtin_trap();
        if (!rw_grammar_matcher_accept(m, allowed[*p % n], NULL)) __builtin_trap();
    }
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
    return 0;
}
