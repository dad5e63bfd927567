/* settings_api.c - the process-wide settings of include/rewind.h: the
 * kernel tier and the summation order (kernels/matmul.h keeps them). Both
 * decide how weights are packed when a model opens, so they change only
 * while no model from rw_model_open is open. */
#include <string.h>

#include "api/api_int.h"
#include "kernels/matmul.h"

atomic_int rw_api__open_models;

rw_status rw_set_kernels(const char *tier, rw_error *err) {
    rw_kernel_tier t = RW_TIER_COUNT;
    if (tier && *tier) {
        int i = 0;
        while (i < RW_TIER_COUNT && strcmp(tier, rw_kernel_tier_name((rw_kernel_tier)i))) i++;
        if (i == RW_TIER_COUNT)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "kernels must be ref, avx2, avx512, amx or neon, not \"%.64s\"",
                             tier);
        t = (rw_kernel_tier)i;
        if (!rw_kernel_tier_available(t))
            return rw_errorf(err, RW_ERR_UNSUPPORTED, "this CPU cannot run the %s kernels", tier);
    } else { /* the best this CPU has */
        for (int i = RW_TIER_COUNT - 1; i >= 0 && t == RW_TIER_COUNT; i--)
            if (rw_kernel_tier_available((rw_kernel_tier)i)) t = (rw_kernel_tier)i;
    }
    if (t == rw_kernel_tier_current()) return RW_OK;
    if (atomic_load(&rw_api__open_models) > 0)
        return rw_errorf(err, RW_ERR_BUSY, "the kernels are %s while a model is open; set them before opening one",
                         rw_kernel_tier_name(rw_kernel_tier_current()));
    rw_kernel_tier_set(t);
    return RW_OK;
}

const char *rw_get_kernels(void) { return rw_kernel_tier_name(rw_kernel_tier_current()); }

rw_status rw_set_numerics(const char *numerics, rw_error *err) {
    rw_numerics nm = RW_NUMERICS_AUTO;
    if (numerics && *numerics && !rw_numerics_parse(numerics, &nm))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "numerics must be auto, fast or ggml, not \"%.64s\"", numerics);
    if (nm == rw_numerics_current()) return RW_OK;
    if (atomic_load(&rw_api__open_models) > 0)
        return rw_errorf(err, RW_ERR_BUSY, "the numerics are %s while a model is open; set them before opening one",
                         rw_numerics_name(rw_numerics_current()));
    rw_numerics_set(nm);
    return RW_OK;
}

const char *rw_get_numerics(void) { return rw_numerics_name(rw_numerics_current()); }
