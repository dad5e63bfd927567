/* test_tokenizer_pretok.c - the pre-tokenizers: every tokenizer.ggml.pre name
 * llama.cpp maps to a regex list loads and splits text into pieces that
 * cover it exactly; names llama.cpp splits by other means, and unknown
 * names, are refused; chosen splits show the rules that differ between
 * pre-tokenizers (digit groups, case runs, White_Space as llama.cpp has it,
 * empty lookahead matches). Also: the BPE word cache changes nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tokenizer/tok_int.h"

/* A byte-level vocabulary: the 256 characters of GPT-2's byte alphabet, one
 * merge, tokenizer.ggml.pre = pre. */
static rw_status load_bytes_vocab(const char *pre, rw_tokenizer **t, rw_error *err) {
    static char alphabet[256][3];
    const char *tokens[256];
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)extra++;
        if (cp < 0x80) {
            alphabet[b][0] = (char)cp;
            alphabet[b][1] = 0;
        } else {
            alphabet[b][0] = (char)(0xc0 | (cp >> 6));
            alphabet[b][1] = (char)(0x80 | (cp & 0x3f));
            alphabet[b][2] = 0;
        }
        tokens[b] = alphabet[b];
    }
    static const char *const merges[] = {"a b"};
    rw_gguf_writer *w = rw_gguf_writer_new();
    rw_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    if (pre) rw_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, 256, NULL);
    rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 1, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rw_gguf_writer_write_stream(w, f, NULL);
    fclose(f);
    rw_gguf_writer_free(w);
    rw_gguf *g;
    *t = NULL;
    rw_status s = rw_gguf_open_memory(buf, len, &g, err);
    if (!s) {
        s = rw_tokenizer_load(g, t, err);
        rw_gguf_close(g);
    }
    free(buf);
    return s;
}

/* The pieces of text joined with '|' (text must hold no '|'). */
static char *split(const rw_tokenizer *t, const char *text) {
    size_t *starts, *lens, n, len = strlen(text);
    rw_error err;
    if (rw_tok__pre_split(t, text, len, &starts, &lens, &n, &err) != RW_OK) return NULL;
    char *out = malloc(2 * len + 1);
    size_t o = 0, expect = 0;
    bool contiguous = true;
    for (size_t i = 0; i < n; i++) {
        contiguous &= starts[i] == expect && lens[i] > 0;
        expect = starts[i] + lens[i];
        if (i) out[o++] = '|';
        memcpy(out + o, text + starts[i], lens[i]);
        o += lens[i];
    }
    out[o] = 0;
    CHECK_MSG(contiguous && expect == len, "pieces of \"%s\" do not cover it", text);
    free(starts);
    free(lens);
    return out;
}

static void check_split(const char *pre, const char *text, const char *want) {
    rw_tokenizer *t;
    rw_error err;
    if (load_bytes_vocab(pre, &t, &err) != RW_OK) {
        CHECK_MSG(false, "%s: %s", pre, err.msg);
        return;
    }
    char *got = split(t, text);
    CHECK_MSG(got && !strcmp(got, want), "%s: \"%s\" -> \"%s\", want \"%s\"", pre, text, got ? got : "(error)", want);
    free(got);
    rw_tokenizer_free(t);
}

/* Every name llama.cpp (2026) maps to a list of regexes over the byte
 * alphabet (gemma4 and sarvam-moe split raw UTF-8: test_tokenizer_gemma4). */
static const char *const names[] = {
    "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
    "jina-v5-nano", "dbrx", "smaug-bpe", "glm4", "chatglm-bpe", "jais-2", "minicpm5", "qwen2", "deepseek-r1-qwen",
    "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2", "qwen35", "ufakzeka", "laguna",
    "seed-coder", "bailingmoe", "bailingmoe2", "llada-moe", "exaone-moe", "deepseek-llm", "deepseek-v3",
    "hunyuan-dense", "joyai-llm", "hy_v4", "spark2_5", "youtu", "deepseek-coder", "falcon", "starcoder", "refact",
    "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2", "gpt-2", "phi-2", "jina-es", "jina-de",
    "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code",
    "roberta-bpe", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "poro-chat", "bloom",
    "gpt3-finnish", "viking", "tekken", "chameleon", "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2",
    "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe",
};

static const char sample[] = "Hello, World! It's 2026-11-22: 12345 apples\t\tand\n\n  ÉCOLE naïve 日本語テキスト 한국어 "
                             "e\xcc\x81 x\xc2\x85y z\xe1\xa0\x8ew \xe2\x80\x83 <sentinel:12> IMGIMGABZ 🧑\xe2\x80\x8d💻   ";

int main(void) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        rw_tokenizer *t;
        rw_error err;
        rw_status s = load_bytes_vocab(names[i], &t, &err);
        CHECK_MSG(s == RW_OK, "pre-tokenizer %s: %s", names[i], err.msg);
        if (s) continue;
        char *p = split(t, sample);
        CHECK_MSG(p != NULL, "%s: split failed", names[i]);
        /* every byte of the text still tokenizes to its byte token */
        int32_t *ids;
        size_t n;
        CHECK(rw_tokenize(t, sample, strlen(sample), false, false, &ids, &n, &err) == RW_OK && n == strlen(sample));
        free(ids);
        free(p);
        rw_tokenizer_free(t);
    }
    rw_error err;
    rw_tokenizer *t = NULL;
    CHECK(load_bytes_vocab("kimi-k2", &t, &err) == RW_ERR_UNSUPPORTED && strstr(err.msg, "kimi-k2") && !t);
    CHECK(load_bytes_vocab("afmoe", &t, &err) == RW_ERR_UNSUPPORTED && !t);
    CHECK(load_bytes_vocab("no-such-pre", &t, &err) == RW_ERR_UNSUPPORTED && strstr(err.msg, "no-such-pre") && !t);
    CHECK(load_bytes_vocab(NULL, &t, &err) == RW_OK && t); /* absent: llama.cpp's "default" */
    rw_tokenizer_free(t);

    check_split("gpt-2", "Hello world  x\t\ty's 123", "Hello| world| | x|\t|\t|y|'s| 123");
    check_split("llama-bpe", "x 1234567 HTML's\n\n  y", "x| |123|456|7| HTML|'s|\n\n| | y");
    check_split("qwen2", "x 1234 it's", "x| |1|2|3|4| it|'s");
    check_split("starcoder", "ab12 c", "ab|1|2| c");
    check_split("falcon", "a+b==c 12345", "a|+|b|==|c| |123|45");
    check_split("deepseek-coder", "ab\ncd 12", "ab|\n|cd| |1|2");
    check_split("tekken", "HelloWorld JSONParser", "Hello|World| JSONParser");
    check_split("gpt-4o", "HelloWorld it's 1234567", "Hello|World| it's| |123|456|7");
    check_split("superbpe", "x 1234567 12", "x |1|234|567| |12");
    check_split("tiny_aya", "1234567 ab", "1|234|567| ab");
    check_split("viking", "hello, world 42", "hello|,| world| |4|2");
    /* U+0085 is White_Space (llama.cpp's \s), U+180E is not (PCRE2's \s has it) */
    check_split("qwen2", "a\xc2\x85\xc2\x85" "b", "a|\xc2\x85|\xc2\x85" "b");
    check_split("qwen2", "a\xe1\xa0\x8e\xe1\xa0\x8e" "b", "a|\xe1\xa0\x8e\xe1\xa0\x8e|b");
    /* qwen35 keeps combining marks with their letters, qwen2 does not */
    check_split("qwen35", "nai\xcc\x88ve", "nai\xcc\x88ve");
    check_split("qwen2", "nai\xcc\x88ve", "nai|\xcc\x88ve");

    /* llama3-style vocabularies add BOS unless the file says otherwise */
    CHECK(load_bytes_vocab("llama-bpe", &t, &err) == RW_OK && rw_tokenizer_add_bos(t));
    rw_tokenizer_free(t);
    CHECK(load_bytes_vocab("qwen2", &t, &err) == RW_OK && !rw_tokenizer_add_bos(t));
    rw_tokenizer_free(t);

    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures (pre-tokenizer checks passed)");
    /* the word cache gives what merging every word gives: whole .inp files
     * (thousands of words, repeated ones) with and without it */
    static const char *const vocabs[] = {"qwen3", "gpt-2", "llama-spm", "deepseek-llm", "falcon", "starcoder"};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        char path[256];
        snprintf(path, sizeof path, "tokenizer/ggml-vocab-%s.gguf", vocabs[v]);
        rw_gguf *g;
        if (rw_gguf_open(rw_test_fixture_path(path), &g, &err) != RW_OK) {
            CHECK_MSG(false, "%s", err.msg);
            continue;
        }
        CHECK(rw_tokenizer_load(g, &t, &err) == RW_OK);
        rw_gguf_close(g);
        snprintf(path, sizeof path, "tokenizer/ggml-vocab-%s.gguf.inp", vocabs[v]);
        size_t len;
        char *text = rw_test_read_file(rw_test_fixture_path(path), &len);
        CHECK(text != NULL);
        if (t && text) {
            int32_t *a, *b;
            size_t na, nb;
            rw_tok__cache_min_words = 64;
            CHECK(rw_tokenize(t, text, len, false, false, &a, &na, &err) == RW_OK);
            rw_tok__cache_min_words = SIZE_MAX;
            CHECK(rw_tokenize(t, text, len, false, false, &b, &nb, &err) == RW_OK);
            rw_tok__cache_min_words = 64;
            CHECK_MSG(na == nb && !memcmp(a, b, na * sizeof *a), "%s: the word cache changes the tokens", vocabs[v]);
            free(a);
            free(b);
        }
        free(text);
        rw_tokenizer_free(t);
    }
    return rw_test_done();
}
