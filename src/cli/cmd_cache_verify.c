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
    const char *model_path = NULL, *dir = NULL, *draft_path = NULL;
    rw_kv_type kv = RW_KV_F16;
    long ctx = 4096;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool v = i + 1 < argc;
        if (!strcmp(a, "--kv") && v) {
            if (rw_cli_parse_kv(CMD, argv[++i], &kv)) return 2;
        } else if (!strcmp(a, "--ctx") && v) {
            if (rw_cli_parse_int(CMD, a, argv[++i], 2, 1 << 24, &ctx)) return 2;
        } else if (!strcmp(a, "--draft") && v) {
            draft_path = argv[++i];
        } else if (a[0] == '-') {
            rw_cli_error(CMD, "unknown option or missing value: %s", a);
            return 2;
        } else if (!model_path) model_path = a;
        else if (!dir) dir = a;
        else return 2;
    }
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
