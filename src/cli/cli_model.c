/* cli_model.c - helpers shared by the commands that run a model (logits,
 * generate, bench model): opening a model file and reading token id files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/spec.h"
#include "kernels/matmul.h"

int rw_cli_open_model(const char *cmd, const char *path, rw_gguf **g, rw_model **m) {
    rw_error err = {0};
    *g = NULL;
    *m = NULL;
    if (rw_gguf_open(path, g, &err) || rw_model_load(*g, m, &err)) {
        rw_cli_error(cmd, "%s: %s", path, err.msg);
        rw_gguf_close(*g);
        *g = NULL;
        return 1;
    }
    return 0;
}

void rw_cli_served_close(rw_cli_served *sv) {
    rw_chat_template_free(sv->tmpl);
    free(sv->bos);
    free(sv->eos);
    rw_tokenizer_free(sv->tok);
    rw_model_free(sv->m);
    rw_gguf_close(sv->g);
    rw_tokenizer_free(sv->dtok);
    rw_model_free(sv->dm);
    rw_gguf_close(sv->dg);
    memset(sv, 0, sizeof *sv);
}

rw_status rw_cli_served_load(const char *path, const char *draft_path, rw_cli_served *sv, rw_error *err) {
    memset(sv, 0, sizeof *sv);
    rw_status st;
    if ((st = rw_gguf_open(path, &sv->g, err)) || (st = rw_model_load(sv->g, &sv->m, err))) {
        rw_error_prefix(err, "%s", path);
        goto fail;
    }
    if ((st = rw_tokenizer_load(sv->g, &sv->tok, err)) ||
        (st = rw_chat_template_from_gguf(sv->g, &sv->tmpl, &sv->bos, &sv->eos, err)))
        goto fail;
    if (draft_path) {
        if ((st = rw_gguf_open(draft_path, &sv->dg, err)) || (st = rw_model_load(sv->dg, &sv->dm, err)) ||
            (st = rw_tokenizer_load(sv->dg, &sv->dtok, err)) || (st = rw_spec_check_vocab(sv->tok, sv->dtok, err))) {
            rw_error_prefix(err, "%s", draft_path);
            goto fail;
        }
    }
    return RW_OK;
fail:
    rw_cli_served_close(sv);
    return st;
}

int rw_cli_served_open(const char *cmd, const char *path, const char *draft_path, rw_cli_served *sv) {
    rw_error err = {0};
    if (!rw_cli_served_load(path, draft_path, sv, &err)) return 0;
    rw_cli_error(cmd, "%s", err.msg);
    return 1;
}

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

float rw_cli_draft_cost(const rw_gguf *draft, const rw_gguf *target) {
    return draft ? (float)((double)rw_gguf_file_size(draft) / (double)rw_gguf_file_size(target)) : 0.0f;
}
