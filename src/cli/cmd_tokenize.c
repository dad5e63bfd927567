/* cmd_tokenize.c - `rewind tokenize MODEL (TEXT | -f FILE) [--parse-special]
 * [--no-bos]` prints token ids separated by spaces; `rewind detokenize MODEL
 * IDS...` prints the text they stand for. MODEL is any GGUF with a
 * tokenizer.ggml.* vocabulary (a vocabulary-only file will do). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "tokenizer/tokenizer.h"

static rw_tokenizer *open_vocab(const char *cmd, const char *path) {
    rw_error err = {0};
    rw_tokenizer *t = NULL;
    if (rw_tokenizer_open(path, &t, &err) != RW_OK) rw_cli_error(cmd, "%s", err.msg); /* it names the file */
    return t;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            buf = b;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int rw_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    bool parse_special = false, no_bos = false;
    const rw_cli_opt opts[] = {
        {"--parse-special", RW_OPT_FLAG, &parse_special, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--no-bos", RW_OPT_FLAG, &no_bos, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-f", RW_OPT_STR, &file, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const char *words[2] = {NULL, NULL};
    if (rw_cli_parse_opts("tokenize", argc, argv, opts, words, 2, NULL)) return 2;
    model = words[0];
    text = words[1];
    if (!model || (!text == !file)) {
        fprintf(stderr, "usage: rewind tokenize MODEL (TEXT | -f FILE) [--parse-special] [--no-bos]\n");
        return 2;
    }
    size_t len = text ? strlen(text) : 0;
    char *buf = NULL;
    if (file && !(buf = read_file(file, &len))) {
        rw_cli_error("tokenize", "cannot read %s", file);
        return 1;
    }
    rw_tokenizer *t = open_vocab("tokenize", model);
    int rc = 1;
    if (t) {
        int32_t *ids;
        size_t n;
        rw_error err = {0};
        /* --no-bos drops BOS only; EOS stays as the vocabulary asks */
        if (rw_tokenize(t, buf ? buf : text, len, true, parse_special, &ids, &n, &err) == RW_OK) {
            size_t first = no_bos && n && ids[0] == rw_tokenizer_bos(t) && rw_tokenizer_add_bos(t) ? 1 : 0;
            for (size_t i = first; i < n; i++) printf("%s%d", i > first ? " " : "", ids[i]);
            printf("\n");
            free(ids);
            rc = 0;
        } else rw_cli_error("tokenize", "%s", err.msg);
    }
    rw_tokenizer_close(t);
    free(buf);
    return rc;
}

int rw_cmd_detokenize(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: rewind detokenize MODEL IDS...\n");
        return 2;
    }
    int32_t *ids = malloc((size_t)argc * sizeof *ids);
    size_t n = 0;
    for (int i = 2; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (*end || end == argv[i] || v < 0 || v > INT32_MAX) {
            rw_cli_error("detokenize", "not a token id: '%s'", argv[i]);
            free(ids);
            return 2;
        }
        ids[n++] = (int32_t)v;
    }
    rw_tokenizer *t = open_vocab("detokenize", argv[1]);
    int rc = 1;
    if (t) {
        char *text;
        size_t len;
        rw_error err = {0};
        if (rw_detokenize(t, ids, n, true, &text, &len, &err) == RW_OK) {
            fwrite(text, 1, len, stdout);
            printf("\n");
            free(text);
            rc = 0;
        } else rw_cli_error("detokenize", "%s", err.msg);
    }
    rw_tokenizer_close(t);
    free(ids);
    return rc;
}

static double seconds_since(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) + (double)(b.tv_nsec - a->tv_nsec) * 1e-9;
}

/* `rewind bench tokenizer MODEL [-f FILE] [--reps N]`: single-thread
 * tokenization speed over FILE (default: a built-in English paragraph
 * repeated to 4 MiB, which the word cache makes easy; pass real text with -f
 * for a fair figure). Each repetition tokenizes the whole text in one call;
 * mean and best are printed. */
int rw_bench_tokenizer(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    int reps = 3;
    long reps_l = reps;
    const rw_cli_opt opts[] = {
        {"-f", RW_OPT_STR, &file, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--reps", RW_OPT_INT, &reps_l, 1, 100000, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    if (rw_cli_parse_opts("bench tokenizer", argc, argv, opts, &model, 1, NULL)) return 2;
    reps = (int)reps_l;
    if (!model || reps < 1) {
        fprintf(stderr, "usage: rewind bench tokenizer MODEL [-f FILE] [--reps N]\n");
        return 2;
    }
    static const char para[] =
        "The quick brown fox jumps over the lazy dog. In 2026, engineers measured how fast a tokenizer could split "
        "ordinary English prose into tokens: sentences with punctuation, numbers like 3.14159 and 42, contractions "
        "such as don't, won't and it's, and the occasional URL (https://example.com/path?q=1). ";
    size_t len;
    char *text = NULL;
    if (file) {
        if (!(text = read_file(file, &len))) {
            rw_cli_error("bench", "cannot read %s", file);
            return 1;
        }
    } else {
        len = 4u << 20;
        text = malloc(len);
        if (!text) {
            rw_cli_error("bench", "out of memory");
            return 1;
        }
        for (size_t o = 0; o < len; o += sizeof para - 1)
            memcpy(text + o, para, o + sizeof para - 1 <= len ? sizeof para - 1 : len - o);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rw_tokenizer *t = open_vocab("bench", model);
    double load_s = seconds_since(&t0);
    if (!t) {
        free(text);
        return 1;
    }
    double sum = 0, best = 0;
    size_t n = 0;
    rw_status s = RW_OK;
    rw_error err = {0};
    for (int r = 0; r < reps && !s; r++) {
        int32_t *ids;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        s = rw_tokenize(t, text, len, false, false, &ids, &n, &err);
        double secs = seconds_since(&t0);
        if (s) break;
        free(ids);
        double mbs = (double)len / secs / 1e6;
        sum += mbs;
        if (mbs > best) best = mbs;
    }
    if (!s) {
        printf("tokenizer  %s (loaded in %.3f s)\ninput      %.2f MiB%s\ntokens     %zu\n"
               "speed      %.1f MB/s mean, %.1f MB/s best of %d (1 thread)\n",
               model, load_s, (double)len / (1 << 20), file ? "" : " (built-in English paragraph, repeated)", n,
               sum / reps, best, reps);
    } else rw_cli_error("bench", "%s", err.msg);
    rw_tokenizer_close(t);
    free(text);
    return s ? 1 : 0;
}
