/* cmd_generate.c - `rewind generate MODEL (--ids IDS | -p TEXT) -n N
 * [--temp T] [--top-k K] [--top-p P] [--min-p P] [--presence-penalty X]
 * [--frequency-penalty X] [--repeat-penalty X] [--seed S] [--kv f32|f16] [--numerics M]
 * [--threads N] [--print-ids] [--draft DRAFT.gguf [--draft-max K] [--draft-fixed]]
 * [--grammar FILE.gbnf | --json-schema FILE.json]`.
 *
 * --grammar / --json-schema: the output must match the GBNF grammar or the
 * JSON schema (grammar/grammar.h, docs/structured-outputs.md; with
 * engine/constraint.h's rules, as the server): the mask comes before the
 * sampler chain, generation stops where the grammar is complete and nothing
 * may follow, or at an end-of-generation token where it can end; -n still
 * cuts it (a note on stderr says the output is incomplete).
 *
 * A text prompt is tokenized as llama.cpp does (BOS/EOS as the vocabulary
 * asks, special tokens parsed); the output is text through the streaming
 * detokenizer unless --print-ids. Prefills the prompt in one forward pass,
 * then generates N tokens one at a time with the sampler chain of
 * sampler/sampler.h: greedy at temperature 0 (the default; ties go to the
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
 * --draft: speculative decoding (engine/spec.h) with DRAFT proposing up to K
 * tokens a step (--draft-max, default 4) and the model verifying them in one
 * pass; the draft needs the same vocabulary (checked at start). The output
 * is the same as without a draft: bitwise for greedy, identically
 * distributed for sampling. How many tokens are drafted adapts to the
 * measured acceptance (spec.h's rule, with the draft's cost taken as the
 * ratio of the two files' sizes); --draft-fixed always drafts K (within the
 * budget). Statistics go to stderr.
 *
 * --spec mtp drafts with the model's own MTP block (Qwen3.5 files that carry
 * it), --spec ngram with prompt lookup over the prompt and the output
 * (--spec-ngram-n, --spec-ngram-min-hits), --spec mtp,ngram or ngram with
 * --draft combine them (engine/spec.h; docs/speculative-decoding.md); same
 * output guarantees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "cli/cli.h"
#include "engine/constraint.h"
#include "sampler/sampler.h"
#include "engine/spec.h"
#include "tokenizer/tokenizer.h"

static const char *CMD = "generate";

static int usage(void) {
    fprintf(stderr, "usage: rewind generate MODEL (--ids IDS | -p TEXT) -n N [--temp T] [--top-k K] [--top-p P] "
                    "[--min-p P] [--presence-penalty X] [--frequency-penalty X] [--repeat-penalty X] [--seed S] "
                    "[--kv f32|f16] [--numerics auto|fast|ggml] [--threads N] [--print-ids] "
                    "[--draft DRAFT.gguf] [--spec mtp|ngram|mtp,ngram] [--spec-ngram-n N] [--spec-ngram-min-hits N] "
                    "[--draft-max K] [--draft-fixed] [--grammar FILE.gbnf | --json-schema FILE.json]\n");
    return 2;
}

int rw_cmd_generate(int argc, char **argv) {
    const char *model_path = NULL, *ids_path = NULL, *text = NULL;
    long n_gen = -1, seed = 0;
    rw_sampler_params sp = rw_sampler_params_default(); /* greedy, everything off */
    bool print_ids = false;
    rw_kv_type kv = RW_KV_F32; /* see the file comment */
    long threads = 0;
    const char *draft_path = NULL, *grammar_path = NULL, *schema_path = NULL;
    rw_spec_params spp = rw_spec_params_default();
    long top_k = sp.top_k, draft_max = spp.k_max;
    bool draft_fixed = false;
    const rw_cli_opt opts[] = {
        {"--ids", RW_OPT_STR, &ids_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-p", RW_OPT_STR, &text, 0, 0, 0, 0, NULL, NULL, NULL},
        {"-n", RW_OPT_INT, &n_gen, 0, 1 << 24, 0, 0, NULL, NULL, NULL},
        {"--seed", RW_OPT_INT, &seed, 0, INT32_MAX, 0, 0, NULL, NULL, NULL},
        {"--temp", RW_OPT_FLOAT, &sp.temperature, 0, 0, 0.0, 1e6, NULL, NULL, NULL},
        {"--top-k", RW_OPT_INT, &top_k, 0, INT32_MAX, 0, 0, NULL, NULL, NULL},
        {"--top-p", RW_OPT_FLOAT, &sp.top_p, 0, 0, 0.0, 1.0, NULL, NULL, NULL},
        {"--min-p", RW_OPT_FLOAT, &sp.min_p, 0, 0, 0.0, 1.0, NULL, NULL, NULL},
        {"--presence-penalty", RW_OPT_FLOAT, &sp.presence_penalty, 0, 0, -1e6, 1e6, NULL, NULL, NULL},
        {"--frequency-penalty", RW_OPT_FLOAT, &sp.frequency_penalty, 0, 0, -1e6, 1e6, NULL, NULL, NULL},
        {"--repeat-penalty", RW_OPT_FLOAT, &sp.repeat_penalty, 0, 0, 0.0, 1e6, NULL, NULL, NULL},
        RW_OPT_THREADS(&threads),
        RW_OPT_KV_TYPE(&kv),
        RW_OPT_NUMERICS_MODE,
        RW_OPT_DRAFT(&draft_path, &draft_max, 0, &draft_fixed),
        RW_OPT_SPEC(&spp),
        {"--print-ids", RW_OPT_FLAG, &print_ids, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--grammar", RW_OPT_STR, &grammar_path, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--json-schema", RW_OPT_STR, &schema_path, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, &model_path, 1, NULL);
    if (prc) return prc == RW_CLI_BAD_LINE ? usage() : 2;
    sp.top_k = (int32_t)top_k;
    spp.k_max = (int32_t)draft_max;
    if (draft_fixed) spp.adaptive = false;
    if (!model_path || n_gen < 0 || (!ids_path == !text)) return usage();
    if (grammar_path && schema_path) {
        rw_cli_error(CMD, "give --grammar or --json-schema, not both");
        return 2;
    }
    char *gbnf = NULL; /* the constraint's GBNF; owned */
    if (grammar_path || schema_path) {
        const char *path = grammar_path ? grammar_path : schema_path;
        FILE *f = fopen(path, "rb");
        char *buf = NULL;
        size_t len = 0;
        if (f) {
            fseek(f, 0, SEEK_END);
            long sz = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
            if (buf) len = fread(buf, 1, (size_t)sz, f);
            if (buf) buf[len] = 0;
            fclose(f);
        }
        if (!buf) {
            rw_cli_error(CMD, "cannot read %s", path);
            return 1;
        }
        rw_error gerr = {0};
        if (schema_path) {
            if (rw_grammar_schema_to_gbnf(buf, len, NULL, &gbnf, &gerr)) {
                rw_cli_error(CMD, "%s: %s", path, gerr.msg);
                free(buf);
                return 1;
            }
            free(buf);
        } else gbnf = buf;
    }
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    rw_tokenizer *vocab = NULL;
    if (rw_cli_open_model(CMD, model_path, &g, &m)) return 1;
    if (text || !print_ids || draft_path || gbnf) {
        rw_error terr = {0};
        if (rw_tokenizer_load(g, &vocab, &terr) != RW_OK) {
            rw_cli_error(CMD, "%s", terr.msg);
            rw_model_free(m);
            rw_gguf_close(g);
            free(gbnf);
            return 1;
        }
    }
    if (text) {
        /* as llama.cpp: BOS/EOS as the vocabulary asks, special tokens parsed */
        size_t nt;
        rw_error terr = {0};
        if (rw_tokenize(vocab, text, strlen(text), true, true, &ids, &nt, &terr) != RW_OK) {
            rw_cli_error(CMD, "%s", terr.msg);
            rw_tokenizer_free(vocab);
            rw_model_free(m);
            rw_gguf_close(g);
            return 1;
        }
        n = (int64_t)nt;
    } else if (rw_cli_read_ids(CMD, ids_path, &ids, &n)) {
        rw_tokenizer_free(vocab);
        rw_model_free(m);
        rw_gguf_close(g);
        return 1;
    }
    const int64_t n_vocab = rw_model_get_hparams(m)->n_vocab;
    int rc = 1;
    rw_error err = {0};
    rw_gguf *dg = NULL;
    rw_model *dm = NULL;
    rw_tokenizer *dvocab = NULL;
    rw_spec_seq *spec = NULL;
    rw_model_seq *s = NULL;
    rw_threadpool *pool = NULL;
    rw_sampler *sampler = NULL;
    rw_grammar_vocab *gv = NULL;
    rw_constraint *cons = NULL;
    bool ended = false; /* the grammar ended the output */
    float *logits = malloc((size_t)n_vocab * sizeof(float));
    float *mrow = gbnf ? malloc((size_t)n_vocab * sizeof(float)) : NULL;
    if (gbnf && (!mrow || rw_grammar_vocab_from_tokenizer(vocab, &gv, &err) ||
                 rw_constraint_new(gbnf, gv, vocab, &cons, &err))) {
        rw_cli_error(CMD, "%s: %s", grammar_path ? grammar_path : schema_path, mrow ? err.msg : "out of memory");
        goto done;
    }
    if (!logits) {
        rw_cli_error(CMD, "out of memory");
        goto done;
    }
    if (draft_path) {
        if (rw_cli_open_model(CMD, draft_path, &dg, &dm)) goto done;
        if (rw_tokenizer_load(dg, &dvocab, &err) || rw_spec_check_vocab(vocab, dvocab, &err)) {
            rw_error_prefix(&err, "%s", draft_path);
            goto fail;
        }
        spp.draft_cost = rw_cli_draft_cost(dg, g);
    }
    if ((spp.sources & RW_SPEC_MTP) && rw_model_enable_mtp(m, &err)) {
        rw_error_prefix(&err, "%s", model_path);
        goto fail;
    }
    rw_spec_params_set_costs(&spp, m, dm != NULL);
    int64_t need = n + n_gen, max_ctx = need > rw_model_get_hparams(m)->n_ctx_train ? need : 0;
    if (rw_threadpool_new((int)threads, &pool, &err) || rw_model_seq_new(m, kv, max_ctx, &s, &err)) goto fail;
    rw_detok_stream stream = {0};
    sp.seed = (uint64_t)seed;
    if (rw_sampler_new(&sp, n_vocab, &sampler, &err)) goto fail;
    rw_forward_args fa = {.tokens = ids, .n = n, .pool = pool, .logits = logits};
    if (rw_model_forward(m, s, &fa, &err)) goto fail;
    if ((dm || spp.sources) && n_gen > 0) {
        if (rw_spec_seq_new(dm, s, sampler, &sp, &spp, &spec, &err)) goto fail;
        if (cons && rw_spec_seq_set_constraint(spec, rw_constraint_mask_fn, cons, &err)) goto fail;
        for (long k = 0; k < n_gen && !ended;) {
            const int32_t *toks = NULL;
            int32_t n_out = 1;
            int32_t first;
            if (k == 0) {
                const float *row = logits;
                if (cons) {
                    memcpy(mrow, logits, (size_t)n_vocab * sizeof *mrow);
                    if (!rw_constraint_mask(cons, NULL, 0, mrow, &err)) goto grammar_dead;
                    row = mrow;
                }
                first = rw_sampler_sample(sampler, row);
                if (rw_sampler_accept(sampler, first, &err) || rw_spec_seq_start(spec, first, &err)) goto fail;
                toks = &first;
            } else {
                const int64_t budget = n_gen - k;
                const float *rows;
                if (rw_spec_step(m, dm, &spec, &budget, 1, pool, &err)) goto fail;
                n_out = rw_spec_seq_output(spec, &toks, &rows);
            }
            for (int32_t i = 0; i < n_out && !ended; i++, k++) {
                if (cons && rw_tokenizer_is_eog(vocab, toks[i])) { /* allowed only where the grammar can end */
                    ended = true;
                    break;
                }
                if (cons && rw_constraint_accept(cons, toks[i], &err)) goto fail;
                if (cons && rw_constraint_must_end(cons)) ended = true;
                if (print_ids) printf("%s%d", k ? " " : "", (int)toks[i]);
                else {
                    char piece[512];
                    size_t len = rw_detok_stream_feed(vocab, &stream, toks[i], false, piece, sizeof piece);
                    if (len <= sizeof piece) fwrite(piece, 1, len, stdout);
                }
            }
            fflush(stdout);
        }
        rw_spec_stats st = rw_spec_seq_stats(spec);
        fprintf(stderr,
                "rewind generate: draft: %lld verify passes, %lld drafted, %lld accepted (%.1f%%), %.2f tokens per "
                "pass; n-gram drafts %lld, accepted %lld\n",
                (long long)st.steps, (long long)st.drafted, (long long)st.accepted,
                st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0,
                st.steps ? (double)st.emitted / (double)st.steps : 0.0, (long long)st.ngram_drafted,
                (long long)st.ngram_accepted);
    } else {
        for (long k = 0; k < n_gen; k++) {
            const float *row = logits;
            if (cons) {
                memcpy(mrow, logits, (size_t)n_vocab * sizeof *mrow);
                if (!rw_constraint_mask(cons, NULL, 0, mrow, &err)) goto grammar_dead;
                row = mrow;
            }
            int32_t tok = rw_sampler_sample(sampler, row);
            if (rw_sampler_accept(sampler, tok, &err)) goto fail;
            if (cons && rw_tokenizer_is_eog(vocab, tok)) {
                ended = true;
                break;
            }
            if (cons && rw_constraint_accept(cons, tok, &err)) goto fail;
            if (print_ids) printf("%s%d", k ? " " : "", (int)tok);
            else {
                char piece[512];
                size_t len = rw_detok_stream_feed(vocab, &stream, tok, false, piece, sizeof piece);
                if (len <= sizeof piece) fwrite(piece, 1, len, stdout);
            }
            fflush(stdout);
            if (cons && rw_constraint_must_end(cons)) {
                ended = true;
                break;
            }
            if (k + 1 == n_gen) break;
            fa = (rw_forward_args){.tokens = &tok, .n = 1, .pool = pool, .logits = logits};
            if (rw_model_forward(m, s, &fa, &err)) goto fail;
        }
    }
    if (!print_ids) {
        char tail[32];
        size_t len = rw_detok_stream_flush(&stream, tail, sizeof tail);
        if (len <= sizeof tail) fwrite(tail, 1, len, stdout);
    }
    printf("\n");
    if (cons && !ended)
        fprintf(stderr, "rewind generate: -n %ld cut the output %s\n", n_gen,
                rw_constraint_can_end(cons) ? "(the grammar could have ended there)" : "before the grammar was complete");
    rc = 0;
    goto done;
grammar_dead:
    if (!err.code) rw_errorf(&err, RW_ERR_INVALID_ARG, "grammar: no token of the vocabulary can continue the output");
fail:
    rw_cli_error(CMD, "%s", err.msg);
done:
    rw_spec_seq_free(spec);
    rw_constraint_free(cons);
    rw_grammar_vocab_free(gv);
    free(mrow);
    free(gbnf);
    rw_tokenizer_free(dvocab);
    rw_model_free(dm);
    rw_gguf_close(dg);
    rw_sampler_free(sampler);
    rw_model_seq_free(s);
    rw_threadpool_free(pool);
    free(logits);
    rw_tokenizer_free(vocab);
    rw_model_free(m);
    rw_gguf_close(g);
    free(ids);
    return rc;
}
