/* options.h - the one option parser of the rewind program: each command
 * describes its options in a table and rw_cli_parse_opts fills the
 * variables, checks ranges and prints the error, so no command carries its
 * own strcmp loop and the shared options (--threads, --kv, --numerics,
 * --kernels)
 * parse the same everywhere. */
#ifndef RW_CLI_OPTIONS_H
#define RW_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    RW_OPT_FLAG,     /* bool *dst = true; takes no value */
    RW_OPT_STR,      /* const char **dst = the value (argv's storage) */
    RW_OPT_INT,      /* long *dst = an integer in [lo, hi] */
    RW_OPT_FLOAT,    /* float *dst = a finite number in [flo, fhi] */
    RW_OPT_SIZE,     /* size_t *dst = a byte count with an optional K, M or G suffix (powers of 1024) */
    RW_OPT_CHOICE,   /* const char **dst = the value, one of choices ("batch|step") */
    RW_OPT_KV,       /* rw_kv_type *dst = f32 | f16 */
    RW_OPT_NUMERICS, /* sets the process's numerics mode (auto | fast | ggml); dst unused */
    RW_OPT_KERNELS,  /* sets the process's kernel tier (ref | avx2 | avx512 | amx | neon); dst unused */
    RW_OPT_FN,       /* fn(ctx, cmd, name, value): repeatable options and lists; 0, or 2 after printing */
} rw_cli_opt_kind;

typedef struct {
    const char *name; /* "--threads"; a table ends with a NULL name */
    rw_cli_opt_kind kind;
    void *dst;
    long lo, hi;      /* RW_OPT_INT */
    double flo, fhi;  /* RW_OPT_FLOAT */
    const char *choices;
    int (*fn)(void *ctx, const char *cmd, const char *name, const char *value);
    void *ctx;
} rw_cli_opt;

/* The options every model command shares. */
#define RW_OPT_THREADS(p) {"--threads", RW_OPT_INT, (p), 0, 1024, 0, 0, NULL, NULL, NULL}
#define RW_OPT_KV_TYPE(p) {"--kv", RW_OPT_KV, (p), 0, 0, 0, 0, NULL, NULL, NULL}
#define RW_OPT_NUMERICS_MODE {"--numerics", RW_OPT_NUMERICS, NULL, 0, 0, 0, 0, NULL, NULL, NULL}
#define RW_OPT_KERNELS_TIER {"--kernels", RW_OPT_KERNELS, NULL, 0, 0, 0, 0, NULL, NULL, NULL}
#define RW_OPT_END {NULL, RW_OPT_FLAG, NULL, 0, 0, 0, 0, NULL, NULL, NULL}

/* Parses argv[1..argc-1] (argv[0] is the command's name): each option of
 * opts with its value ("--name value" or "--name=value"), every other word
 * into pos[0..max_pos-1] in order (*n_pos of them; a word starting with '-'
 * that is no option is an error, except "-" itself). Returns 0; 2 after
 * printing "rewind CMD: ..." for a bad value (the message says what the
 * option takes); RW_CLI_BAD_LINE after printing it for an unknown option, a
 * missing value or too many words, where a command may add its usage line.
 * Both are usage errors: the command exits with status 2. */
#define RW_CLI_BAD_LINE 3
/* -h or --help (where the table has no such option): the command's usage,
 * made from its table, printed on stdout; the command returns this (non-zero,
 * so it stops) and the program exits 0 (rw_cli_help_shown). */
#define RW_CLI_HELP     4
int rw_cli_parse_opts(const char *cmd, int argc, char **argv, const rw_cli_opt *opts, const char **pos, int max_pos,
                      int *n_pos);

/* The usage line of the command about to run ("perplexity MODEL -f FILE
 * ..."; static storage): -h / --help prints it when it is the command's. */
void rw_cli_set_usage(const char *line);
/* Whether a command printed its usage for -h / --help. */
bool rw_cli_help_shown(void);

#endif
