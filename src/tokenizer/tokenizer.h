/* tokenizer.h - text to token ids and back, from a GGUF's tokenizer.ggml.*
 * metadata, as llama.cpp tokenizes:
 *
 *   - model "gpt2": byte-level BPE; the text is first split by the
 *     pre-tokenizer regexes that tokenizer.ggml.pre names (PCRE2, Unicode
 *     properties), each piece is mapped to GPT-2's printable byte alphabet
 *     and merged by merge rank;
 *   - model "llama": SentencePiece-style BPE by token score, spaces as U+2581,
 *     byte fallback (<0xXX>) for what the vocabulary lacks;
 *   - model "bert": WordPiece, longest match first.
 *
 * Control and unknown tokens are recognised in the text only when
 * parse_special is set; user-defined tokens always (as llama.cpp). */
#ifndef RW_TOKENIZER_TOKENIZER_H
#define RW_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "gguf/gguf.h"

typedef struct rw_tokenizer rw_tokenizer;

/* Builds a tokenizer from g's metadata (copies what it needs: g may be closed
 * afterwards). The caller frees *out with rw_tokenizer_free. */
rw_status rw_tokenizer_load(const rw_gguf *g, rw_tokenizer **out, rw_error *err);
void rw_tokenizer_free(rw_tokenizer *t); /* no-op on NULL */

int32_t rw_tokenizer_n_vocab(const rw_tokenizer *t);
int32_t rw_tokenizer_bos(const rw_tokenizer *t); /* -1 if none */
int32_t rw_tokenizer_eos(const rw_tokenizer *t); /* -1 if none */
bool rw_tokenizer_add_bos(const rw_tokenizer *t);
/* True for tokens that end a generation (eos, eot, <|im_end|>, <|endoftext|>...). */
bool rw_tokenizer_is_eog(const rw_tokenizer *t, int32_t id);
/* True for control tokens (not printed by default). */
bool rw_tokenizer_is_control(const rw_tokenizer *t, int32_t id);
/* Fill-in-the-middle tokens by role: the file's tokenizer.ggml.fim_*_token_id
 * (or the older prefix/suffix/middle_token_id keys), else found by their
 * usual texts (<|fim_prefix|>, <fim_prefix>, <PRE>, ...). */
/* rw_fim_role is public (include/rewind.h). */
/* The token of a role, or -1 when the vocabulary has none. */
int32_t rw_tokenizer_fim(const rw_tokenizer *t, rw_fim_role role);
/* A token's vocabulary text (as stored, not decoded), or NULL for a bad id. */
const char *rw_tokenizer_token_text(const rw_tokenizer *t, int32_t id);

/* Tokenizes len bytes of text. add_special adds BOS/EOS as the vocabulary
 * asks (add_bos_token / add_eos_token). *ids is malloc'd (caller frees). */
rw_status rw_tokenize(const rw_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t **ids, size_t *n_ids, rw_error *err);

/* rw_tokenize with parse_special, except that control tokens are not cut
 * out where their text overlaps one of the n_plain byte ranges
 * [plain[2i], plain[2i+1]) (sorted, disjoint): a chat prompt's message
 * contents, so what a user writes stays text (user-defined tokens are still
 * cut out there, as with parse_special false). */
rw_status rw_tokenize_guarded(const rw_tokenizer *t, const char *text, size_t len, bool add_special,
                              const size_t *plain, size_t n_plain, int32_t **ids, size_t *n_ids, rw_error *err);
/* The longest token text in bytes: no token stands for more bytes of text
 * (so a text of B bytes has at least B / this many tokens). */
size_t rw_tokenizer_max_token_len(const rw_tokenizer *t);
/* Offset of the first control-token text in s[0..n), or -1. */
long rw_tokenizer_find_control(const rw_tokenizer *t, const char *s, size_t n);

/* The bytes one token stands for (spaces restored, byte tokens as their
 * byte; control tokens as their text only if render_special). Returns the
 * number of bytes, written up to cap (so a short buffer can be retried). */
size_t rw_token_to_piece(const rw_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);

/* Detokenizes ids into a malloc'd NUL-terminated string (caller frees). For
 * SentencePiece vocabularies the space added before the first word is
 * removed, so detokenize(tokenize(text)) == text. */
rw_status rw_detokenize(const rw_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **out,
                        size_t *out_len, rw_error *err);

/* Streaming detokenizer: feed one token at a time, get back only complete
 * UTF-8 characters; bytes of a character split across tokens are held back
 * until it is complete. A zeroed struct is a fresh stream. */
typedef struct {
    char pending[8];  /* bytes of an incomplete UTF-8 sequence */
    size_t n_pending;
    bool started;     /* a token has been fed (leading-space rule) */
} rw_detok_stream;

/* Appends the complete text after feeding id to out (up to cap bytes;
 * returns the bytes written, or the bytes needed if cap is too small, in
 * which case nothing is consumed). out is not NUL-terminated. */
size_t rw_detok_stream_feed(const rw_tokenizer *t, rw_detok_stream *s, int32_t id, bool render_special, char *out,
                            size_t cap);
/* Whatever is still pending at the end (an invalid tail, as U+FFFD each). */
size_t rw_detok_stream_flush(rw_detok_stream *s, char *out, size_t cap);

#endif
