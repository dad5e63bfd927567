/* ops_tmp.h - TEMPORARY: see ops_tmp.c. */
#ifndef RW_MODELS_OPS_TMP_H
#define RW_MODELS_OPS_TMP_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/kv.h"

void mdl_tmp_rmsnorm(const float *x, const float *w, int n, float eps, float *y);
void mdl_tmp_rope_cache(float pos, int n_rot, float base, float freq_scale, const float *freq_factors, float *cs);
void mdl_tmp_rope(float *x, int n_rot, bool neox, const float *cs);

#endif
