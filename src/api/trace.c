/* Exported: the flight recorder's observer, queries, counters and dump.
 * They work on a failed communicator too (until it is destroyed), from any
 * thread: that is when they are wanted. Each is a counted call
 * (GB_API_ON_COMM): an abort on another thread waits for it before the
 * recorder goes. */
#include <string.h>

#include "api/api.h"
#include "base/result.h"
#include "trace/trace.h"

/* Initialized, with a recorder (the handle was checked by GB_API_ON_COMM). */
static gbResult_t checkTraced(const char* fn, gbComm_t comm) {
  if (gbCommInitState(comm) != GB_INIT_DONE)
    return gbErrorSet(gbInvalidUsage, "%s: comm is not initialized (still initializing, or its init failed)", fn);
  if (!comm->trace)
    return gbErrorSet(gbInvalidUsage, "%s: this communicator has no flight recorder (GPUBRIDGE_TRACE_BUFFER=0); unset "
                      "GPUBRIDGE_TRACE_BUFFER to turn it on", fn);
  return gbSuccess;
}

static gbResult_t setObserver(gbComm_t comm, gbObserver_t fn, void* userData) {
  GB_CHECK(checkTraced("gbCommSetObserver", comm));
  return gbTraceSetObserver(comm->trace, fn, userData);
}

gbResult_t gbCommSetObserver(gbComm_t comm, gbObserver_t fn, void* userData) {
  GB_API_ON_COMM("gbCommSetObserver", comm, setObserver(comm, fn, userData));
}

static gbResult_t query(const char* fn, gbComm_t comm, gbCollRecord_t* records, int maxRecords, int* count,
                        int inFlightOnly) {
  GB_CHECK(checkTraced(fn, comm));
  if (!count) return gbErrorSet(gbInvalidArgument, "%s: count is NULL", fn);
  if (maxRecords < 0) return gbErrorSet(gbInvalidArgument, "%s: maxRecords is %d (must be 0 or more)", fn, maxRecords);
  if (maxRecords > 0 && !records)
    return gbErrorSet(gbInvalidArgument, "%s: records is NULL with maxRecords %d", fn, maxRecords);
  *count = maxRecords > 0 ? gbTraceCollect(comm->trace, records, maxRecords, inFlightOnly) : 0;
  return gbSuccess;
}

gbResult_t gbCommGetInFlight(gbComm_t comm, gbCollRecord_t* records, int maxRecords, int* count) {
  GB_API_ON_COMM("gbCommGetInFlight", comm, query("gbCommGetInFlight", comm, records, maxRecords, count, 1));
}

gbResult_t gbCommGetRecords(gbComm_t comm, gbCollRecord_t* records, int maxRecords, int* count) {
  GB_API_ON_COMM("gbCommGetRecords", comm, query("gbCommGetRecords", comm, records, maxRecords, count, 0));
}

const char* gbCollRecordPhase(const gbCollRecord_t* record) {
  if (!record) return "unknown";
  return gbTracePhaseName(record, 0);
}

static gbResult_t counters(gbComm_t comm, gbCommCounters_t* out) {
  GB_CHECK(checkTraced("gbCommGetCounters", comm));
  if (!out) return gbErrorSet(gbInvalidArgument, "gbCommGetCounters: counters is NULL");
  gbTraceCounters(comm->trace, out);
  return gbSuccess;
}

gbResult_t gbCommGetCounters(gbComm_t comm, gbCommCounters_t* out) {
  GB_API_ON_COMM("gbCommGetCounters", comm, counters(comm, out));
}

static gbResult_t dump(gbComm_t comm, const char* dir, char* path, size_t pathLen) {
  GB_CHECK(checkTraced("gbCommDumpTrace", comm));
  if (path && pathLen > 0) path[0] = '\0';
  if (!path && pathLen > 0) return gbErrorSet(gbInvalidArgument, "gbCommDumpTrace: path is NULL with pathLen %zu",
                                              pathLen);
  return gbTraceDump(comm->trace, dir, "api", path, pathLen);
}

gbResult_t gbCommDumpTrace(gbComm_t comm, const char* dir, char* path, size_t pathLen) {
  GB_API_ON_COMM("gbCommDumpTrace", comm, dump(comm, dir, path, pathLen));
}
