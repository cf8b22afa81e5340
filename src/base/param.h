/* The one declared table of GPUBRIDGE_* parameters: name, type, default, doc.
 * Read once from the environment. An invalid value is not a silent default:
 * it is kept as an error text that the start-up exchange reports on every
 * rank. Unknown GPUBRIDGE_* names are warned about. */
#ifndef GB_BASE_PARAM_H
#define GB_BASE_PARAM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  GB_PARAM_DEBUG,
  GB_PARAM_DEBUG_SUBSYS,
  GB_PARAM_DEBUG_FILE,
  GB_PARAM_VENDOR,
  GB_PARAM_POLICY,
  GB_PARAM_TRANSPORT,
  GB_PARAM_TIMEOUT,
  GB_PARAM_SOCKET_IFNAME,
  GB_PARAM_NSOCKS_PERPEER,
  GB_PARAM_CHUNK_BYTES,
  GB_PARAM_STAGING_SLOTS,
  GB_PARAM_RING_MIN_BYTES,
  GB_PARAM_JOB_SECRET,
  GB_PARAM_UNIQUE_ID,
  GB_PARAM_SIM_HOST,
  GB_PARAM_SPLIT_TEST,
  GB_PARAM_DEVICE,
  GB_PARAM_CUDART_LIBRARY,
  GB_PARAM_CUDA_LIBRARY,
  GB_PARAM_NCCL_LIBRARY,
  GB_PARAM_STREAM_FLAGS,
  GB_PARAM_DEVICE_BACKEND,
  GB_PARAM_HIP_LIBRARY,
  GB_PARAM_RCCL_LIBRARY,
  GB_PARAM_CHECK_CALLS,
  GB_PARAM_RAILS,
  GB_PARAM_THRESHOLDS,
  GB_PARAM_SHM,
  GB_PARAM_LIBRARY,
  GB_PARAM_VENDORS,
  GB_PARAM_TRACE_BUFFER,
  GB_PARAM_TRACE_DIR,
  GB_PARAM_TRACE_SIGNAL,
  GB_PARAM_TRACE_DONE,
  GB_PARAM_HIPRTC_LIBRARY,
  GB_PARAM_BRIDGE_SLOTS,
  GB_PARAM_EXCHANGE,
  GB_PARAM_BRIDGE_COMPRESSION,
  GB_PARAM_LAUNCHER,
  GB_PARAM_UCX_LIBRARY,
  GB_PARAM_COUNT
} gbParamId_t;

typedef enum {
  GB_PARAM_INT,    /* decimal integer within [min, max] */
  GB_PARAM_SIZE,   /* bytes, with optional K, M, G suffix (1024-based), within [min, max] */
  GB_PARAM_ENUM,   /* one of a list of names; value is the index */
  GB_PARAM_STRING  /* free text, checked by the user of the value */
} gbParamType_t;

typedef struct {
  const char* name;          /* "GPUBRIDGE_TIMEOUT" */
  gbParamType_t type;
  const char* defaultText;   /* as a user would write it */
  const char* const* choices;/* GB_PARAM_ENUM: NULL-terminated names */
  int64_t min, max;          /* GB_PARAM_INT and GB_PARAM_SIZE */
  int mustAgree;             /* every rank must hold the same value */
  const char* doc;           /* one line */
} gbParamDesc_t;

/* Reads the environment (once; later calls do nothing). */
void gbParamInit(void);
/* Where the read's warnings (unknown GPUBRIDGE_* names) go, a line at a
 * time: the log sets it (base/log.c), and warnings read before wait for it. */
typedef void (*gbParamWarnSink_t)(const char* line, int len);
void gbParamSetWarnSink(gbParamWarnSink_t sink);
/* Forget what was read (tests only). */
void gbParamReset(void);

const gbParamDesc_t* gbParamDesc(gbParamId_t id);

/* The value: for INT/SIZE the number, for ENUM the index. An invalid value
 * reads as the default. */
int64_t gbParamInt(gbParamId_t id);
/* For STRING (and any type): the text in effect ("" when unset, no default). */
const char* gbParamString(gbParamId_t id);
/* Whether the user set it in the environment. */
int gbParamIsSet(gbParamId_t id);

/* The invalid values found, one per line: "GPUBRIDGE_POLICY=bogus is not one of
 * auto, hierarchical, native, flat". "" if all are valid. */
const char* gbParamErrors(void);

/* Parses text as the parameter's type: 0 and *value on success, else -1 and a
 * message in err (what is wrong and what is allowed). */
int gbParamParse(gbParamId_t id, const char* text, int64_t* value, char* err, size_t errLen);

/* The launchers whose variables give a process its rank, in the order tried:
 * torchrun (and gpubridge-run), Slurm, Open MPI. boot/env.c reads the rest. */
typedef struct {
  const char* launcher;                         /* "torchrun", "slurm", "openmpi" */
  const char *rank, *size, *local, *localSize;  /* RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE */
  const char* job;                              /* a job identity every rank shares */
} gbParamLauncher_t;
extern const gbParamLauncher_t gbParamLaunchers[];
extern const int gbParamLauncherCount;

/* Vendor lists: GPUBRIDGE_VENDORS and gpubridge-run --vendors. Comma-separated
 * LABEL[:COUNT] items in rank order (COUNT defaults to 1): "nvidia:2,amd:2"
 * (blocks) or "nvidia,amd,nvidia,amd" (one per rank). A label is 1 to
 * GB_PARAM_VENDOR_LABEL_MAX characters of a-z, 0-9, _ and -. */
#define GB_PARAM_VENDOR_LABEL_MAX 15
#define GB_PARAM_VENDORS_MAX_RANKS 4096 /* boot's GB_MAX_RANKS */
/* The number of ranks spec names, or -1 with what is wrong in err (without
 * the variable's name, so each caller says where the spec came from). */
int gbParamVendorsParse(const char* spec, char* err, size_t errLen);
/* The label spec gives rank; 0 on success, -1 when spec is malformed or
 * names fewer ranks. */
int gbParamVendorsLabel(const char* spec, int rank, char label[GB_PARAM_VENDOR_LABEL_MAX + 1]);

/* Writes the table (name, type, default, current value, doc) as text, or as a
 * Markdown table when markdown != 0. */
/* "int 1..86400", "size 4K..1G", "enum: auto, hierarchical, ...", "string". */
void gbParamDescribeType(const gbParamDesc_t* d, char* buf, size_t len);
void gbParamPrintTable(void* file /* FILE* */, int markdown);

#endif
