/* tok_int.h - private to src/tokenizer. */
#ifndef RW_TOKENIZER_TOK_INT_H
#define RW_TOKENIZER_TOK_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

enum { TOK_BPE, TOK_SPM, TOK_WPM };

enum { STRIP_LEFT = 1, STRIP_RIGHT = 2 };

/* llama.cpp's token types */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* String -> int32 map, open addressing; keys are borrowed (ptr, len). */
typedef struct {
    const char **keys;
    uint32_t *lens;
    int32_t *vals;
    size_t cap; /* power of two */
} str_map;

int rw_tok__str_map_init(str_map *m, size_t n);
void rw_tok__str_map_free(str_map *m);
/* First insert wins: returns the value already there, or -1 if k is new. */
int32_t rw_tok__str_map_put(str_map *m, const char *k, uint32_t len, int32_t v);
int32_t rw_tok__str_map_get(const str_map *m, const char *k, size_t len);     /* -1 if absent */

/* (left token, right token) -> merge rank and the merged token (-1 when
 * the concatenation is not a token), open addressing on a 64-bit key. */
typedef struct {
    uint64_t key;  /* left << 32 | right */
    int32_t rank;  /* -1: empty slot */
    int32_t merged;
} pair_slot;

typedef struct {
    pair_slot *v; /* owned */
    size_t cap;   /* power of two */
} pair_map;

int rw_tok__pair_map_init(pair_map *m, size_t n);
void rw_tok__pair_map_free(pair_map *m);
void rw_tok__pair_map_put(pair_map *m, int32_t left, int32_t right, int32_t rank, int32_t merged); /* first insert wins */
const pair_slot *rw_tok__pair_map_get(const pair_map *m, int32_t left, int32_t right);          /* NULL if absent */

#define MAX_PRE_REGEX 6

struct rw_tokenizer {
    int kind;
    int32_t n_vocab;
    char **text;       /* token texts, NUL-terminated copies in `pool` */
    uint32_t *len;
    int32_t *type;
    float *score;      /* SPM scores (NULL otherwise) */
    char *pool;        /* owns every token and merge text */
    str_map vocab;     /* text -> id */
    pair_map merges;   /* BPE merges whose two sides are tokens, by token ids */
    str_map odd_merges; /* "left right" -> rank for the other merges (sides that are not tokens) */
    char *odd_pool;    /* owns the odd_merges keys */
    pcre2_code *re[MAX_PRE_REGEX];
    int n_re;
    bool ignore_merges;
    bool pre_add_bos; /* the pre-tokenizer's default for add_bos_token */
    bool raw_utf8;      /* BPE on the text's UTF-8 itself, <0xXX> byte tokens (gemma4) */
    bool escape_spaces; /* spaces become U+2581 before BPE (gemma4) */
    bool newline_words; /* a word of newlines only is taken whole if it is a token (gemma4) */
    int32_t bos, eos, unk, eot, eom;
    int32_t fim[RW_FIM_COUNT]; /* fill-in-the-middle tokens by role (rw_fim_role), -1 if none */
    bool add_bos, add_eos, add_space_prefix;
    char *piece_pool;  /* owns every token's decoded bytes (rw_tok__decode_token) */
    uint32_t *piece_off; /* n_vocab + 1 offsets into piece_pool */
    int32_t *special;  /* control / user-defined / unknown ids, longest text first */
    uint8_t *strip;    /* per token: STRIP_LEFT / STRIP_RIGHT of the text around it when cut out */
    int32_t n_special;
    int32_t byte_token[256]; /* BPE: the token of each byte's alphabet char; SPM and raw UTF-8 BPE: <0xXX> */
    char byte_char[256][3];  /* BPE: UTF-8 of the alphabet char of each byte */
    uint8_t byte_char_len[256];
    int16_t char_byte[512];  /* BPE: alphabet code point -> byte (-1 if none) */
    bool eog[1];             /* flexible: n_vocab entries, allocated with the struct */
};

/* pretok.c: sets the regexes for tokenizer.ggml.pre. */
rw_status rw_tok__set_pre(rw_tokenizer *t, const char *pre, rw_error *err);
/* Splits text into words (byte ranges) with the regexes in order; words are
 * appended to the starts and lens arrays (malloc'd, grown as needed). */
rw_status rw_tok__pre_split(const rw_tokenizer *t, const char *text, size_t len, size_t **starts, size_t **lens,
                            size_t *n, rw_error *err);

/* special.c: end-of-generation tokens and the control type of
 * control-looking tokens, from token texts as llama.cpp guesses them (needs
 * texts, types and the eos/eot/eom ids); then, once the special list is
 * built, the strip attributes some models' special tokens have. */
void rw_tok__derive_special(rw_tokenizer *t, const rw_gguf *g);
void rw_tok__strip_attrs(rw_tokenizer *t, const rw_gguf *g);

/* detok.c: the bytes token id stands for (see there); returns the length,
 * writing at most cap bytes. */
size_t rw_tok__decode_token(const rw_tokenizer *t, int32_t id, char *buf, size_t cap);

/* Growable id list. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} id_list;
int rw_tok__ids_push(id_list *l, int32_t id);

/* pair_heap.c: candidate merges, best (lowest key) first, leftmost on ties.
 * size is the merged length when pushed: a pair whose symbols changed since
 * is stale and skipped by the caller. */
typedef struct {
    float key;       /* BPE: merge rank; SentencePiece: -score */
    int left, right; /* symbol indexes */
    size_t size;
} tok_pair;

typedef struct {
    tok_pair *v; /* owned; free(v) when done */
    size_t n, cap;
} tok_heap;

int rw_tok__heap_push(tok_heap *h, tok_pair p); /* -1 on out of memory */
tok_pair rw_tok__heap_pop(tok_heap *h);         /* h->n > 0 */

/* bpe.c: a text of at least this many words uses the word cache (tests set
 * it to SIZE_MAX to compare against the uncached path). */
extern size_t rw_tok__cache_min_words;

rw_status rw_tok__bpe(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err);
rw_status rw_tok__spm(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err);
rw_status rw_tok__wpm(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err);

#endif
