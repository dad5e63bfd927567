/* cmd_synth.c - `rewind synth --arch ARCH --preset NAME [--type TYPE] [--seed S]
 * [--vocab OTHER.gguf] [--mtp] [--layers N] [--threads N] -o OUT.gguf`: write a random-weight
 * model with a real model's shapes (see synth/synth.h); --layers N keeps the
 * first N layers only (a draft for speculative decoding: same seed, same
 * tensors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "synth/synth.h"

static void usage(void) {
    fprintf(stderr, "usage: rewind synth --arch ARCH --preset NAME [--type TYPE] [--seed S] [--vocab OTHER.gguf] [--mtp] "
                    "[--layers N] [--threads N] [-v] -o OUT.gguf\npresets:");
    for (const char *const *p = rw_synth_preset_names(); *p; p++) fprintf(stderr, " %s", *p);
    fprintf(stderr, "\ntypes: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs q3_k_m q4_k_m q5_k_m\n");
}

int rw_cmd_synth(int argc, char **argv) {
    rw_synth_options o = {.seed = 42};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--arch") && has_val) o.arch = argv[++i];
        else if (!strcmp(a, "--preset") && has_val) o.preset = argv[++i];
        else if (!strcmp(a, "--type") && has_val) o.type = argv[++i];
        else if (!strcmp(a, "--seed") && has_val) o.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--vocab") && has_val) o.vocab_path = argv[++i];
        else if (!strcmp(a, "--mtp")) o.mtp = true;
        else if (!strcmp(a, "--layers") && has_val) {
            long n;
            if (rw_cli_parse_int("synth", a, argv[++i], 1, 1024, &n)) return 2;
            o.n_layer = (uint32_t)n;
        }
        else if (!strcmp(a, "--threads") && has_val) {
            long n;
            if (rw_cli_parse_int("synth", a, argv[++i], 0, 1024, &n)) return 2;
            o.n_threads = (int)n;
        }
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o.verbose = true;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && has_val) out = argv[++i];
        else {
            rw_cli_error("synth", "unexpected argument '%s'", a);
            usage();
            return 2;
        }
    }
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
