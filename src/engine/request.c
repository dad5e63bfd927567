/* request.c - what every part of the engine does with a request whatever
 * its stage: its clock, sending the final event that waits in it, and
 * freeing it (engine_int.h). Submit, the scheduler, the output and the
 * engine's life cycle all call here; this file calls back into none of
 * them, only into the request's parts (embed.c, prompt_lp.c, stop_match.c,
 * spec.c, constraint.c). */
#include <stdlib.h>
#include <time.h>

#include "engine/engine_int.h"

double rw_engine__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rw_engine__req_flush(rw_engine__req *r) {
    if (!r->final_pending) return;
    r->final_pending = false;
    if (r->emb) return rw_engine__embed_send(r); /* an embedding request's one event */
    r->cb(r->user, &r->final_ev);
    r->held_len = 0;
}

void rw_engine__req_free(rw_engine__req *r) {
    if (!r) return;
    rw_engine__req_flush(r); /* a final event not yet sent goes now (a request ended outside a step) */
    for (int i = 0; i < r->p.n_stop; i++) free(r->stop[i]);
    free(r->stop);
    rw_engine__stopm_free(r->stopm);
    free(r->marks);
    free(r->tokens);
    free(r->logits);
    free(r->prompt_logits);
    free(r->held);
    rw_spec_seq_free(r->spec); /* its draft sequence too; it only borrows seq and sampler */
    rw_constraint_free(r->cons);
    free(r->mlogits);
    rw_sampler_free(r->sampler);
    rw_model_seq_free(r->seq); /* only set here if rw_engine__seq_release was not called */
    rw_engine__embed_free(r->emb);
    rw_engine__plp_free(r->plp);
    free(r);
}
