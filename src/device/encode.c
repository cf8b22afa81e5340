/* An encoding's arguments (device.h's gbEncodeArgs_t), checked alike by
 * every device before anything is queued. */
#include "base/dtype.h"
#include "base/result.h"
#include "base/wire.h"
#include "device/device.h"

gbResult_t gbDeviceEncodeCheck(const gbEncodeArgs_t* e) {
  if (e == NULL) return gbErrorSet(gbInvalidArgument, "stream encoding: the arguments are NULL");
  if (e->dtype < 0 || e->dtype >= gbNumTypes || e->wire <= GB_WIRE_PLAIN || e->wire >= GB_NUM_WIRES ||
      !gbWireNarrows(e->wire, (gbDataType_t)e->dtype))
    return gbErrorSet(gbInvalidArgument, "stream encoding of %s into wire %d (%s): not a wire that narrows it",
                      gbDtypeName((gbDataType_t)e->dtype), e->wire, gbWireName(e->wire));
  if (e->count > 0 && (e->dst == NULL || e->src == NULL))
    return gbErrorSet(gbInvalidArgument, "stream encoding of %zu elements with a NULL %s pointer", e->count,
                      e->dst == NULL ? "destination" : "source");
  return gbSuccess;
}
