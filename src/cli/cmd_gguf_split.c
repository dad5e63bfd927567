/* cmd_gguf_split.c - `rewind gguf-split [--split-max-tensors N |
 * --split-max-size N(M|G)] IN.gguf OUT_PREFIX` and `rewind gguf-split
 * --merge FIRST_PART.gguf OUT.gguf`: a model written as parts, or its parts
 * as one file, as llama.cpp's llama-gguf-split writes them
 * (rw_model_file_split, rw_model_file_merge). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "rewind.h"

#define DEFAULT_MAX_TENSORS 128 /* llama-gguf-split's */

static void usage(void) {
    fprintf(stderr, "usage: rewind gguf-split [--split-max-tensors N | --split-max-size N(M|G)] IN.gguf OUT_PREFIX\n"
                    "       rewind gguf-split --merge FIRST_PART.gguf OUT.gguf\n");
}

/* A size as llama-gguf-split reads it: a count of bytes with M (10^6) or G
 * (10^9), or plain bytes; 0 when it is not one. */
static uint64_t parse_size(const char *s) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    if (errno || end == s || n == 0 || *s == '-') return 0;
    uint64_t unit = *end == 'M' ? 1000000u : *end == 'G' ? 1000000000u : 1u;
    if (*end && (end[1] || unit == 1)) return 0;
    return n > UINT64_MAX / unit ? 0 : (uint64_t)n * unit;
}

int rw_cmd_gguf_split(int argc, char **argv) {
    bool merge = false;
    long max_tensors = 0;
    const char *max_size = NULL;
    const rw_cli_opt opts[] = {
        {"--merge", RW_OPT_FLAG, &merge, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--split-max-tensors", RW_OPT_INT, &max_tensors, 1, 1L << 30, 0, 0, NULL, NULL, NULL},
        {"--split-max-size", RW_OPT_STR, &max_size, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const char *pos[2] = {0};
    int n_pos = 0;
    const int prc = rw_cli_parse_opts("gguf-split", argc, argv, opts, pos, 2, &n_pos);
    if (prc) {
        if (prc == RW_CLI_BAD_LINE) usage();
        return 2;
    }
    if (n_pos != 2 || (merge && (max_tensors || max_size)) || (max_tensors && max_size)) {
        usage();
        return 2;
    }
    uint64_t max_bytes = 0;
    if (max_size && !(max_bytes = parse_size(max_size))) {
        rw_cli_error("gguf-split", "--split-max-size %s: a positive size in bytes, or with M or G (10^6, 10^9)",
                     max_size);
        return 2;
    }
    rw_error err = {0};
    if (merge) {
        if (rw_model_file_merge(pos[0], pos[1], &err) != RW_OK) {
            rw_cli_error("gguf-split", "%s", err.msg);
            return 1;
        }
        fprintf(stderr, "gguf-split: %s and its parts -> %s\n", pos[0], pos[1]);
        return 0;
    }
    if (!max_tensors && !max_bytes) max_tensors = DEFAULT_MAX_TENSORS;
    uint32_t n = 0;
    if (rw_model_file_split(pos[0], pos[1], (uint32_t)max_tensors, max_bytes, &n, &err) != RW_OK) {
        rw_cli_error("gguf-split", "%s", err.msg);
        return 1;
    }
    fprintf(stderr, "gguf-split: %s -> %s-00001-of-%05" PRIu32 ".gguf .. %s-%05" PRIu32 "-of-%05" PRIu32 ".gguf\n",
            pos[0], pos[1], n, pos[1], n, n);
    return 0;
}
