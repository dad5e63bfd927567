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

/* x[i] = a * (uniform in [-1, 1) from the splitmix64 number i + 1 after
 * state s, whose state advances by step per number), i < n: synth.c's
 * FILL_MATRIX loop, bitwise, in AVX-512 (fill_avx512.c; the caller checks
 * the CPU). */
void rw_synth__fill_uniform_avx512(uint64_t s, uint64_t step, float a, uint64_t n, float *x);

#endif
