/* pretok.c - the pre-tokenizer: the regexes each tokenizer.ggml.pre value
 * selects (the same patterns llama.cpp uses), applied one after another;
 * every regex splits each piece into its matches and the gaps between them,
 * all of which stay pieces. Patterns run in PCRE2 with Unicode properties. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

#define GPT2_WORDS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define QWEN2_WORDS                                                                                         \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct {
    const char *names; /* space-separated tokenizer.ggml.pre values */
    const char *re[MAX_PRE_REGEX];
    bool ignore_merges;
} pre_spec;

static const pre_spec specs[] = {
    {"llama3 llama-v3 llama-bpe falcon3 pixtral dbrx smaug-bpe chatglm-bpe",
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true},
    {"qwen2 qwen3 stablelm2 hunyuan deepseek-r1-qwen", {QWEN2_WORDS}, false},
    {"qwen35",
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
      "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false},
    {"deepseek-llm",
     {"[\\r\\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"},
     false},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_WORDS, "[0-9][0-9][0-9]"}, false},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b", {"\\p{N}", GPT2_WORDS}, false},
    {"gpt-2 gpt2 mpt olmo jais trillion granite-docling phi-2 stablelm", {GPT2_WORDS}, false},
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_WORDS, "\\p{N}+", "[0-9][0-9][0-9]"}, false},
};

static bool has_name(const char *names, const char *pre) {
    size_t n = strlen(pre);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !memcmp(p, pre, n)) return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

rw_status rw_tok__set_pre(rw_tokenizer *t, const char *pre, rw_error *err) {
    const pre_spec *spec = NULL;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0] && !spec; i++)
        if (has_name(specs[i].names, pre)) spec = &specs[i];
    if (!spec) spec = &specs[sizeof specs / sizeof specs[0] - 1]; /* llama.cpp falls back to the default too */
    t->ignore_merges = spec->ignore_merges;
    for (int k = 0; k < MAX_PRE_REGEX && spec->re[k]; k++) {
        int ec;
        PCRE2_SIZE eo;
        t->re[k] = pcre2_compile((PCRE2_SPTR)spec->re[k], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
        if (!t->re[k]) {
            PCRE2_UCHAR msg[200];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return rw_errorf(err, RW_ERR_INTERNAL, "pre-tokenizer '%s' regex %d: %s at %zu", pre, k, (char *)msg, (size_t)eo);
        }
        pcre2_jit_compile(t->re[k], PCRE2_JIT_COMPLETE); /* optional speed-up; the interpreter is the fallback */
        t->n_re = k + 1;
    }
    t->md = pcre2_match_data_create(4, NULL);
    return t->md ? RW_OK : rw_errorf(err, RW_ERR_NOMEM, "out of memory");
}

typedef struct {
    size_t *start, *len;
    size_t n, cap;
} pieces;

static int push_piece(pieces *p, size_t s, size_t l) {
    if (l == 0) return 0;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        size_t *a = realloc(p->start, cap * sizeof *a);
        if (!a) return -1;
        p->start = a;
        size_t *b = realloc(p->len, cap * sizeof *b);
        if (!b) return -1;
        p->len = b;
        p->cap = cap;
    }
    p->start[p->n] = s;
    p->len[p->n] = l;
    p->n++;
    return 0;
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_valid(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n) return 0;
    unsigned cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

/* Applies regex k to every piece of in, writing the pieces of out. */
static int split_with(const rw_tokenizer *t, int k, pcre2_match_data *md, const char *text, const pieces *in, pieces *out) {
    for (size_t i = 0; i < in->n; i++) {
        size_t a = in->start[i], b = a + in->len[i], off = a;
        while (off < b) {
            int rc = pcre2_match(t->re[k], (PCRE2_SPTR)(text + a), b - a, off - a, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = a + ov[0], me = a + ov[1];
            if (me == ms) break; /* none of the patterns matches empty; stay safe anyway */
            if (push_piece(out, off, ms - off)) return -1; /* none of the patterns can match empty; be safe anyway */
            if (push_piece(out, ms, me - ms)) return -1;
            off = me;
        }
        if (push_piece(out, off, b - off)) return -1;
    }
    return 0;
}

rw_status rw_tok__pre_split(const rw_tokenizer *t, const char *text, size_t len, size_t **starts, size_t **lens,
                            size_t *n, rw_error *err) {
    pieces cur = {0}, next = {0};
    /* valid UTF-8 runs go through the regexes; each invalid byte is a piece
     * of its own (its byte token) */
    size_t i = 0;
    int bad = 0;
    pieces invalid = {0};
    while (i < len && !bad) {
        size_t run = i;
        while (i < len) {
            size_t l = utf8_valid((const unsigned char *)text + i, len - i);
            if (!l) break;
            i += l;
        }
        if (i > run) bad |= push_piece(&cur, run, i - run);
        if (i < len) {
            bad |= push_piece(&cur, i, 1);
            bad |= push_piece(&invalid, i, 1);
            i++;
        }
    }
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    for (int k = 0; k < t->n_re && !bad && md; k++) {
        next.n = 0;
        /* invalid bytes are never handed to PCRE2 */
        size_t iv = 0;
        for (size_t p = 0; p < cur.n && !bad; p++) {
            bool is_invalid = false;
            while (iv < invalid.n && invalid.start[iv] < cur.start[p]) iv++;
            if (iv < invalid.n && invalid.start[iv] == cur.start[p] && cur.len[p] == 1) is_invalid = true;
            if (is_invalid) bad |= push_piece(&next, cur.start[p], 1);
            else {
                pieces one = {&cur.start[p], &cur.len[p], 1, 1};
                bad |= split_with(t, k, md, text, &one, &next);
            }
        }
        pieces tmp = cur;
        cur = next;
        next = tmp;
    }
    pcre2_match_data_free(md);
    free(next.start);
    free(next.len);
    free(invalid.start);
    free(invalid.len);
    if (bad) {
        free(cur.start);
        free(cur.len);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory while pre-tokenizing");
    }
    *starts = cur.start;
    *lens = cur.len;
    *n = cur.n;
    return RW_OK;
}
