/* gpubridge-info --trace DIR: reads the flight-recorder dumps of a job
 * (gpubridge-trace-<id>-r<rank>.json, schema gpubridge-trace/1, docs/TRACE.md)
 * and names the rank at fault. libc only; the pieces:
 *   json.c           the JSON reader
 *   trace_load.c     the directory's dumps, grouped by communicator
 *   trace_analyze.c  per-rank state, mismatch and skip, hang, blame order
 *   trace_report.c   the few lines of the report and the verdict sentence */
#ifndef GB_INFO_TRACE_H
#define GB_INFO_TRACE_H

#include <stdint.h>
#include <stdio.h>

#define TRACE_SCHEMA "gpubridge-trace/1"
#define TRACE_EXIT_NO_TRACE 2   /* DIR holds no dump */
#define TRACE_EXIT_UNREADABLE 1 /* DIR or every dump in it unreadable */

/* One record of a dump: what the rank called and how far it got. */
typedef struct {
  uint64_t seq, p2pSeq, count;
  char coll[24], dtype[16], op[24], phase[16], state[16];
  int64_t root;               /* -1 when null */
  int64_t peer;               /* send/recv group: its first peer; -1 when null */
  int64_t nchunks, chunksBridged;
} traceRecord_t;

typedef struct {
  char vendor[32];
  int leader;
  int nranks;
  int* ranks;
} traceIsland_t;

/* One rank's dump. */
typedef struct {
  char file[256];             /* the file name within DIR */
  char reason[24];
  int rank, nranks, island;
  int nislands;
  traceIsland_t* islands;
  int hasError;
  int64_t errCode, faultRank, seenBy, errWallNs;
  char errName[40];
  char* errText;              /* "" when none */
  int64_t capacity, recorded, unrecorded;
  int64_t lastEnqueued, lastCompleted, inside; /* inside: -1 when null */
  int nrecords;
  traceRecord_t* records;     /* oldest first */
  int ncolls;
  const traceRecord_t** colls;/* the collective records (seq > 0), by seq */
} traceDump_t;

/* The dumps of one communicator, by rank (NULL: no dump from that rank). */
typedef struct {
  char id[40];
  int nranks;
  traceDump_t** byRank;
} traceComm_t;

typedef struct {
  int ncomms;
  traceComm_t* comms;
  int nfiles;        /* dumps read */
  int nbad;          /* files that look like dumps and could not be read */
} traceSet_t;

/* Reads every *.json of dir into set; a file that is not a readable dump is
 * reported on out and skipped. Returns 0, or -1 when dir cannot be listed
 * (reported on err). */
int traceLoad(const char* dir, traceSet_t* set, FILE* out, FILE* err);
void traceSetFree(traceSet_t* set);

/* ------------------------------------------------------------ the analysis */

typedef enum {
  VERDICT_CLEAN,        /* no fault, nothing in flight */
  VERDICT_BUSY,         /* every rank inside the same collective, none failed or missing */
  VERDICT_STOPPED,      /* a missing rank named by a stall */
  VERDICT_KILLED,       /* a missing rank named by a closed connection */
  VERDICT_SKIPPED,      /* culprits' calls from S on equal the others' from S+1 on */
  VERDICT_NEVER_CALLED, /* a dumped rank idle at S-1 while others wait inside S */
  VERDICT_EXTRA,        /* culprits' calls from S+1 on equal the others' from S on */
  VERDICT_MISMATCH,     /* a minority called S with another field value */
  VERDICT_TIE,          /* groups of equal size disagree on S */
  VERDICT_NO_TRACE,     /* a missing rank nobody named */
  VERDICT_FAULT_RANK,   /* a dumped rank named by the first-hand failure */
  VERDICT_OWN           /* a rank's own error, quoted */
} traceVerdictKind_t;

/* A rank set as a bitmap-free list: ranks ascending. */
typedef struct {
  int n;
  int* r;
} traceRanks_t;

typedef struct {
  traceVerdictKind_t kind;
  traceRanks_t culprits;     /* the rank(s) at fault (empty for clean, busy, tie) */
  traceRanks_t others;       /* the other side: ranks waiting, timed out, or the majority */
  uint64_t seq;              /* the collective the verdict is about */
  char coll[24];             /* its name (the majority's) */
  char dtype[16];            /* the majority's datatype at seq */
  uint64_t count;            /* the majority's count at seq */
  const char* field;         /* mismatch, tie: "collective", "count", "datatype", "op", "root" */
  char value[96];            /* the culprits' values (mismatch) */
  char valueOthers[96];      /* the majority's value */
  int ngroups;               /* tie: groups, each with its value */
  traceRanks_t* groups;
  char (*groupValues)[96];
  const traceDump_t* own;    /* VERDICT_OWN, VERDICT_FAULT_RANK: the error quoted */
  uint64_t p2pSeq;           /* a hang in a send/recv group (no collective inside): its number, else 0 */
  int p2pRank;               /* the rank whose group number that is */
} traceVerdict_t;

/* Derived per rank of one communicator. */
typedef struct {
  const traceDump_t* d;      /* NULL: no dump */
  const traceRecord_t* inside; /* oldest in-flight collective record, or NULL */
  int idle;                  /* dumped and nothing in flight */
  int errKind;               /* TRACE_ERR_* */
} traceRankView_t;

enum { TRACE_ERR_NONE = 0, TRACE_ERR_STALL, TRACE_ERR_DIED, TRACE_ERR_OWN };

typedef struct {
  const traceComm_t* comm;
  traceRankView_t* ranks;    /* [comm->nranks] */
  int firstHand;             /* rank whose error is the first-hand stall or death, or -1 */
  int64_t earliestErrNs;     /* smallest error wallNs of the communicator, INT64_MAX when none */
  int anyInFlight;
  uint64_t maxEnqueued;      /* S*: the highest lastEnqueued over dumped ranks */
  traceVerdict_t verdict;
} traceAnalysis_t;

/* Analyzes one communicator. Returns 0, or -1 when out of memory. */
int traceAnalyze(const traceComm_t* comm, traceAnalysis_t* a);
void traceAnalysisFree(traceAnalysis_t* a);

/* Helpers the report shares with the analysis. */
const traceRecord_t* traceRecordOf(const traceDump_t* d, uint64_t seq); /* the collective record seq, or NULL */
const char* traceIslandOf(const traceComm_t* comm, int rank);            /* vendor of rank's island, or "?" */
int traceRecordInFlight(const traceRecord_t* r);
int traceRanksAdd(traceRanks_t* s, int rank);                            /* keeps it ascending, no duplicates */
void traceRanksFree(traceRanks_t* s);

/* ------------------------------------------------------------- the report */

/* Writes the lines of one analyzed communicator, without the verdict. */
void traceReportComm(const traceAnalysis_t* a, FILE* out);
/* The verdict sentence, without "verdict: ". */
void traceVerdictSentence(const traceAnalysis_t* a, char* buf, size_t len);
/* "0-3", "0,1,3", "0-2,5": ranks as a comma list of ranges. */
void traceRanksFormat(const traceRanks_t* s, char* buf, size_t len);

/* gpubridge-info --trace DIR: loads, analyzes, reports; returns the exit status. */
int traceMain(const char* dir);

#endif
