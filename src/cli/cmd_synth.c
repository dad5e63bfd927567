/* cmd_synth.c - `rewind synth --arch ARCH --preset NAME [--type TYPE] [--seed S]
 * [--vocab OTHER.gguf] [--mtp] [--layers N] [--threads N] -o OUT.gguf`: write a random-weight
 * model with a real model's shapes (see synth/synth.h); --layers N keeps the
 * first N layers only (a draft for speculative decoding: same seed, same
 * tensors). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "synth/synth.h"

static void usage(void) {
    fprintf(stderr,
            "usage: rewind synth --arch ARCH --preset NAME [--type TYPE] [--seed S] [--vocab OTHER.gguf] [--mtp] "
            "[--layers N] [--threads N] [-v] -o OUT.gguf\npresets:");
    for (const char *const *p = rw_synth_preset_names(); *p; p++) fprintf(stderr, " %s", *p);
    fprintf(stderr, "\ntypes: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs q3_k_m "
                    "q4_k_m q5_k_m mxfp4_moe\n");
}

/* --seed: any unsigned 64-bit integer (synth.h's seed) into the uint64_t at ctx. */
static int opt_seed(void *ctx, const char *cmd, const char *name, const char *v) {
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || v[0] == '-') {
        rw_cli_error(cmd, "%s needs an unsigned integer, not \"%s\"", name, v);
        return 2;
    }
    *(uint64_t *)ctx = x;
    return 0;
}

int rw_cmd_synth(int argc, char **argv) {
    rw_synth_options o = {.seed = 42};
    const char *out = NULL;
    long n_layer = 0, threads = 0;
    const rw_cli_opt opts[] = {
        {"--arch", RW_OPT_STR, &o.arch, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--preset", RW_OPT_STR, &o.preset, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--type", RW_OPT_STR, &o.type, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--seed", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, opt_seed, &o.seed},
        {"--vocab", RW_OPT_STR, &o.vocab_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--mtp", RW_OPT_FLAG, &o.mtp, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--layers", RW_OPT_INT, &n_layer, 1, 1024, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        {"-v", RW_OPT_FLAG, &o.verbose, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--verbose", RW_OPT_FLAG, &o.verbose, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-o", RW_OPT_STR, &out, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--out", RW_OPT_STR, &out, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts("synth", argc, argv, opts, NULL, 0, NULL);
    if (prc) {
        if (prc == RW_CLI_BAD_LINE) usage();
        return 2;
    }
    if (n_layer) o.n_layer = (uint32_t)n_layer;
    o.n_threads = (int)threads;
    if (!o.preset || !out) {
        usage();
        return 2;
    }
    rw_error err = {0};
    if (rw_synth_write(&o, out, &err) != RW_OK) {
        rw_cli_error("synth", "%s", err.msg);
        return 1;
    }
    return 0;
}
