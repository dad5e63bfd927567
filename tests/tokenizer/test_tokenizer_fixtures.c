/* test_tokenizer_fixtures.c - every .inp/.out pair of
 * ../shared/fixtures/tokenizer (llama.cpp's tokenizations, no BOS, no
 * special-token parsing), detokenize(tokenize(text)) == text where the
 * vocabulary is lossless, and the streaming detokenizer equal to the
 * one-shot one. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tokenizer/tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"


static void check_vocab(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "tokenizer/%s", name);
    rw_gguf *g;
    rw_error err;
    if (rw_gguf_open(rw_test_fixture_path(path), &g, &err) != RW_OK) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    rw_tokenizer *t;
    rw_status s = rw_tokenizer_load(g, &t, &err);
    rw_gguf_close(g);
    CHECK_MSG(s == RW_OK, "%s: %s", name, err.msg);
    if (s) return;
    bool is_bert = strstr(name, "bert") != NULL;
    snprintf(path, sizeof path, "tokenizer/%s.inp", name);
    size_t inp_len;
    char *inp = rw_test_read_file(rw_test_fixture_path(path), &inp_len);
    snprintf(path, sizeof path, "tokenizer/%s.out", name);
    char *outf = rw_test_read_file(rw_test_fixture_path(path), NULL);
    CHECK(inp && outf);
    int cases = 0, exact = 0, checked = 0;
    char *text = inp, *line = outf;
    while (text && line && *line) {
        char *end = strstr(text, SEP);
        size_t tl = end ? (size_t)(end - text) : strlen(text);
        if (!end && tl && text[tl - 1] == '\n') tl--;
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        int32_t want[4096];
        size_t nw = 0;
        for (char *p = line; *p && nw < 4096;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            want[nw++] = (int32_t)v;
            p = e;
        }
        int32_t *ids;
        size_t n;
        s = rw_tokenize(t, text, tl, false, false, &ids, &n, &err);
        CHECK(s == RW_OK);
        bool same = s == RW_OK && n == nw && !memcmp(ids, want, n * sizeof *ids);
        cases++;
        exact += same;
        { /* every vocabulary, WordPiece included, must match exactly */
            checked++;
            CHECK_MSG(same, "%s case %d: \"%.*s\": got %zu ids, want %zu", name, cases, (int)(tl < 60 ? tl : 60), text, n, nw);
        }
        if (s == RW_OK && !is_bert) { /* WordPiece is lossy (lowercase, accents, spacing): no round trip */
            char *back;
            size_t bl;
            CHECK(rw_detokenize(t, ids, n, false, &back, &bl, &err) == RW_OK);
            CHECK_MSG(bl == tl && !memcmp(back, text, tl), "%s case %d: detokenize differs: \"%s\"", name, cases, back);
            /* streaming, one token at a time */
            rw_detok_stream st = {0};
            char *acc = malloc(tl * 3 + 64);
            size_t al = 0;
            for (size_t i = 0; i < n; i++) al += rw_detok_stream_feed(t, &st, ids[i], false, acc + al, tl * 3 + 64 - al);
            al += rw_detok_stream_flush(&st, acc + al, tl * 3 + 64 - al);
            CHECK_MSG(al == bl && !memcmp(acc, back, bl), "%s case %d: streamed text differs", name, cases);
            free(acc);
            free(back);
        }
        free(ids);
        text = end ? end + strlen(SEP) : NULL;
        line = nl ? nl + 1 : NULL;
    }
    printf("%-40s %d/%d exact (%d required)\n", name, exact, cases, checked);
    free(inp);
    free(outf);
    rw_tokenizer_free(t);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tokenizer", rw_test_fixtures());
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) {
            check_vocab(e->d_name);
            n++;
        }
    }
    if (d) closedir(d);
    CHECK(n >= 12);
    return rw_test_done();
}
