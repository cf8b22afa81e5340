/* Logging, NCCL-style: GPUBRIDGE_DEBUG=WARN|INFO|TRACE, GPUBRIDGE_DEBUG_SUBSYS
 * (comma list, ^ negates), GPUBRIDGE_DEBUG_FILE (%h host, %p pid).
 * Every line carries host:pid:tid, the rank when known, and the run mode
 * ("simulated nvidia", "real amd", "cpu"). Silent below WARN by default. */
#ifndef GB_BASE_LOG_H
#define GB_BASE_LOG_H

typedef enum { GB_LOG_NONE = 0, GB_LOG_WARN = 1, GB_LOG_INFO = 2, GB_LOG_TRACE = 3 } gbLogLevel_t;

/* Subsystems (bit mask). */
enum {
  GB_LOG_INIT = 1 << 0,
  GB_LOG_BOOT = 1 << 1,
  GB_LOG_NET = 1 << 2,
  GB_LOG_COLL = 1 << 3,
  GB_LOG_PROXY = 1 << 4,
  GB_LOG_DEVICE = 1 << 5,
  GB_LOG_ENV = 1 << 6,
  GB_LOG_ALL = 0x7fffffff
};

/* Reads the logging parameters (once; later calls do nothing). */
void gbLogInit(void);
/* The rank shown in every line of this process from now on (-1: unknown). */
void gbLogSetRank(int rank);
/* The run mode shown in every line, e.g. "simulated nvidia". Copied. */
void gbLogSetMode(const char* mode);
/* Whether a message at this level and subsystem would be written. */
int gbLogEnabled(gbLogLevel_t level, int subsys);
/* A hook that receives every written line (for the Python layer); NULL removes. */
typedef void (*gbLogHook_t)(int level, const char* line);
void gbLogSetHook(gbLogHook_t hook);

void gbLogWrite(gbLogLevel_t level, int subsys, const char* file, int line,
                const char* fmt, ...) __attribute__((format(printf, 5, 6)));

#define GB_WARN(...) gbLogWrite(GB_LOG_WARN, GB_LOG_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define GB_INFO(subsys, ...)                                               \
  do {                                                                     \
    if (gbLogEnabled(GB_LOG_INFO, (subsys)))                               \
      gbLogWrite(GB_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__);  \
  } while (0)
#define GB_TRACE(subsys, ...)                                              \
  do {                                                                     \
    if (gbLogEnabled(GB_LOG_TRACE, (subsys)))                              \
      gbLogWrite(GB_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
