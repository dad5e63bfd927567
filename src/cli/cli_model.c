/* cli_model.c - helpers shared by the commands that run a model (logits,
 * generate, serve, bench): reading a whole file and token id files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

char *rw_cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

int rw_cli_read_ids(const char *cmd, const char *path, int32_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        rw_cli_error(cmd, "%s: %s", path, strerror(errno));
        return 1;
    }
    int64_t cap = 0;
    char word[64];
    int rc = 0;
    while (fscanf(f, "%63s", word) == 1) {
        char *end;
        errno = 0;
        long v = strtol(word, &end, 10);
        if (*end || errno || v < 0 || v > INT32_MAX) {
            rw_cli_error(cmd, "%s: \"%s\" is not a token id", path, word);
            rc = 1;
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            int32_t *p = realloc(*ids, (size_t)cap * sizeof **ids);
            if (!p) {
                rw_cli_error(cmd, "out of memory");
                rc = 1;
                break;
            }
            *ids = p;
        }
        (*ids)[(*n)++] = (int32_t)v;
    }
    fclose(f);
    if (rc == 0 && *n == 0) {
        rw_cli_error(cmd, "%s: no token ids", path);
        rc = 1;
    }
    if (rc) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}
