/* cmd_cache_verify.c - `rewind cache-verify MODEL DIR [--kv f32|f16]
 * [--ctx N] [--draft DRAFT.gguf]`: reads and fully verifies every file
 * that MODEL's prefix cache (with that KV type) would use in the disk-tier
 * folder DIR (pcache/pcache.h, docs/persistence.md), removes those that
 * fail, and prints how many were fine. Exit status 0 when none failed.
 * The folder may be in use by running servers meanwhile. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "pcache/pcache.h"

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
    rw_cli_served sv;
    if (rw_cli_served_open(CMD, model_path, draft_path, &sv)) return 1;
    const rw_pcache_config cfg = {.mem_bytes = 1, .dir = dir, .dir_bytes = (size_t)-1, .draft = sv.dm,
                                  .write_mode = RW_PCACHE_WRITE_EVICT};
    rw_pcache *c = NULL;
    rw_error err = {0};
    int ok = 0, bad = 0, unreadable = 0, rc = 1;
    if (rw_pcache_new(sv.m, kv, ctx, &cfg, &c, &err) || rw_pcache_verify(c, &ok, &bad, &unreadable, &err)) {
        rw_cli_error(CMD, "%s", err.msg);
    } else {
        printf("%d files verified, %d invalid (removed), %d unreadable\n", ok, bad, unreadable);
        rc = bad || unreadable ? 1 : 0;
    }
    rw_pcache_free(c);
    rw_cli_served_close(&sv);
    return rc;
}
