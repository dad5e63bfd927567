/* pretok.c - the pre-tokenizer: the regexes each tokenizer.ggml.pre value
 * selects (the same patterns llama.cpp uses), applied one after another;
 * every regex splits each piece into its matches and the gaps between them,
 * all of which stay pieces. Patterns run in PCRE2 with Unicode properties. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

/* The regexes as llama.cpp writes them (C string escapes: "\\p{L}" is the
 * pattern \p{L}). Before compiling, \s and \S are narrowed to Unicode's
 * White_Space property (see narrow_space), which is what llama.cpp's
 * splitters test; PCRE2's own \s also takes U+180E. */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2_WORDS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_WORDS                                                                                                    \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_WORDS                                                                                                     \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* upper-then-lower letter runs of the gpt-4o family, spelled with
 * lookaheads as llama.cpp does ("a letter that is not a-z") */
#define UPPER_LETTER "(?:(?=[\\p{L}])[^a-z])"
#define LOWER_LETTER "(?:(?=[\\p{L}])[^A-Z])"
#define DEEPSEEK3_WORDS                                                                                                 \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"

enum {
    PRE_IGNORE_MERGES = 1, /* a word that is a whole token skips merging */
    PRE_ADD_BOS = 2,       /* default of tokenizer.ggml.add_bos_token */
    PRE_RAW_UTF8 = 4,      /* BPE over the text's own UTF-8 (no byte alphabet; <0xXX> byte tokens) */
    PRE_ESCAPE_SPACES = 8, /* spaces become U+2581 before splitting, as SentencePiece writes them */
    PRE_NEWLINE_WORDS = 16 /* a word of newlines only is taken whole when it is a token (gemma4) */
};

typedef struct {
    const char *names; /* space-separated tokenizer.ggml.pre values */
    unsigned flags;
    const char *re[MAX_PRE_REGEX];
} pre_spec;

static const pre_spec specs[] = {
    {"default", 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_WORDS, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", PRE_IGNORE_MERGES | PRE_ADD_BOS,
     {LLAMA3_WORDS}},
    {"dbrx smaug-bpe glm4 chatglm-bpe", 0,
     {LLAMA3_WORDS}},
    {"jais-2", 0,
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                   "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|"
                   "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}},
    {"minicpm5", PRE_IGNORE_MERGES,
     {"\\p{N}{1,3}",
      CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open grok-2", 0,
     {QWEN2_WORDS}},
    {"qwen35", 0,
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                   "\\s+(?!\\S)|\\s+"}},
    {"ufakzeka", 0,
     {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"laguna", 0,
     {"[^\\n]+|[\\n]+", QWEN2_WORDS}},
    {"seed-coder", 0,
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe bailingmoe2 llada-moe", 0,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"exaone-moe", 0,
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
                   "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"deepseek-llm", 0,
     {"[\\r\\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4", 0,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      DEEPSEEK3_WORDS "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"spark2_5", 0,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK3_WORDS "| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+", "\\p{N}"}},
    {"youtu", PRE_IGNORE_MERGES,
     {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS
      "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS
      "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"deepseek-coder", 0,
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
    {"falcon", 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_WORDS, "[0-9][0-9][0-9]"}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2", 0,
     {"\\p{N}", GPT2_WORDS}},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert jina-v1-en jina-v2-code "
     "roberta-bpe mpt olmo jais trillion granite-docling exaone4", 0,
     {GPT2_WORDS}},
    {"poro-chat bloom gpt3-finnish", 0,
     {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    {"viking", 0,
     {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}},
    {"tekken", PRE_IGNORE_MERGES | PRE_ADD_BOS,
     {"[^\\r\\n\\p{L}\\p{N}]?" UPPER_LETTER "*" LOWER_LETTER "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER_LETTER "+" LOWER_LETTER
      "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"chameleon", PRE_ADD_BOS,
     {"<sentinel:[0-9]+>", "(?:IMGIMG)(?:(?:A|B|C|D|E|F|G|H|I){1,4})Z", "(?:[\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", GPT2_WORDS}},
    {"gpt-4o llama4 kanana2 talkie minimax-m2", 0,
     {"[^\\r\\n\\p{L}\\p{N}]?" UPPER_LETTER "*" LOWER_LETTER "+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER_LETTER
      "+" LOWER_LETTER "*" CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"granite-embed-multi-97m", PRE_IGNORE_MERGES,
     {"[^\\r\\n\\p{L}\\p{N}]?(?:(?=[\\p{L}\\p{M}])[^a-z])*(?:(?=[\\p{L}\\p{M}])[^A-Z])+" CONTRACTIONS
      "?|[^\\r\\n\\p{L}\\p{N}]?(?:(?=[\\p{L}\\p{M}])[^a-z])+(?:(?=[\\p{L}\\p{M}])[^A-Z])*" CONTRACTIONS
      "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"tiny_aya cohere2moe", 0,
     {"\\d{1,3}(?=(?:\\d{3})*\\b)",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS
      "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS
      "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"gemma4 granite-embed-multi-311m", PRE_ADD_BOS | PRE_RAW_UTF8 | PRE_ESCAPE_SPACES | PRE_NEWLINE_WORDS,
     {"[^\\n]+|[\\n]+"}},
    {"sarvam-moe", PRE_RAW_UTF8 | PRE_ESCAPE_SPACES,
     {"[^\\n]+|[\\n]+"}},
    {"superbpe", 0,
     {"\\p{N}+", "(?=(?:\\d{3})+(?!\\d))"}},
};

/* Names llama.cpp knows whose splitting is not a plain regex list here
 * (hand-written splitters, and jina's whitespace tokenizer). */
static const char unsupported[] = "kimi-k2 afmoe whitespace";

/* Regexes whose \d and \b llama.cpp evaluates in std::wregex, i.e. ASCII
 * only: those without \p{..} that use \d. */
static bool ascii_classes(const char *re) { return !strstr(re, "\\p{") && strstr(re, "\\d"); }

/* White_Space as llama.cpp's unicode tables have it. */
#define WHITE_SPACE "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Copies pattern re with \s and \S replaced by the White_Space class (in and
 * out of brackets). Returns a malloc'd string (caller frees) or NULL. */
static char *narrow_space(const char *re) {
    size_t n = strlen(re), o = 0;
    char *out = malloc(n / 2 * (sizeof WHITE_SPACE + 3) + n + 1); /* a 2-byte escape grows to at most sizeof + 3 */
    if (!out) return NULL;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = re[i];
        if (c == '\\' && i + 1 < n) {
            char e = re[i + 1];
            if (e == 's' || (e == 'S' && !in_class)) {
                o += (size_t)sprintf(out + o, in_class ? "%s" : e == 's' ? "[%s]" : "[^%s]", WHITE_SPACE);
            } else {
                out[o++] = c;
                out[o++] = e;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            out[o++] = c;
            if (i + 1 < n && re[i + 1] == '^') out[o++] = re[++i];
            if (i + 1 < n && re[i + 1] == ']') out[o++] = re[++i]; /* a leading ] is a literal */
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}

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
    if (!spec && has_name(unsupported, pre))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "pre-tokenizer '%s' is not supported", pre);
    if (!spec) return rw_errorf(err, RW_ERR_UNSUPPORTED, "unknown pre-tokenizer '%s' (tokenizer.ggml.pre)", pre);
    t->ignore_merges = spec->flags & PRE_IGNORE_MERGES;
    t->pre_add_bos = spec->flags & PRE_ADD_BOS;
    t->raw_utf8 = spec->flags & PRE_RAW_UTF8;
    t->escape_spaces = spec->flags & PRE_ESCAPE_SPACES;
    t->newline_words = spec->flags & PRE_NEWLINE_WORDS;
    for (int k = 0; k < MAX_PRE_REGEX && spec->re[k]; k++) {
        int ec;
        PCRE2_SIZE eo;
        char *re = narrow_space(spec->re[k]);
        if (!re) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        uint32_t opts = PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | (ascii_classes(spec->re[k]) ? 0 : PCRE2_UCP);
        t->re[k] = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
        free(re);
        if (!t->re[k]) {
            PCRE2_UCHAR msg[200];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return rw_errorf(err, RW_ERR_INTERNAL, "pre-tokenizer '%s' regex %d: %s at %zu", pre, k, (char *)msg,
                             (size_t)eo);
        }
        pcre2_jit_compile(t->re[k], PCRE2_JIT_COMPLETE); /* optional speed-up; the interpreter is the fallback */
        t->n_re = k + 1;
    }
    return RW_OK;
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

/* Matches regex k in text[a..b) from offset off; on a JIT failure (its
 * stack limit, on a pathological input) the interpreter tries again. */
static int match_at(const rw_tokenizer *t, int k, pcre2_match_data *md, const char *text, size_t a, size_t b,
                    size_t off) {
    int rc = pcre2_match(t->re[k], (PCRE2_SPTR)(text + a), b - a, off - a, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
        rc = pcre2_match(t->re[k], (PCRE2_SPTR)(text + a), b - a, off - a, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    return rc;
}

/* Applies regex k to every piece of in, writing the pieces of out: each
 * match and each stretch between matches is a piece. An empty match (only
 * superbpe's digit-group lookahead has them) just splits where it is. */
static rw_status split_with(const rw_tokenizer *t, int k, pcre2_match_data *md, const char *text, const pieces *in,
                            pieces *out, rw_error *err) {
    for (size_t i = 0; i < in->n; i++) {
        size_t a = in->start[i], b = a + in->len[i], off = a, pos = a;
        while (pos < b) {
            int rc = match_at(t, k, md, text, a, b, pos);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[200];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return rw_errorf(err, RW_ERR_INTERNAL, "pre-tokenizer regex %d failed: %s", k, (char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = a + ov[0], me = a + ov[1];
            if (push_piece(out, off, ms - off)) goto nomem;
            if (me == ms) { /* split here, then look again one character further */
                off = ms;
                pos = ms + 1;
                while (pos < b && ((unsigned char)text[pos] & 0xc0) == 0x80) pos++;
                continue;
            }
            if (push_piece(out, ms, me - ms)) goto nomem;
            off = pos = me;
        }
        if (push_piece(out, off, b - off)) goto nomem;
    }
    return RW_OK;
nomem:
    return rw_errorf(err, RW_ERR_NOMEM, "out of memory while pre-tokenizing");
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
    rw_status st = RW_OK;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!md) bad = 1;
    for (int k = 0; k < t->n_re && !bad && !st; k++) {
        next.n = 0;
        /* invalid bytes are never handed to PCRE2 */
        size_t iv = 0;
        for (size_t p = 0; p < cur.n && !bad && !st; p++) {
            bool is_invalid = false;
            while (iv < invalid.n && invalid.start[iv] < cur.start[p]) iv++;
            if (iv < invalid.n && invalid.start[iv] == cur.start[p] && cur.len[p] == 1) is_invalid = true;
            if (is_invalid) bad |= push_piece(&next, cur.start[p], 1);
            else {
                pieces one = {&cur.start[p], &cur.len[p], 1, 1};
                st = split_with(t, k, md, text, &one, &next, err);
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
    if (bad && !st) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory while pre-tokenizing");
    if (st) {
        free(cur.start);
        free(cur.len);
        return st;
    }
    *starts = cur.start;
    *lens = cur.len;
    *n = cur.n;
    return RW_OK;
}
