/* cli.h - the rewind command-line program: one function per subcommand.
 *
 * Each command gets argv starting at its own name (argv[0] = "inspect") and
 * returns the process exit status: 0 on success, 1 on a reported error, 2 on
 * a usage error. Commands print one-line errors on stderr as
 * "rewind CMD: message". */
#ifndef RW_CLI_CLI_H
#define RW_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "chat/chat.h"
#include "cli/options.h"
#include "engine/spec.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "rewind.h"
#include "tokenizer/tokenizer.h"

int rw_cmd_inspect(int argc, char **argv);
int rw_cmd_architectures(int argc, char **argv);
int rw_cmd_synth(int argc, char **argv);
int rw_cmd_quantize(int argc, char **argv);
int rw_cmd_gguf_split(int argc, char **argv);
int rw_cmd_imatrix(int argc, char **argv);
int rw_cmd_logits(int argc, char **argv);
int rw_cmd_perplexity(int argc, char **argv);
int rw_cmd_generate(int argc, char **argv);
int rw_cmd_chat_template(int argc, char **argv);
int rw_cmd_tokenize(int argc, char **argv);
int rw_cmd_detokenize(int argc, char **argv);
int rw_cmd_bench(int argc, char **argv);
int rw_cmd_serve(int argc, char **argv);
int rw_cmd_cache_verify(int argc, char **argv);
int rw_cmd_demo_client(int argc, char **argv);

/* Benchmarks run by `rewind bench NAME` (argv[0] = NAME). */
int rw_bench_kernels(int argc, char **argv);
/* Multiply-adds a second of one core's 512-bit vpdpbusd at full
 * throughput (bench_peak.c), 0 where the CPU has no AVX-512 VNNI. */
double rw_bench_int8_peak_gmacs(void);
/* bench_kernels.c: the best read bandwidth a streaming read loop reaches
 * over a fresh buffer of `bytes` on pool's threads (GB/s), best of reps. */
double rw_cli_read_bandwidth(rw_threadpool *pool, size_t bytes, int reps);
/* The same over memory the caller has (buf 64-byte aligned; bytes rounded
 * down to whole chunks), e.g. a model's mapped weights: no memory added. */
double rw_cli_read_bandwidth_over(rw_threadpool *pool, const void *buf, size_t bytes, int reps);
/* bench_kernels.c, for the other matmul benchmarks: `bytes` of random
 * weights of type t with sane block scales; the CPU's model name; an
 * RW_OPT_FN parsing --types T1,T2,... (ctx: an rw_bench_types, up to 64
 * matmul weight types). */
void rw_bench_fill_weights(rw_dtype t, uint8_t *buf, size_t bytes);
void rw_bench_cpu_model(char *buf, size_t cap);
typedef struct {
    rw_dtype *types;
    int *n;
} rw_bench_types;
int rw_bench_opt_types(void *ctx, const char *cmd, const char *name, const char *v);
int rw_bench_experts(int argc, char **argv);
int rw_bench_tokenizer(int argc, char **argv);
int rw_bench_model(int argc, char **argv);
int rw_bench_ops(int argc, char **argv);
int rw_bench_sampler(int argc, char **argv);
int rw_bench_serve(int argc, char **argv);
int rw_bench_spec(int argc, char **argv);
int rw_bench_state(int argc, char **argv);
int rw_bench_chat(int argc, char **argv);
int rw_bench_grammar(int argc, char **argv);

/* Applies RW_KERNELS, RW_NUMERICS and RW_PANELS (main.c; the tests call it too). */
void rw_cli_apply_env(void);

/* Prints "rewind CMD: " + message + newline on stderr. */
void rw_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* bench/bench_models.c: for the benchmarks that time internal layers (the
 * commands open models with rw_model_open). Each returns 0 or the exit
 * status after printing the error. */
/* Opens path and loads its model; on success the caller frees *m then *g. */
int rw_cli_open_model(const char *cmd, const char *path, rw_gguf **g, rw_model **m);

/* The cost of one draft pass relative to one target pass for the adaptive
 * rule of speculative decoding (engine/spec.h): a CPU decode pass streams
 * the weights, so the ratio of the files' sizes; 0 without a draft. */
float rw_cli_draft_cost(const rw_gguf *draft, const rw_gguf *target);
/* What `serve` and `bench serve` load: the model with its tokenizer and
 * chat template, and the optional draft model with its tokenizer (checked to
 * share the vocabulary). rw_cli_served_open fills *sv (0) or prints the
 * error and leaves nothing open (1); rw_cli_served_close frees it all (any
 * member may be NULL). */
typedef struct {
    rw_gguf *g, *dg;
    rw_model *m, *dm;
    rw_tokenizer *tok, *dtok;
    rw_chat_template *tmpl;
    char *bos, *eos;
} rw_cli_served;
int rw_cli_served_open(const char *cmd, const char *path, const char *draft_path, rw_cli_served *sv);
/* The same without printing: the error in *err (RW_OK: *sv filled). */
rw_status rw_cli_served_load(const char *path, const char *draft_path, rw_cli_served *sv, rw_error *err);
void rw_cli_served_close(rw_cli_served *sv);

/* cli_model.c: the LoRA adapter options of the commands that open a model,
 * as llama.cpp's: --lora FILE[,FILE...] (scale 1) and --lora-scaled
 * FILE:SCALE[,FILE:SCALE...], each repeatable, in the order given (at most
 * RW_CLI_MAX_LORA); RW_OPT_LORA(ctx) is their fragment of an option table,
 * filling the rw_cli_lora at ctx, whose list goes to rw_model_params. */
#define RW_CLI_MAX_LORA 16
typedef struct {
    rw_lora_adapter a[RW_CLI_MAX_LORA];
    int n;
    char *lists[RW_CLI_MAX_LORA]; /* owned: the options' values, cut into the paths (rw_cli_lora_free) */
    int n_lists;
} rw_cli_lora;
int rw_cli_lora_opt(void *ctx, const char *cmd, const char *name, const char *value);
void rw_cli_lora_free(rw_cli_lora *l);
/* Runs a command whose options include RW_OPT_LORA with an empty list,
 * freed when it returns (whichever way). */
int rw_cli_run_with_lora(int (*run)(int argc, char **argv, rw_cli_lora *lora), int argc, char **argv);
#define RW_OPT_LORA(ctx)                                                           \
    {"--lora", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_cli_lora_opt, (ctx)}, {       \
        "--lora-scaled", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_cli_lora_opt, (ctx) \
    }
static inline void rw_cli_lora_params(const rw_cli_lora *l, rw_model_params *mp) {
    mp->lora = l->a;
    mp->n_lora = l->n;
}

/* cli_model.c: a whole file, NUL-terminated (*len bytes before the NUL); NULL if it cannot
 * be read. The caller frees it. */
char *rw_cli_read_file(const char *path, size_t *len);

/* perplexity_kld.c: llama-perplexity's base file of log-probabilities
 * (--kl-divergence-base) and the KL-divergence statistics against it.
 * A row of the file is rw_cli_kld_row_u16 u16; write_head writes the
 * header and the n_ctx * n_chunk tokens (false on a write error);
 * encode_row one row of logits (it returns the NLL of tok, next in the
 * text, as -rw_cli_log_prob gives it, from the same pass). read_head checks a file against the
 * model's vocabulary and its size, and gives its context, chunks and
 * tokens (*tokens: the caller frees); 1 with the reason in msg. */
typedef struct rw_cli_kld rw_cli_kld;
/* log softmax(row)[tok] in double, the terms summed in vocabulary order
 * (perplexity's and HellaSwag's per-token figure). */
double rw_cli_log_prob(const float *row, int64_t n_vocab, int32_t tok);
size_t rw_cli_kld_row_u16(int64_t n_vocab);
bool rw_cli_kld_write_head(FILE *f, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk, const int32_t *tokens);
double rw_cli_kld_encode_row(const float *row, int64_t n_vocab, int32_t tok, uint16_t *out);
int rw_cli_kld_read_head(FILE *f, const char *path, int64_t n_vocab, int32_t *n_ctx, int32_t *n_chunk, int32_t **tokens,
                         char *msg, size_t msg_len);
/* The statistics of up to n_values scored tokens (freed by rw_cli_kld_free):
 * add one token's row of logits against its base row (tok: the actual next
 * token; it returns tok's NLL under the model, as encode_row), the running
 * figures after a chunk, the final ones. */
rw_cli_kld *rw_cli_kld_new(int64_t n_values);
void rw_cli_kld_free(rw_cli_kld *k);
double rw_cli_kld_add(rw_cli_kld *k, const float *row, int64_t n_vocab, const uint16_t *base, int32_t tok);
void rw_cli_kld_print_chunk(const rw_cli_kld *k, int64_t chunk, FILE *out);
void rw_cli_kld_print_final(rw_cli_kld *k, FILE *out);
/* perplexity_hellaswag.c: the HellaSwag score of m on a data file's text
 * (len bytes, NUL-terminated; its lines are cut in place), the first
 * max_tasks tasks (0: all), on a sequence of n_ctx positions; prints as it
 * goes. The exit status: 0, or 1 after printing why not. */
int rw_cli_hellaswag(const char *cmd, rw_model *m, char *text, size_t len, long max_tasks, long n_ctx, int kv_f32);

/* cli_spec.c: the speculative-decoding options of generate, serve and
 * bench spec: --spec mtp|ngram|mtp,ngram, --spec-ngram-n N,
 * --spec-ngram-min-hits N, as a fragment of an option table (options.h)
 * that fills the rw_spec_params at p. rw_cli_spec_opt is its RW_OPT_FN (ctx:
 * the rw_spec_params; rw_spec_params_set_costs then sets the adaptive
 * rule's costs). */
int rw_cli_parse_spec(const char *cmd, const char *v, rw_spec_params *p);
int rw_cli_spec_opt(void *spec_params, const char *cmd, const char *name, const char *v);
/* clang-format off */ /* one table entry a line */
#define RW_OPT_SPEC(p)                                                                                                 \
    {"--spec", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_cli_spec_opt, (p)},                                               \
        {"--spec-ngram-n", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_cli_spec_opt, (p)},                                   \
        {"--spec-ngram-min-hits", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, rw_cli_spec_opt, (p)}
/* The draft-model options of generate, serve and bench serve: --draft
 * DRAFT.gguf (const char *path), --draft-max K (long *k_max, in [k_lo,
 * RW_SPEC_MAX_K]: generate takes 0, no drafting), --draft-fixed (bool
 * *fixed: always draft K, not the adaptive rule). */
#define RW_OPT_DRAFT(path, k_max, k_lo, fixed)                                                                        \
    {"--draft", RW_OPT_STR, (path), 0, 0, 0, 0, NULL, NULL, NULL},                                                     \
        {"--draft-max", RW_OPT_INT, (k_max), (k_lo), RW_SPEC_MAX_K, 0, 0, NULL, NULL, NULL},                           \
        {"--draft-fixed", RW_OPT_FLAG, (fixed), 0, 0, 0, 0, NULL, NULL, NULL}
/* clang-format on */

/* Reads whitespace-separated token ids; the caller frees *ids. */
int rw_cli_read_ids(const char *cmd, const char *path, int32_t **ids, int64_t *n);
int rw_cli_parse_kv(const char *cmd, const char *s, rw_kv_type *out);
/* --numerics auto|fast|ggml (kernels/matmul.h): selects the mode, before any
 * model is loaded; 0, or 2 after printing the error. */
int rw_cli_parse_numerics(const char *cmd, const char *s);
/* --kernels ref|avx2|avx512|amx|neon: selects the kernel tier, before any
 * model is loaded ("" = the best this CPU has, as rw_set_kernels; an
 * unknown name or a tier this CPU lacks is an error, where RW_KERNELS is
 * ignored); 0, or 2 after printing the error. */
int rw_cli_parse_kernels(const char *cmd, const char *s);
int rw_cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);

#endif
