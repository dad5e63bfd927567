/* cmd_cache_verify.c - `rewind cache-verify MODEL DIR [--kv f32|f16]
 * [--ctx N] [--draft DRAFT.gguf]`: reads and fully verifies every file
 * that MODEL's prefix cache (with that KV type) would use in the disk-tier
 * folder DIR (rw_cache_verify, docs/persistence.md), removes those that
 * fail, and prints how many were fine. Exit status 0 when none failed.
 * The folder may be in use by running servers meanwhile. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *CMD = "cache-verify";

int rw_cmd_cache_verify(int argc, char **argv) {
    const char *draft_path = NULL, *pos[2] = {NULL, NULL}; /* MODEL DIR */
    rw_kv_type kv = RW_KV_F16;
    long ctx = 4096;
    const rw_cli_opt opts[] = {
        RW_OPT_KV_TYPE(&kv),
        {"--ctx", RW_OPT_INT, &ctx, 2, 1 << 24, 0, 0, NULL, NULL, NULL},
        {"--draft", RW_OPT_STR, &draft_path, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    if (rw_cli_parse_opts(CMD, argc, argv, opts, pos, 2, NULL)) return 2;
    const char *model_path = pos[0], *dir = pos[1];
    if (!model_path || !dir) {
        fprintf(stderr, "usage: rewind cache-verify MODEL DIR [--kv f32|f16] [--ctx N] [--draft DRAFT.gguf]\n");
        return 2;
    }
    rw_model *m = NULL, *dm = NULL;
    rw_error err = {0};
    int ok = 0, bad = 0, unreadable = 0, rc = 1;
    rw_engine_params ep = rw_engine_params_default();
    ep.cache_dir = dir;
    ep.run.n_ctx = ctx;
    ep.run.kv_f32 = kv == RW_KV_F32;
    if (rw_model_open(model_path, NULL, &m, &err) || (draft_path && rw_model_open(draft_path, NULL, &dm, &err)) ||
        ((ep.draft = dm), rw_cache_verify(m, &ep, &ok, &bad, &unreadable, &err))) {
        rw_cli_error(CMD, "%s", err.msg);
    } else {
        printf("%d files verified, %d invalid (removed), %d unreadable\n", ok, bad, unreadable);
        rc = bad || unreadable ? 1 : 0;
    }
    rw_model_close(dm);
    rw_model_close(m);
    return rc;
}
