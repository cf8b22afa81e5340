/* Remote slots' moves (slots_impl.h): the proxy sends this member's part
 * (or block k of it) to each member k that needs it, from my slot (or from
 * my input: gbSharedSendsInput), and receives theirs into their parts of
 * this member's copy, in one list over the group's transport. */
#include <stdlib.h>

#include "base/result.h"
#include "stage/slots_impl.h"

gbResult_t gbSharedPostMoves(gbStage_t* st, const gbStageWork_t* w, const gbStageSlot_t* s, const gbProxyOp_t* tag) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  gbAlgoP2p_t* list = calloc(2 * (size_t)sh->n, sizeof(gbAlgoP2p_t));
  if (!list) return gbErrorSet(gbSystemError, "%s: out of memory for a proxy step", sh->name);
  int n = 0;
  int blocks = gbSharedBlockPerMember(w->coll), direct = gbSharedSendsInput(sh, w);
  size_t bytes = gbStageWireBytes(w);
  for (int k = 0; k < sh->n; k++) {
    /* A send's buffer is only read (gbAlgoP2p_t). */
    char* from = direct ? (char*)(blocks ? gbStageMyBlock(w, k) : w->src)
                        : gbSharedAt(sh, sh->me, s->slot) + (blocks ? (size_t)k * bytes : 0);
    if (gbSharedNeeds(w, k, sh->me)) list[n++] = (gbAlgoP2p_t){k, 1, from, bytes};
    if (gbSharedNeeds(w, sh->me, k))
      list[n++] = (gbAlgoP2p_t){k, 0, gbSharedAt(sh, k, s->slot) + (blocks ? (size_t)sh->me * bytes : 0), bytes};
  }
  return gbStagePostMoves(&sh->ctx, tag, st->group, list, n, gbSharedFlag(sh, FLAG_STAGED, s->slot), s->use,
                          gbSharedFlag(sh, FLAG_FULL, s->slot), s->use);
}
