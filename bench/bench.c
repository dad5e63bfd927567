/* cmd_bench.c - `rewind bench WHAT [ARGS]`: dispatches to one benchmark.
 *
 * Each benchmark is a function taking argv from its own name on (argv[0] =
 * "kernels"); add new ones to the table.
 *
 * Unlike the other commands, most benchmarks reach below the public API on
 * purpose: they time one layer alone (a kernel per tier and type, an op, the
 * sampler chain, the grammar matcher, a speculative step, a checkpoint or a
 * cache insert), which no embedder calls and which the header therefore
 * does not publish. tests/api/test_cli_symbols.sh names those objects; a
 * benchmark of what an embedder does (a new one, or this dispatcher) uses
 * include/rewind.h alone. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} bench_entry;

static const bench_entry benches[] = {
    {"kernels", rw_bench_kernels,
     "kernels [--json] [--threads N] [--kernels TIER] [--types T1,T2,...] [--quick] [--stored-panels]"},
    {"tokenizer", rw_bench_tokenizer, "tokenizer MODEL [-f FILE] [--reps N]"},
    {"experts", rw_bench_experts,
     "experts [--types T1,T2,...] [--experts N] [--rows 1,2,4,...] [--stored-panels] [--threads N] [--kernels TIER] "
     "[--json]"},
    {"ops", rw_bench_ops, "ops [--ctx N] [--threads N] [--kernels TIER] [--json] [--quick]"},
    {"serve", rw_bench_serve,
     "serve MODEL [--clients 1,4,16] [--requests N] [--prompt N] [--gen N] [--parallel N] [--threads N] "
     "[--kernels TIER] [--json]"},
    {"model", rw_bench_model,
     "model MODEL [--prompt N] [--gen N] [--depth N] [--threads N] [--kernels TIER] [--kv f32|f16] [--reps R] "
     "[--json]"},
    {"state", rw_bench_state, "state MODEL [--prompt N] [--threads N] [--kernels TIER] [--kv f32|f16] [--json]"},
    {"chat", rw_bench_chat,
     "chat MODEL [--turns N] [--system-tokens N] [--gen N] [--checkpoints N] [--threads N] [--kernels TIER] "
     "[--kv f32|f16] [--json]"},
    {"spec", rw_bench_spec,
     "spec TARGET [--draft DRAFT] [--k 1,2,4,8] [--threads N] [--kernels TIER] [--prompt N] [--gen N] [--reps R] "
     "[--seqs N] [--kv f32|f16]"},
    {"sampler", rw_bench_sampler, "sampler [--vocab N] [--reps R] [--json]"},
    {"grammar", rw_bench_grammar,
     "grammar VOCAB.gguf [--walks N] [--tokens N] [--schema FILE.json | --gbnf FILE.gbnf] [--json]"},
};

static void usage(FILE *f) {
    fprintf(f, "usage:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) fprintf(f, "  rewind bench %s\n", benches[i].usage);
}

int rw_cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (!strcmp(argv[1], benches[i].name)) {
            static char line[512]; /* the benchmark's --help names its words (rw_cli_set_usage keeps the pointer) */
            snprintf(line, sizeof line, "bench %s", benches[i].usage);
            rw_cli_set_usage(line);
            return benches[i].run(argc - 1, argv + 1);
        }
    rw_cli_error("bench", "unknown benchmark '%s'", argv[1]);
    usage(stderr);
    return 2;
}
