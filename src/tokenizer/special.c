/* special.c - what llama.cpp derives from token texts rather than from the
 * file: which tokens end a generation, which "control-looking" tokens are
 * control tokens whatever type the file gives them (they are then cut out of
 * text only with parse_special, and not printed by default), and the white
 * space some models' special tokens swallow. Converters do not write these,
 * so every engine that wants llama.cpp's behaviour has to guess the same way. */
#include <ctype.h>
#include <string.h>

#include "tokenizer/tok_int.h"

static int32_t find(const rw_tokenizer *t, const char *text) { return rw_tok__str_map_get(&t->vocab, text, strlen(text)); }

/* Each text that ends a generation; such a token is also made a control token. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
};

/* Fill-in-the-middle tokens by role, looked for by text when the file names
 * none (tokenizer.ggml.fim_*_token_id); those found become control tokens,
 * and the pad/repo/separator ones end a generation. */
typedef struct {
    rw_fim_role role;
    const char *key, *old_key; /* old_key: the name older converters wrote, or NULL */
    bool eog;
    const char *texts[9];
} fim_role;

static const fim_role fim_roles[] = {
    {RW_FIM_PRE,
     "tokenizer.ggml.fim_pre_token_id",
     "tokenizer.ggml.prefix_token_id",
     false,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>"}},
    {RW_FIM_SUF,
     "tokenizer.ggml.fim_suf_token_id",
     "tokenizer.ggml.suffix_token_id",
     false,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
      "<|suffix|>"}},
    {RW_FIM_MID,
     "tokenizer.ggml.fim_mid_token_id",
     "tokenizer.ggml.middle_token_id",
     false,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
      "<|middle|>"}},
    {RW_FIM_PAD,
     "tokenizer.ggml.fim_pad_token_id",
     NULL,
     true,
     {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {RW_FIM_REP,
     "tokenizer.ggml.fim_rep_token_id",
     NULL,
     true,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {RW_FIM_SEP, "tokenizer.ggml.fim_sep_token_id", NULL, true, {"<|file_sep|>"}},
};

/* The first candidate found takes the role, as llama.cpp (which walks its
 * hash map, so with several candidates its choice is arbitrary). */
static void find_fim(rw_tokenizer *t, const rw_gguf *g, const fim_role *r) {
    uint32_t v;
    int32_t id = -1;
    if ((rw_gguf_get_u32(g, r->key, &v, NULL) == RW_OK ||
         (r->old_key && rw_gguf_get_u32(g, r->old_key, &v, NULL) == RW_OK)) &&
        v < (uint32_t)t->n_vocab) {
        id = (int32_t)v;
    } else {
        for (int k = 0; k < 9 && r->texts[k] && id < 0; k++) {
            id = find(t, r->texts[k]);
            if (id >= 0) t->type[id] = TT_CONTROL;
        }
    }
    if (id >= 0 && r->eog) t->eog[id] = true;
    t->fim[r->role] = id;
}

void rw_tok__derive_special(rw_tokenizer *t, const rw_gguf *g) {
    static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                                            "<end_of_utterance>"};
    for (size_t k = 0; k < sizeof eot_texts / sizeof eot_texts[0] && t->eot < 0; k++) t->eot = find(t, eot_texts[k]);
    if (t->eom < 0) t->eom = find(t, "<|eom_id|>");
    for (size_t r = 0; r < sizeof fim_roles / sizeof fim_roles[0]; r++) find_fim(t, g, &fim_roles[r]);
    for (size_t k = 0; k < sizeof eog_texts / sizeof eog_texts[0]; k++) {
        int32_t id = find(t, eog_texts[k]);
        if (id < 0) continue;
        t->eog[id] = true;
        t->type[id] = TT_CONTROL;
    }
    /* gpt-oss's message framing tokens are always printed */
    static const char *const framing[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t k = 0; k < sizeof framing / sizeof framing[0]; k++) {
        int32_t id = find(t, framing[k]);
        if (id >= 0) t->type[id] = TT_USER_DEFINED;
    }
    int32_t ids[] = {t->eos, t->eot, t->eom};
    for (size_t k = 0; k < 3; k++)
        if (ids[k] >= 0) t->eog[ids[k]] = true;
    /* harmony and solar-open end a message with <|end|> but a generation
     * with <|return|>/<|call|>: there <|end|> is an ordinary printed token */
    int32_t end = find(t, "<|end|>");
    bool has = end >= 0 && t->eog[end];
#define EOG(s) (find(t, s) >= 0 && t->eog[find(t, s)])
    if (has && ((EOG("<|return|>") && EOG("<|call|>")) || ((EOG("<|call|>") || EOG("<|calls|>")) && EOG("<|flush|>")))) {
        t->eog[end] = false;
        t->type[end] = TT_USER_DEFINED;
    }
    /* gemma4 and paddleocr: </s> is text when <|tool_response> ends turns */
    int32_t s = find(t, "</s>");
    if (s >= 0 && t->eog[s] && EOG("<|tool_response>")) {
        t->eog[s] = false;
        t->type[s] = TT_NORMAL;
    }
#undef EOG
}

/* True if metadata string key contains needle, ignoring ASCII case. */
static bool key_contains(const rw_gguf *g, const char *key, const char *needle) {
    rw_gguf_str v;
    if (rw_gguf_get_str(g, key, &v, NULL) != RW_OK) return false;
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= (size_t)v.len; i++) {
        size_t j = 0;
        while (j < k && tolower((unsigned char)v.ptr[i + j]) == needle[j]) j++;
        if (j == k) return true;
    }
    return false;
}

static void strip_token(rw_tokenizer *t, const char *text, uint8_t flag, bool on) {
    int32_t id = find(t, text);
    if (id >= 0) t->strip[id] = on ? (uint8_t)(t->strip[id] | flag) : (uint8_t)(t->strip[id] & ~flag);
}

void rw_tok__strip_attrs(rw_tokenizer *t, const rw_gguf *g) {
    if (key_contains(g, "tokenizer.ggml.pre", "jina-v2-de") || key_contains(g, "tokenizer.ggml.pre", "jina-v2-es") ||
        key_contains(g, "tokenizer.ggml.pre", "jina-v2-code") ||
        key_contains(g, "general.architecture", "nomic-bert-moe") ||
        key_contains(g, "general.architecture", "jina-bert-v3")) {
        strip_token(t, "<mask>", STRIP_LEFT, true);
    } else if (key_contains(g, "general.name", "phi-3") || key_contains(g, "general.name", "phi3")) {
        for (int32_t i = 0; i < t->n_special; i++) t->strip[t->special[i]] |= STRIP_RIGHT;
        strip_token(t, "</s>", STRIP_RIGHT, true);
        strip_token(t, "<unk>", STRIP_RIGHT, false);
        strip_token(t, "<s>", STRIP_RIGHT, false);
        strip_token(t, "<|endoftext|>", STRIP_RIGHT, false);
    } else if (key_contains(g, "general.name", "modern-bert")) {
        strip_token(t, "[MASK]", STRIP_LEFT, true);
    }
}
