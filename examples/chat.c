/* chat.c - load a model, chat through its template, stream the answer.
 *
 *   cc chat.c $(pkg-config --cflags --libs rewind) -o chat
 *   ./chat MODEL.gguf "Why is the sky blue?" [MAX_TOKENS]
 *
 * Written only against <rewind.h>: what an embedder's first program looks
 * like. */
#include <stdio.h>
#include <stdlib.h>

#include <rewind.h>

static void log_line(void *user, rw_log_level level, const char *msg) {
    (void)user;
    (void)level;
    fprintf(stderr, "rewind: %s\n", msg);
}

/* Streams each piece of the answer as it comes. */
static bool print_piece(void *user, const char *text, size_t len) {
    int *pieces = user;
    (*pieces)++;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true; /* false would stop the generation here */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [MAX_TOKENS]\n", argv[0]);
        return 2;
    }
    rw_log_set(log_line, NULL, RW_LOG_WARN);
    printf("rewind %s\n", rw_version());

    rw_error err;
    rw_model *m = NULL;
    rw_model_params mp = rw_model_params_default();
    if (rw_model_open(argv[1], &mp, &m, &err)) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], err.msg);
        return 1;
    }
    printf("model: %s, %d tokens in the vocabulary\n", rw_model_arch(m), (int)rw_model_n_vocab(m));

    const rw_chat_message msgs[] = {
        {"system", "You are a helpful assistant."},
        {"user", argv[2]},
    };
    char *prompt = NULL;
    if (rw_chat_render(m, msgs, 2, true, &prompt, &err)) {
        fprintf(stderr, "cannot render the chat: %s\n", err.msg);
        rw_model_close(m);
        return 1;
    }

    rw_gen_options opt = rw_gen_options_default(); /* greedy */
    opt.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
    rw_run_params run = rw_run_params_default();
    run.n_ctx = 2048;
    int pieces = 0;
    char *answer = NULL;
    rw_gen_result res;
    printf("assistant: ");
    rw_status st = rw_generate(m, prompt, &opt, &run, print_piece, &pieces, &answer, &res, &err);
    printf("\n");
    if (st) {
        fprintf(stderr, "generation failed: %s\n", err.msg);
    } else {
        printf("prompt tokens: %lld, generated: %lld, pieces streamed: %d, finish: %s\n",
               (long long)res.prompt_tokens, (long long)res.completion_tokens, pieces,
               res.reason == RW_DONE_LENGTH ? "length" : "stop");
    }
    rw_free(answer);
    rw_free(prompt);
    rw_model_close(m);
    return st ? 1 : 0;
}
