/* vocab.c - the vocabulary of synthesized models.
 *
 * The built-in one is byte-level BPE in the GPT-2 convention that GGUF's
 * "gpt2" tokenizer model expects: token i < 256 is a byte, spelled with the
 * printable character GPT-2's byte-to-unicode table assigns it, in that
 * table's order; merges are learned here, deterministically, from the short
 * text below, so `make demo` needs nothing outside the repository. */
#include <stdlib.h>
#include <string.h>

#include "synth/synth_int.h"

#define MAX_MERGES 384

static const char corpus[] =
    "rewind is an inference engine for language models, written in C. It loads model files in the GGUF "
    "format, runs them on the CPU with its own kernels, and serves an OpenAI compatible API over HTTP. "
    "The engine keeps the state of every sequence behind one interface, so that a prompt can be cut back "
    "to any earlier token, saved, restored and shared between requests. When a user sends the next turn "
    "of a conversation, the prefix that the server has already seen is taken from the cache, and only the "
    "new tokens are computed. This is the whole point: the time to the first token stays short, and the "
    "answer is the same as without the cache, bit for bit. Hybrid models mix attention layers with "
    "recurrent layers; the recurrent state cannot be trimmed, so the engine keeps checkpoints and the "
    "inputs of the recent tokens, and replays them when it has to go back. The same mechanism lets a "
    "small draft model propose several tokens that the large model checks in one pass. Hello world! "
    "What is the weather like today? The quick brown fox jumps over the lazy dog. Once upon a time there "
    "was a little model that wanted to talk. It read books, it wrote stories, and it answered questions "
    "about the world, the sea, the stars and the numbers 0 1 2 3 4 5 6 7 8 9 10 100 2026. ";

/* GPT-2's byte-to-unicode order: printable bytes keep their code point and
 * come first; the others get code points from 256 up, in byte order. */
static void byte_table(int order[256], unsigned cp_of[256]) {
    int n = 0, extra = 0;
    bool printable[256] = {0};
    for (int b = 0; b < 256; b++) printable[b] = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    for (int b = 0; b < 256; b++)
        if (printable[b]) { order[n++] = b; cp_of[b] = (unsigned)b; }
    for (int b = 0; b < 256; b++)
        if (!printable[b]) { order[n++] = b; cp_of[b] = 256u + (unsigned)extra++; }
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

typedef struct {
    int a, b, count;
} pair;

static int cmp_pair(const void *x, const void *y) {
    const pair *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

typedef struct {
    int *ids;   /* tokens of this word */
    int n;
    int count;  /* occurrences in the corpus */
} word;

/* Splits the corpus GPT-2 style: an optional space followed by letters, by
 * digits or by other symbols. Words are kept unique with a count. */
static int split_words(word *words, int cap, const int tok_of_byte[256]) {
    int n = 0;
    const char *s = corpus;
    while (*s) {
        const char *start = s;
        if (*s == ' ') s++;
        if (!*s) break;
        int cls = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ? 0 : (*s >= '0' && *s <= '9') ? 1 : 2;
        while (*s && *s != ' ') {
            int c = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ? 0 : (*s >= '0' && *s <= '9') ? 1 : 2;
            if (c != cls) break;
            s++;
        }
        int len = (int)(s - start);
        int w;
        for (w = 0; w < n; w++) {
            if (words[w].n != len) continue;
            int k = 0;
            while (k < len && words[w].ids[k] == tok_of_byte[(unsigned char)start[k]]) k++;
            if (k == len) break;
        }
        if (w < n) { words[w].count++; continue; }
        if (n == cap) break;
        words[n].ids = malloc((size_t)len * sizeof(int));
        if (!words[n].ids) break;
        for (int k = 0; k < len; k++) words[n].ids[k] = tok_of_byte[(unsigned char)start[k]];
        words[n].n = len;
        words[n].count = 1;
        n++;
    }
    return n;
}

rw_status rw_synth__add_builtin_vocab(rw_gguf_writer *w, const char *pre, uint32_t *n_vocab, rw_error *err) {
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    enum { N_SPECIAL = 3, MAX_TOKENS = 256 + MAX_MERGES + N_SPECIAL, MAX_WORDS = 1024, MAX_PAIRS = 8192 };
    int order[256], tok_of_byte[256];
    unsigned cp_of[256];
    byte_table(order, cp_of);
    for (int i = 0; i < 256; i++) tok_of_byte[order[i]] = i;

    /* Token spellings live in one buffer; tokens[i] points into it. */
    char *text = malloc(MAX_TOKENS * 64);
    char **tokens = calloc(MAX_TOKENS, sizeof *tokens);
    char **merges = calloc(MAX_MERGES, sizeof *merges);
    char *merge_text = malloc(MAX_MERGES * 130);
    word *words = calloc(MAX_WORDS, sizeof *words);
    int32_t *types = calloc(MAX_TOKENS, sizeof *types);
    pair *pairs = malloc(MAX_PAIRS * sizeof *pairs);
    rw_status s = RW_OK;
    if (!text || !tokens || !merges || !merge_text || !words || !types || !pairs) {
        s = rw_errorf(err, RW_ERR_NOMEM, "no memory for the vocabulary");
        goto done;
    }
    size_t used = 0;
    for (int i = 0; i < 256; i++) {
        tokens[i] = text + used;
        used += put_utf8(text + used, cp_of[order[i]]);
        text[used++] = 0;
        types[i] = 1;
    }
    int n_tok = 256, n_merges = 0;
    int n_words = split_words(words, MAX_WORDS, tok_of_byte);
    while (n_merges < MAX_MERGES) {
        /* Most frequent adjacent pair; ties go to the smallest (a, b). */
        int n_pairs = 0;
        for (int wi = 0; wi < n_words; wi++)
            for (int k = 0; k + 1 < words[wi].n && n_pairs < MAX_PAIRS; k++)
                pairs[n_pairs++] = (pair){words[wi].ids[k], words[wi].ids[k + 1], words[wi].count};
        qsort(pairs, (size_t)n_pairs, sizeof *pairs, cmp_pair);
        int best_a = -1, best_b = -1, best = 1;
        for (int i = 0; i < n_pairs;) {
            int j = i, c = 0;
            while (j < n_pairs && pairs[j].a == pairs[i].a && pairs[j].b == pairs[i].b) c += pairs[j++].count;
            if (c > best) { /* sorted by (a, b): the first maximum is the smallest pair */
                best = c;
                best_a = pairs[i].a;
                best_b = pairs[i].b;
            }
            i = j;
        }
        if (best_a < 0 || strlen(tokens[best_a]) + strlen(tokens[best_b]) >= 63) break;
        tokens[n_tok] = text + used;
        used += (size_t)sprintf(text + used, "%s%s", tokens[best_a], tokens[best_b]) + 1;
        types[n_tok] = 1;
        merges[n_merges] = merge_text + n_merges * 130;
        sprintf(merges[n_merges], "%s %s", tokens[best_a], tokens[best_b]);
        for (int wi = 0; wi < n_words; wi++) {
            int out = 0;
            for (int k = 0; k < words[wi].n; k++) {
                if (k + 1 < words[wi].n && words[wi].ids[k] == best_a && words[wi].ids[k + 1] == best_b) {
                    words[wi].ids[out++] = n_tok;
                    k++;
                } else {
                    words[wi].ids[out++] = words[wi].ids[k];
                }
            }
            words[wi].n = out;
        }
        n_tok++;
        n_merges++;
    }
    int first_special = n_tok;
    for (int i = 0; i < N_SPECIAL; i++) {
        tokens[n_tok] = (char *)specials[i];
        types[n_tok++] = 3; /* control */
    }
    static const char chatml[] =
        "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
        "{%- endif -%}";
    if (!s) s = rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", err);
    if (!s) s = rw_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, err);
    if (!s) s = rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)n_tok, err);
    if (!s) s = rw_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n_tok, err);
    if (!s) s = rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)n_merges, err);
    if (!s) s = rw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)first_special, err);
    if (!s) s = rw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)first_special + 2, err);
    if (!s) s = rw_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)first_special, err);
    if (!s) s = rw_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false, err);
    if (!s) s = rw_gguf_writer_add_str(w, "tokenizer.chat_template", chatml, err);
    *n_vocab = (uint32_t)n_tok;
done:
    for (int i = 0; words && i < MAX_WORDS; i++) free(words[i].ids);
    free(words);
    free(pairs);
    free(types);
    free(merge_text);
    free(merges);
    free(tokens);
    free(text);
    return s;
}

rw_status rw_synth__copy_vocab(rw_gguf_writer *w, const char *path, uint32_t *n_vocab, rw_error *err) {
    rw_gguf *g;
    rw_status s = rw_gguf_open(path, &g, err);
    if (s) return s;
    const rw_gguf_value *tokens = rw_gguf_get(g, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != RW_GGUF_ARRAY || tokens->arr.type != RW_GGUF_STRING || tokens->arr.n == 0 ||
        tokens->arr.n > UINT32_MAX) {
        rw_gguf_close(g);
        return rw_errorf(err, RW_ERR_FORMAT, "%s has no tokenizer.ggml.tokens string array", path);
    }
    *n_vocab = (uint32_t)tokens->arr.n;
    for (size_t i = 0; i < rw_gguf_n_kv(g) && !s; i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        if (!strncmp(kv->key, "tokenizer.", 10)) s = rw_gguf_writer_add_kv(w, kv->key, &kv->value, err);
    }
    rw_gguf_close(g);
    return s;
}
