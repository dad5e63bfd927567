/* main.c - the rewind program: dispatches to the subcommands in cli.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__) /* defined by the headers above */
#include <malloc.h>
#endif

#include "base/log.h"
#include "cli/cli.h"
#include "cli/options.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} cli_command;

static const cli_command commands[] = {
    {"inspect", rw_cmd_inspect, "inspect FILE.gguf [--json] [--dump TENSOR --out OUT.f32]"},
    {"architectures", rw_cmd_architectures, "architectures (the general.architecture values this build loads)"},
    {"synth", rw_cmd_synth,
     "synth --arch ARCH --preset NAME [--type TYPE] [--seed S] [--vocab OTHER.gguf] [--mtp] [--threads N] -o OUT.gguf"},
    {"quantize", rw_cmd_quantize,
     "quantize IN.gguf OUT.gguf TYPE [--pure] [--allow-requantize] [--output-tensor-type T] "
     "[--token-embedding-type T] [--imatrix FILE] [--tensor-type PATTERN=T ...] [--threads N]"},
    {"imatrix", rw_cmd_imatrix,
     "imatrix MODEL -f TEXT [-o imatrix.gguf] [--ctx N] [--chunks N] [--process-output] [--threads N] [--kernels "
     "TIER]"},
    {"gguf-split", rw_cmd_gguf_split,
     "gguf-split [--split-max-tensors N | --split-max-size N(M|G)] IN.gguf OUT_PREFIX\n"
     "       rewind gguf-split --merge FIRST_PART.gguf OUT.gguf"},
    {"logits", rw_cmd_logits,
     "logits MODEL --ids IDS [--mode batch|step] [--kv f32|f16] [--threads N] [--kernels TIER] --out OUT.f32"},
    {"perplexity", rw_cmd_perplexity,
     "perplexity MODEL -f FILE [--ctx N] [--chunks N] [--kl-divergence-base OUT] [--kv f32|f16] [--threads N] "
     "[--kernels TIER]\n"
     "       rewind perplexity MODEL --kl-divergence --kl-divergence-base FILE [--chunks N] ...\n"
     "       rewind perplexity MODEL --hellaswag -f FILE [--hellaswag-tasks N] ..."},
    {"tokenize", rw_cmd_tokenize, "tokenize MODEL (TEXT | -f FILE) [--parse-special] [--no-bos]"},
    {"detokenize", rw_cmd_detokenize, "detokenize MODEL IDS..."},
    {"chat-template", rw_cmd_chat_template,
     "chat-template MODEL_OR_TEMPLATE --messages FILE.json [--add-generation-prompt] [--tools FILE.json] "
     "[--enable-thinking true|false] [--bos-token S] [--eos-token S] [--now YYYY-MM-DDTHH:MM:SS]"},
    {"generate", rw_cmd_generate,
     "generate MODEL (--ids IDS | -p TEXT) -n N [--temp T] [--seed S] [--kv f32|f16] [--threads N] [--kernels TIER] "
     "[--print-ids]"},
    {"serve", rw_cmd_serve,
     "serve MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N] [--threads N] [--kernels TIER] "
     "[--api-key KEY] [--kv f32|f16] [--max-queue N] [--max-body BYTES] [--max-connections N] [--prefill-chunk N]"},
    {"cache-verify", rw_cmd_cache_verify, "cache-verify MODEL DIR [--kv f32|f16] [--ctx N] [--draft DRAFT.gguf]"},
    {"demo-client", rw_cmd_demo_client,
     "demo-client [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-tokens N] [--system-tokens N] "
     "[--wait SECONDS]"},
    {"bench", rw_cmd_bench,
     "bench kernels [--json] [--threads N] [--kernels TIER] [--types T1,T2,...] [--quick] [--stored-panels]"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: rewind COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  rewind %s\n", commands[i].usage);
}

/* The engine allocates and frees megabyte buffers all the time (a recurrent
 * layer's checkpoint is 1 MiB on the 0.8B preset, a sequence's checkpoint
 * 19 MiB, logits rows 1 MiB). With glibc's defaults such blocks are mapped
 * and unmapped (or trimmed off the heap) each time, and every reuse pays
 * page faults and the kernel's page clearing: measured at 5-14% of a
 * 16-client server's time. Keeping blocks below 32 MiB (glibc's most) in the heap and
 * trimming only past 1 GiB of free top lets freed blocks be reused. This
 * is the program's policy, not the library's: embedders choose their own. */
static void tune_malloc(void) {
#if defined(__GLIBC__) /* other C libraries have their own policies */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

/* The program's log hook: the library's messages on stderr. */
static void log_to_stderr(void *user, rw_log_level level, const char *msg) {
    (void)user;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "rewind: %s: %s\n", names[level <= RW_LOG_DEBUG ? level : RW_LOG_DEBUG], msg);
}

/* Environment settings are the program's conveniences (the library reads no
 * environment): RW_KERNELS=ref|avx2|avx512|amx|neon picks the kernel tier (when
 * the CPU lacks it or the name is unknown, one warning line and the default
 * tier), RW_NUMERICS=auto|fast|ggml the summation order
 * (a command's --numerics overrides it), RW_PANELS=0 turns the packed
 * panels off, RW_AVX_VNNI=0 keeps the AVX2 tier to plain AVX2 (no AVX-VNNI;
 * the same results), RW_PREFETCH=l1|l2|auto where the one-row K-quant
 * kernels prefetch the weights (the same results), RW_STORED_PANELS=
 * experts|all|off which weights a model keeps as stored panels (the same
 * results). */
void rw_cli_apply_env(void) {
    /* through the public setters: an unknown name (or a tier this CPU lacks)
     * is refused; said once, so that a figure taken under the variable is not
     * mistaken for that tier's */
    const char *k = getenv("RW_KERNELS");
    rw_error kerr;
    if (k && *k && rw_set_kernels(k, &kerr) != RW_OK)
        fprintf(stderr, "rewind: RW_KERNELS=%s ignored (%s); using %s\n", k, kerr.msg, rw_get_kernels());
    const char *n = getenv("RW_NUMERICS");
    rw_error nerr;
    if (n && *n && rw_set_numerics(n, &nerr) != RW_OK)
        fprintf(stderr, "rewind: RW_NUMERICS=%s ignored (%s); using %s\n", n, nerr.msg, rw_get_numerics());
    const char *p = getenv("RW_PANELS");
    if (p && !strcmp(p, "0")) rw_set_packed_panels(false, NULL);
    const char *v = getenv("RW_AVX_VNNI");
    if (v && !strcmp(v, "0")) rw_set_avx_vnni(false, NULL);
    const char *pf = getenv("RW_PREFETCH");
    rw_error perr;
    if (pf && *pf && rw_set_weight_prefetch(pf, &perr) != RW_OK)
        fprintf(stderr, "rewind: RW_PREFETCH=%s ignored (%s); using %s\n", pf, perr.msg, rw_get_weight_prefetch());
    const char *sp = getenv("RW_STORED_PANELS");
    rw_error serr;
    if (sp && *sp && rw_set_stored_panels(sp, &serr) != RW_OK)
        fprintf(stderr, "rewind: RW_STORED_PANELS=%s ignored (%s); using %s\n", sp, serr.msg, rw_get_stored_panels());
}

int main(int argc, char **argv) {
    tune_malloc();
    rw_log_set(log_to_stderr, NULL, RW_LOG_INFO);
    rw_cli_apply_env();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            rw_cli_set_usage(commands[i].usage);
            const int rc = commands[i].run(argc - 1, argv + 1);
            return rw_cli_help_shown() ? 0 : rc; /* CMD --help: its usage, on stdout */
        }
    fprintf(stderr, "rewind: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
