/* synth_int.h - private to src/synth. */
#ifndef RW_SYNTH_SYNTH_INT_H
#define RW_SYNTH_SYNTH_INT_H

#include "gguf/gguf.h"
#include "synth/synth.h"

/* Adds the tokenizer.* keys of the built-in byte-level BPE vocabulary (256
 * byte tokens, merges learned from a small built-in text, a few ChatML
 * special tokens). pre is tokenizer.ggml.pre. *n_vocab gets the size. */
rw_status rw_synth__add_builtin_vocab(rw_gguf_writer *w, const char *pre, uint32_t *n_vocab, rw_error *err);

/* Copies every tokenizer.* key of the GGUF at path. */
rw_status rw_synth__copy_vocab(rw_gguf_writer *w, const char *path, uint32_t *n_vocab, rw_error *err);

#endif
