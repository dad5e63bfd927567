/* cmd_generate.c - `rewind generate MODEL (--ids IDS | -p TEXT) -n N
 * [--temp T] [--top-k K] [--top-p P] [--min-p P] [--presence-penalty X]
 * [--frequency-penalty X] [--repeat-penalty X] [--seed S] [--kv f32|f16] [--numerics M]
 * [--threads N] [--print-ids] [--draft DRAFT.gguf [--draft-max K] [--draft-fixed]]
 * [--grammar FILE.gbnf | --json-schema FILE.json]`.
 *
 * --grammar / --json-schema: the output must match the GBNF grammar or the
 * JSON schema (docs/structured-outputs.md; the engine's rules, as the
 * server's): the mask comes before the sampler chain, generation stops where the grammar is complete and nothing
 * may follow, or at an end-of-generation token where it can end; -n still
 * cuts it (a note on stderr says the output is incomplete).
 *
 * A text prompt is tokenized as llama.cpp does (BOS/EOS as the vocabulary
 * asks, special tokens parsed); the output is text through the streaming
 * detokenizer unless --print-ids. Prefills the prompt in one forward pass,
 * then generates N tokens one at a time with the sampler chain: greedy at temperature 0 (the default; ties go to the
 * lowest id), otherwise seeded sampling. Every filter and penalty is off
 * unless asked for; the penalties count the generated tokens only (OpenAI's
 * semantics, not the prompt). Generation does not stop at end-of-generation
 * tokens: exactly N tokens are produced.
 *
 * The KV cache is f32 unless --kv f16 is given: this command is the hook
 * that compares greedy continuations with llama.cpp's goldens, which were
 * made with an f32 cache, and on quantized models an f16 cache rounds K and
 * V enough to flip a later activation's quantization and branch early
 * (qwen3 Q8_0: 23 equal tokens of 29 reliable ones with f16, all with f32).
 * rewind bench model keeps llama.cpp's f16 default. The numerics are the
 * library's default (auto: our summation order) unless --numerics or
 * RW_NUMERICS says otherwise; --numerics ggml gives llama.cpp's greedy ids
 * bit for bit (docs/numerics.md). To compare with the server, give both
 * the same --kv and --numerics.
 *
 * --draft: speculative decoding with DRAFT proposing up to K
 * tokens a step (--draft-max, default 4) and the model verifying them in one
 * pass; the draft needs the same vocabulary (checked at start). The output
 * is the same as without a draft: bitwise for greedy, identically
 * distributed for sampling. How many tokens are drafted adapts to the
 * measured acceptance (the engine's rule, with the draft's cost taken as the
 * ratio of the two files' sizes); --draft-fixed always drafts K (within the
 * budget). Statistics go to stderr.
 *
 * --spec mtp drafts with the model's own MTP block (Qwen3.5 files that carry
 * it), --spec ngram with prompt lookup over the prompt and the output
 * (--spec-ngram-n, --spec-ngram-min-hits), --spec mtp,ngram or ngram with
 * --draft combine them (docs/speculative-decoding.md); same output
 * guarantees.
 *
 * Built on the public API alone (include/rewind.h), as any embedder: the
 * model from rw_model_open, one request on a step-driven rw_engine (no
 * prefix cache, the whole prompt in one prefill) with
 * rw_engine_submit_tokens, whose events carry the token ids and their
 * text; the statistics from rw_engine_stats_full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "rewind.h"

static const char *CMD = "generate";

static int usage(void) {
    fprintf(stderr, "usage: rewind generate MODEL (--ids IDS | -p TEXT) -n N [--temp T] [--top-k K] [--top-p P] "
                    "[--min-p P] [--presence-penalty X] [--frequency-penalty X] [--repeat-penalty X] [--seed S] "
                    "[--kv f32|f16] [--numerics auto|fast|ggml] [--threads N] [--kernels TIER] [--print-ids] "
                    "[--draft DRAFT.gguf] [--spec mtp|ngram|mtp,ngram] [--spec-ngram-n N] [--spec-ngram-min-hits N] "
                    "[--draft-max K] [--draft-fixed] [--grammar FILE.gbnf | --json-schema FILE.json]\n");
    return 2;
}

/* --spec mtp|ngram|mtp,ngram into the engine's RW_SPECULATE_* flags. */
static int spec_opt(void *flags, const char *cmd, const char *name, const char *v) {
    unsigned src = 0;
    for (const char *s = v; *s;) {
        const char *e = strchr(s, ',');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 3 && !strncmp(s, "mtp", 3)) src |= RW_SPECULATE_MTP;
        else if (n == 5 && !strncmp(s, "ngram", 5)) src |= RW_SPECULATE_NGRAM;
        else {
            rw_cli_error(cmd, "%s takes mtp, ngram or mtp,ngram, not \"%s\"", name, v);
            return 2;
        }
        s += n + (e ? 1 : 0);
    }
    if (!src) {
        rw_cli_error(cmd, "%s takes mtp, ngram or mtp,ngram", name);
        return 2;
    }
    *(unsigned *)flags = src;
    return 0;
}

/* What the request's events are written to. */
typedef struct {
    const rw_model *m;
    bool print_ids, grammar;
    long n_printed; /* tokens written */
    bool done;
    rw_done_reason finish;
    char error[512];
    char *text; /* with a grammar: the tokens' pieces, for the note at the end (malloc'd) */
    size_t text_len, text_cap;
    bool nomem;
} sink;

static void keep_pieces(sink *k, const int32_t *toks, int n) {
    const rw_tokenizer *t = rw_model_tokenizer(k->m);
    for (int i = 0; i < n && !k->nomem; i++) {
        char buf[256];
        size_t len = rw_token_to_piece(t, toks[i], false, buf, sizeof buf);
        if (k->text_len + len + 1 > k->text_cap) {
            size_t cap = (k->text_len + len + 1) * 2;
            char *p = realloc(k->text, cap);
            if (!p) {
                k->nomem = true;
                return;
            }
            k->text = p;
            k->text_cap = cap;
        }
        if (len > sizeof buf) rw_token_to_piece(t, toks[i], false, k->text + k->text_len, len);
        else memcpy(k->text + k->text_len, buf, len);
        k->text_len += len;
    }
}

static void on_event(void *user, const rw_token_event *ev) {
    sink *k = user;
    int n = ev->n_tokens;
    /* under a grammar an end-of-generation token (where the grammar can end) ends the output, unwritten */
    if (ev->done && k->grammar && ev->finish == RW_DONE_STOP && n == 1 && rw_model_token_is_eog(k->m, ev->tokens[0]))
        n = 0;
    if (k->grammar) keep_pieces(k, ev->tokens, n);
    if (k->print_ids)
        for (int i = 0; i < n; i++, k->n_printed++) printf("%s%d", k->n_printed ? " " : "", (int)ev->tokens[i]);
    else fwrite(ev->text, 1, ev->text_len, stdout);
    fflush(stdout);
    if (!ev->done) return;
    k->done = true;
    k->finish = ev->finish;
    if (ev->error) snprintf(k->error, sizeof k->error, "%s", ev->error);
}

/* A whole file, NUL-terminated; NULL (after a message) if it cannot be read. */
static char *read_text(const char *path, size_t *len) {
    char *buf = rw_cli_read_file(path, len);
    if (!buf) rw_cli_error(CMD, "cannot read %s", path);
    return buf;
}

static int run_generate(int argc, char **argv, rw_cli_lora *lora) {
    const char *model_path = NULL, *ids_path = NULL, *text = NULL;
    long n_gen = -1, seed = 0;
    rw_request_params rp = rw_request_params_default(); /* greedy, everything off */
    bool print_ids = false;
    rw_kv_type kv = RW_KV_F32; /* see the file comment */
    long threads = 0;
    const char *draft_path = NULL, *grammar_path = NULL, *schema_path = NULL;
    unsigned spec = 0;
    long top_k = 0, draft_max = 4, ngram_n = 0, ngram_min_hits = 0;
    bool draft_fixed = false;
    const rw_cli_opt opts[] = {
        {"--ids", RW_OPT_STR, &ids_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-p", RW_OPT_STR, &text, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-n", RW_OPT_INT, &n_gen, 0, 1 << 24, 0, 0, NULL, NULL, NULL},
        {"--seed", RW_OPT_INT, &seed, 0, INT32_MAX, 0, 0, NULL, NULL, NULL},
        {"--temp", RW_OPT_FLOAT, &rp.temperature, 0, 0, 0.0, 1e6, NULL, NULL, NULL},
        {"--top-k", RW_OPT_INT, &top_k, 0, INT32_MAX, 0, 0, NULL, NULL, NULL},
        {"--top-p", RW_OPT_FLOAT, &rp.top_p, 0, 0, 0.0, 1.0, NULL, NULL, NULL},
        {"--min-p", RW_OPT_FLOAT, &rp.min_p, 0, 0, 0.0, 1.0, NULL, NULL, NULL},
        {"--presence-penalty", RW_OPT_FLOAT, &rp.presence_penalty, 0, 0, -1e6, 1e6, NULL, NULL, NULL},
        {"--frequency-penalty", RW_OPT_FLOAT, &rp.frequency_penalty, 0, 0, -1e6, 1e6, NULL, NULL, NULL},
        {"--repeat-penalty", RW_OPT_FLOAT, &rp.repeat_penalty, 0, 0, 0.0, 1e6, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KERNELS_TIER,
        RW_OPT_KV_TYPE(&kv),
        RW_OPT_NUMERICS_MODE,
        {"--draft", RW_OPT_STR, &draft_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--draft-max", RW_OPT_INT, &draft_max, 0, 15, 0, 0, NULL, NULL, NULL}, /* 0: no drafts */
        {"--draft-fixed", RW_OPT_FLAG, &draft_fixed, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--spec", RW_OPT_FN, NULL, 0, 0, 0, 0, NULL, spec_opt, &spec},
        {"--spec-ngram-n", RW_OPT_INT, &ngram_n, 1, 64, 0, 0, NULL, NULL, NULL},
        {"--spec-ngram-min-hits", RW_OPT_INT, &ngram_min_hits, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--print-ids", RW_OPT_FLAG, &print_ids, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--grammar", RW_OPT_STR, &grammar_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--json-schema", RW_OPT_STR, &schema_path, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_LORA(lora),
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &model_path, 1, NULL);
    if (prc) return prc == RW_CLI_BAD_LINE ? usage() : 2;
    rp.top_k = (int32_t)top_k;
    if (!model_path || n_gen < 0 || (!ids_path == !text)) return usage();
    if (grammar_path && schema_path) {
        rw_cli_error(CMD, "give --grammar or --json-schema, not both");
        return 2;
    }
    rw_error err = {0};
    char *gbnf = NULL; /* the constraint's GBNF; owned */
    if (grammar_path || schema_path) {
        const char *path = grammar_path ? grammar_path : schema_path;
        size_t len = 0;
        char *buf = read_text(path, &len);
        if (!buf) return 1;
        if (schema_path) {
            rw_status st = rw_schema_to_gbnf(buf, len, NULL, 0, &gbnf, &err);
            free(buf);
            if (st) {
                rw_cli_error(CMD, "%s: %s", path, err.msg);
                return 1;
            }
        } else gbnf = buf;
    }
    rw_model *m = NULL, *dm = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    rw_engine *e = NULL;
    sink k = {.print_ids = print_ids, .grammar = gbnf != NULL};
    int rc = 1;
    rw_model_params mp = rw_model_params_default();
    rw_cli_lora_params(lora, &mp);
    if (rw_model_open(model_path, &mp, &m, &err)) {
        rw_cli_error(CMD, "%s", err.msg); /* the message names the file */
        goto done;
    }
    k.m = m;
    if (text) {
        /* as llama.cpp: BOS/EOS as the vocabulary asks, special tokens parsed */
        size_t nt = 0;
        if (rw_model_tokenize(m, text, strlen(text), true, true, &ids, &nt, &err)) {
            rw_cli_error(CMD, "%s", err.msg);
            goto done;
        }
        n = (int64_t)nt;
    } else if (rw_cli_read_ids(CMD, ids_path, &ids, &n)) goto done;
    if (gbnf && rw_grammar_check(gbnf, strlen(gbnf), NULL, &err)) {
        rw_cli_error(CMD, "%s: %s", grammar_path ? grammar_path : schema_path, err.msg);
        goto done;
    }
    if (draft_max == 0) draft_path = NULL, spec = 0; /* drafts of at most 0 tokens: plain decoding */
    if (draft_path && rw_model_open(draft_path, NULL, &dm, &err)) {
        rw_cli_error(CMD, "%s", err.msg);
        goto done;
    }
    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_threads = (int)threads;
    ep.run.n_ctx = n + n_gen > 2 ? n + n_gen : 2;
    ep.run.kv_f32 = kv == RW_KV_F32;
    ep.manual = true; /* one request: its steps run here, and so do the callbacks */
    ep.max_running = 1;
    ep.max_queued = 1;
    ep.prefill_chunk = n > 0 ? n : 1; /* the whole prompt in one forward pass */
    ep.cache_bytes = 0;               /* no prefix cache: nothing to reuse */
    ep.spec = spec;
    ep.draft = dm;
    ep.draft_max = (int)draft_max;
    ep.draft_fixed = draft_fixed;
    ep.ngram_n = (int)ngram_n;
    ep.ngram_min_hits = (int)ngram_min_hits;
    if (rw_engine_open(m, &ep, &e, &err)) { /* a draft of another vocabulary, no MTP block, ... */
        rw_cli_error(CMD, "%s", err.msg);
        goto done;
    }
    if (n_gen > 0) {
        /* exactly N tokens: end-of-generation tokens do not stop it (but a grammar's end does) */
        rp.seed = (uint64_t)seed;
        rp.max_tokens = n_gen;
        rp.ignore_eos = gbnf == NULL;
        rp.grammar = gbnf;
        if (rw_engine_submit_tokens(e, ids, n, &rp, on_event, &k, NULL, &err)) {
            rw_cli_error(CMD, "%s", err.msg);
            goto done;
        }
        while (!k.done) {
            if (rw_engine_step(e, &err) < 0) {
                rw_cli_error(CMD, "%s", err.msg);
                goto done;
            }
        }
        if (k.finish == RW_DONE_ERROR) {
            rw_cli_error(CMD, "%s", k.error);
            goto done;
        }
    }
    printf("\n");
    if (k.nomem) {
        rw_cli_error(CMD, "out of memory");
        goto done;
    }
    if ((dm || spec) && n_gen > 0) {
        rw_engine_stats st;
        if (!rw_engine_stats_full(e, &st, sizeof st, NULL))
            fprintf(stderr,
                    "rewind generate: draft: %lld verify passes, %lld drafted, %lld accepted (%.1f%%), %.2f tokens "
                    "per pass; n-gram drafts %lld, accepted %lld\n",
                    (long long)st.spec_verify, (long long)st.spec_drafted, (long long)st.spec_accepted,
                    st.spec_drafted ? 100.0 * (double)st.spec_accepted / (double)st.spec_drafted : 0.0,
                    st.spec_verify ? (double)st.spec_emitted / (double)st.spec_verify : 0.0,
                    (long long)st.spec_ngram_drafted, (long long)st.spec_ngram_accepted);
    }
    if (gbnf && n_gen > 0 && k.finish == RW_DONE_LENGTH) {
        bool complete = false;
        rw_grammar_match(gbnf, strlen(gbnf), NULL, k.text ? k.text : "", k.text_len, NULL, &complete, NULL);
        fprintf(stderr, "rewind generate: -n %ld cut the output %s\n", n_gen,
                complete ? "(the grammar could have ended there)" : "before the grammar was complete");
    }
    rc = 0;
done:
    rw_engine_close(e);
    rw_model_close(dm);
    rw_model_close(m);
    free(k.text);
    free(gbnf);
    free(ids);
    return rc;
}

int rw_cmd_generate(int argc, char **argv) { return rw_cli_run_with_lora(run_generate, argc, argv); }
