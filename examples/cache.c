/* cache.c - two conversations sharing a long system prompt through the
 * engine's prefix cache, then a sequence saved to a state file and loaded
 * back.
 *
 *   cc cache.c $(pkg-config --cflags --libs rewind) -o cache
 *   ./cache MODEL.gguf STATE_FILE
 *
 * The second conversation reuses the first one's system-prompt state
 * (cached tokens > 0) and still gets exactly the answer it gets alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rewind.h>

static char *render(rw_model *m, const char *system, const char *user) {
    const rw_chat_message msgs[] = {{"system", system}, {"user", user}};
    char *out = NULL;
    rw_error err;
    if (rw_chat_render(m, msgs, 2, true, &out, &err)) fprintf(stderr, "render: %s\n", err.msg);
    return out;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf STATE_FILE\n", argv[0]);
        return 2;
    }
    rw_error err;
    rw_model *m = NULL;
    if (rw_model_open(argv[1], NULL, &m, &err)) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], err.msg);
        return 1;
    }
    int rc = 1;
    char system[2048] = "You are a careful assistant. Answer briefly.";
    for (int i = 0; i < 12; i++) strcat(system, " Always check your facts and say when you do not know.");

    /* --- the prefix cache ------------------------------------------------ */
    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_ctx = 1024;
    rw_engine *e = NULL;
    if (rw_engine_open(m, &ep, &e, &err)) {
        fprintf(stderr, "engine: %s\n", err.msg);
        rw_model_close(m);
        return 1;
    }
    rw_gen_options opt = rw_gen_options_default();
    opt.max_tokens = 8;
    const char *questions[2] = {"What is a prefix cache?", "What is a state file?"};
    char *answers[2] = {NULL, NULL};
    rw_gen_result res[2];
    for (int i = 0; i < 2; i++) {
        char *prompt = render(m, system, questions[i]);
        if (!prompt || rw_engine_run(e, prompt, &opt, &answers[i], &res[i], &err)) {
            fprintf(stderr, "request %d: %s\n", i, prompt ? err.msg : "no prompt");
            rw_free(prompt);
            goto done;
        }
        printf("conversation %d: %lld prompt tokens, %lld cached\n", i + 1, (long long)res[i].prompt_tokens,
               (long long)res[i].cached_tokens);
        rw_free(prompt);
    }
    if (res[1].cached_tokens <= 0) {
        fprintf(stderr, "the second conversation reused nothing\n");
        goto done;
    }
    rw_engine_stats_public st;
    rw_engine_stats_get(e, &st);
    printf("engine: %llu cached of %llu prompt tokens, cache %zu bytes in %llu entries\n",
           (unsigned long long)st.cached_tokens, (unsigned long long)st.prompt_tokens, st.cache_bytes,
           (unsigned long long)st.cache_entries);
    rw_engine_close(e);
    e = NULL;

    /* the same question alone, with no cache: the same answer */
    char *alone = NULL;
    char *prompt2 = render(m, system, questions[1]);
    rw_gen_result res_alone;
    if (!prompt2 || rw_generate(m, prompt2, &opt, NULL, NULL, NULL, &alone, &res_alone, &err)) {
        fprintf(stderr, "alone: %s\n", prompt2 ? err.msg : "no prompt");
        rw_free(prompt2);
        goto done;
    }
    printf("cached answer %s the uncached one\n", strcmp(alone, answers[1]) ? "DIFFERS FROM" : "equals");
    int same = !strcmp(alone, answers[1]);
    rw_free(alone);

    /* --- a state file ------------------------------------------------------ */
    int32_t *ids = NULL;
    size_t n = 0;
    rw_seq *a = NULL, *b = NULL;
    float *la = NULL, *lb = NULL;
    const int32_t n_vocab = rw_model_n_vocab(m);
    int32_t next = 0;
    if (rw_model_tokenize(m, prompt2, strlen(prompt2), true, true, &ids, &n, &err) || n < 2 ||
        rw_seq_new(m, 1024, false, &a, &err) || rw_seq_new(m, 1024, false, &b, &err)) {
        fprintf(stderr, "sequence: %s\n", err.msg);
        goto seq_done;
    }
    la = malloc(sizeof *la * (size_t)n_vocab);
    lb = malloc(sizeof *lb * (size_t)n_vocab);
    if (!la || !lb || rw_seq_eval(a, ids, (int64_t)n - 1, NULL, &err) || rw_seq_save(a, argv[2], &err) ||
        rw_seq_load(b, argv[2], &err)) {
        fprintf(stderr, "state file: %s\n", err.msg);
        goto seq_done;
    }
    printf("saved %lld tokens to %s and loaded them into a new sequence (%lld tokens)\n",
           (long long)rw_seq_length(a), argv[2], (long long)rw_seq_length(b));
    next = ids[n - 1];
    if (rw_seq_eval(a, &next, 1, la, &err) || rw_seq_eval(b, &next, 1, lb, &err)) {
        fprintf(stderr, "eval: %s\n", err.msg);
        goto seq_done;
    }
    int bitwise = !memcmp(la, lb, sizeof *la * (size_t)n_vocab);
    printf("next-token logits after the loaded state are %s\n", bitwise ? "bitwise the same" : "DIFFERENT");
    rc = same && bitwise ? 0 : 1;
seq_done:
    free(la);
    free(lb);
    rw_seq_free(a);
    rw_seq_free(b);
    rw_free(ids);
    rw_free(prompt2);
done:
    rw_free(answers[0]);
    rw_free(answers[1]);
    rw_engine_close(e);
    rw_model_close(m);
    return rc;
}
