/* cli_model.c - helpers shared by the commands that run a model (logits,
 * generate, serve, bench): reading a whole file and token id files, the
 * LoRA adapter options. */
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

/* --lora FILE[,FILE...] / --lora-scaled FILE:SCALE[,...]: the paths are
 * cut from a copy of the value, kept in l->lists until rw_cli_lora_free. */
int rw_cli_lora_opt(void *ctx, const char *cmd, const char *name, const char *value) {
    rw_cli_lora *l = ctx;
    const bool scaled = !strcmp(name, "--lora-scaled");
    char *list = l->n_lists < RW_CLI_MAX_LORA ? strdup(value) : NULL;
    if (!list) {
        rw_cli_error(cmd, l->n_lists < RW_CLI_MAX_LORA ? "out of memory" : "too many LoRA options");
        return 2;
    }
    l->lists[l->n_lists++] = list;
    for (char *item = list, *next; item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = 0;
        float scale = 1.0f;
        if (scaled) {
            char *colon = strrchr(item, ':'), *end;
            errno = 0;
            double v = colon ? strtod(colon + 1, &end) : 0;
            if (!colon || colon == item || end == colon + 1 || *end || errno || !(v >= -1e6 && v <= 1e6)) {
                rw_cli_error(cmd, "%s takes FILE:SCALE (a number), not \"%s\"", name, item);
                return 2;
            }
            *colon = 0;
            scale = (float)v;
        }
        if (!*item) {
            rw_cli_error(cmd, "%s: an empty file name", name);
            return 2;
        }
        if (l->n == RW_CLI_MAX_LORA) {
            rw_cli_error(cmd, "at most %d LoRA adapters", RW_CLI_MAX_LORA);
            return 2;
        }
        l->a[l->n++] = (rw_lora_adapter){.path = item, .scale = scale};
    }
    return 0;
}

void rw_cli_lora_free(rw_cli_lora *l) {
    for (int i = 0; i < l->n_lists; i++) free(l->lists[i]);
    *l = (rw_cli_lora){0};
}

int rw_cli_run_with_lora(int (*run)(int argc, char **argv, rw_cli_lora *lora), int argc, char **argv) {
    rw_cli_lora lora = {0};
    const int rc = run(argc, argv, &lora);
    rw_cli_lora_free(&lora);
    return rc;
}
