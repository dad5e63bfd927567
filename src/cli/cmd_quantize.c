/* cmd_quantize.c - `rewind quantize IN.gguf OUT.gguf TYPE [--pure]
 * [--allow-requantize] [--output-tensor-type T] [--token-embedding-type T]
 * [--imatrix FILE] [--tensor-type PATTERN=T ...] [--tensor-type-file FILE]
 * [--threads N]`: a model file's weights converted to
 * TYPE as llama-quantize converts them (rw_quantize_file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "rewind.h"

static void usage(void) {
    fprintf(stderr,
            "usage: rewind quantize IN.gguf OUT.gguf TYPE [--pure] [--allow-requantize] "
            "[--output-tensor-type T] [--token-embedding-type T] [--imatrix FILE] [--tensor-type PATTERN=T ...] "
            "[--tensor-type-file FILE] [--threads N]\ntypes:");
    for (size_t i = 0; rw_quantize_type(i); i++) fprintf(stderr, " %s", rw_quantize_type(i));
    fprintf(stderr, "\n");
}

static double file_mib(const char *path) {
    struct stat st;
    return stat(path, &st) ? 0 : (double)st.st_size / (1024.0 * 1024.0);
}

/* --tensor-type P=T (repeatable) and --tensor-type-file FILE (its
 * white-space separated items), gathered into one list for
 * rw_quantize_params.tensor_types; the string is malloc'd, freed by the
 * command. */
typedef struct {
    char *list;
    size_t len;
} type_list;

static int add_types(type_list *l, const char *items, size_t n) {
    char *p = realloc(l->list, l->len + n + 2);
    if (!p) return 1;
    l->list = p;
    if (l->len) p[l->len++] = ' ';
    memcpy(p + l->len, items, n);
    l->len += n;
    p[l->len] = 0;
    return 0;
}

static int tensor_type_opt(void *ctx, const char *cmd, const char *name, const char *value) {
    type_list *l = ctx;
    size_t n = 0;
    char *text = NULL;
    if (!strcmp(name, "--tensor-type-file") && !(text = rw_cli_read_file(value, &n))) {
        rw_cli_error(cmd, "cannot read %s", value);
        return 2;
    }
    const int bad = text ? add_types(l, text, n) : add_types(l, value, strlen(value));
    free(text);
    if (bad) rw_cli_error(cmd, "out of memory");
    return bad ? 2 : 0;
}

int rw_cmd_quantize(int argc, char **argv) {
    rw_quantize_params qp = rw_quantize_params_default();
    type_list types = {0};
    long threads = 0;
    const rw_cli_opt opts[] = {
        {"--pure", RW_OPT_FLAG, &qp.pure, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--allow-requantize", RW_OPT_FLAG, &qp.allow_requantize, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--output-tensor-type", RW_OPT_STR, &qp.output_type, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--token-embedding-type", RW_OPT_STR, &qp.token_embd_type, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--imatrix", RW_OPT_STR, &qp.imatrix, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--tensor-type", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, tensor_type_opt, &types},
        {"--tensor-type-file", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, tensor_type_opt, &types},
        RW_OPT_THREADS(&threads),
        RW_OPT_END,
    };
    const char *pos[3] = {0};
    int n_pos = 0;
    const int prc = rw_cli_parse_opts("quantize", argc, argv, opts, pos, 3, &n_pos);
    if (prc || n_pos != 3) {
        if (prc == RW_CLI_BAD_LINE || (!prc && n_pos != 3)) usage();
        free(types.list);
        return 2;
    }
    rw_error err = {0};
    qp.n_threads = (int)threads;
    qp.tensor_types = types.list;
    const rw_status s = rw_quantize_file(pos[0], pos[1], pos[2], &qp, &err);
    free(types.list);
    if (s != RW_OK) {
        rw_cli_error("quantize", "%s", err.msg);
        return 1;
    }
    fprintf(stderr, "quantize: %s (%.2f MiB) -> %s (%.2f MiB, %s)\n", pos[0], file_mib(pos[0]), pos[1],
            file_mib(pos[1]), pos[2]);
    return 0;
}
