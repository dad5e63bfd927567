/* bench_models.c - opening models below the public API for the benchmarks
 * that time internal layers (bench model, spec, state and serve: cli.h):
 * the file, its model, tokenizer and chat template, and a draft checked to
 * share the vocabulary. The commands themselves open models with
 * rw_model_open. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/spec.h"

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
    rw_free(sv->bos);
    rw_free(sv->eos);
    rw_tokenizer_free(sv->tok);
    rw_model_free(sv->m);
    rw_gguf_close(sv->g);
    rw_tokenizer_free(sv->dtok);
    rw_model_free(sv->dm);
    rw_gguf_close(sv->dg);
    memset(sv, 0, sizeof *sv);
}

/* Puts "path: " before err's message. */
static rw_status prefixed(rw_status st, rw_error *err, const char *path) {
    if (!err) return st;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return rw_errorf(err, st, "%s: %s", path, msg);
}

rw_status rw_cli_served_load(const char *path, const char *draft_path, rw_cli_served *sv, rw_error *err) {
    memset(sv, 0, sizeof *sv);
    rw_status st;
    if ((st = rw_gguf_open(path, &sv->g, err)) || (st = rw_model_load(sv->g, &sv->m, err))) {
        prefixed(st, err, path);
        goto fail;
    }
    if ((st = rw_tokenizer_load(sv->g, &sv->tok, err)) ||
        (st = rw_chat_template_load(path, &sv->tmpl, &sv->bos, &sv->eos, err)))
        goto fail;
    if (draft_path) {
        if ((st = rw_gguf_open(draft_path, &sv->dg, err)) || (st = rw_model_load(sv->dg, &sv->dm, err)) ||
            (st = rw_tokenizer_load(sv->dg, &sv->dtok, err)) || (st = rw_spec_check_vocab(sv->tok, sv->dtok, err))) {
            prefixed(st, err, draft_path);
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

float rw_cli_draft_cost(const rw_gguf *draft, const rw_gguf *target) {
    return draft ? (float)((double)rw_gguf_file_size(draft) / (double)rw_gguf_file_size(target)) : 0.0f;
}
