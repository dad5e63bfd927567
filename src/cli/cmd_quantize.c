/* cmd_quantize.c - `rewind quantize IN.gguf OUT.gguf TYPE [--pure]
 * [--allow-requantize] [--output-tensor-type T] [--token-embedding-type T]
 * [--imatrix FILE] [--threads N]`: a model file's weights converted to
 * TYPE as llama-quantize converts them (rw_quantize_file). */
#include <stdio.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "rewind.h"

static void usage(void) {
    fprintf(stderr, "usage: rewind quantize IN.gguf OUT.gguf TYPE [--pure] [--allow-requantize] "
                    "[--output-tensor-type T] [--token-embedding-type T] [--imatrix FILE] [--threads N]\ntypes:");
    for (size_t i = 0; rw_quantize_type(i); i++) fprintf(stderr, " %s", rw_quantize_type(i));
    fprintf(stderr, "\n");
}

static double file_mib(const char *path) {
    struct stat st;
    return stat(path, &st) ? 0 : (double)st.st_size / (1024.0 * 1024.0);
}

int rw_cmd_quantize(int argc, char **argv) {
    rw_quantize_params qp = rw_quantize_params_default();
    long threads = 0;
    const rw_cli_opt opts[] = {
        {"--pure", RW_OPT_FLAG, &qp.pure, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--allow-requantize", RW_OPT_FLAG, &qp.allow_requantize, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--output-tensor-type", RW_OPT_STR, &qp.output_type, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--token-embedding-type", RW_OPT_STR, &qp.token_embd_type, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--imatrix", RW_OPT_STR, &qp.imatrix, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_END,
    };
    const char *pos[3] = {0};
    int n_pos = 0;
    const int prc = rw_cli_parse_opts("quantize", argc, argv, opts, pos, 3, &n_pos);
    if (prc) {
        if (prc == RW_CLI_BAD_LINE) usage();
        return 2;
    }
    if (n_pos != 3) {
        usage();
        return 2;
    }
    rw_error err = {0};
    qp.n_threads = (int)threads;
    if (rw_quantize_file(pos[0], pos[1], pos[2], &qp, &err) != RW_OK) {
        rw_cli_error("quantize", "%s", err.msg);
        return 1;
    }
    fprintf(stderr, "quantize: %s (%.2f MiB) -> %s (%.2f MiB, %s)\n", pos[0], file_mib(pos[0]), pos[1],
            file_mib(pos[1]), pos[2]);
    return 0;
}
