/* What a long-running rank program measures of itself to show that nothing
 * grows: open descriptors (/proc/self/fd), threads (/proc/self/task),
 * anonymous resident memory (/proc/self/statm), the heap in use (mallinfo2) and this
 * process's /dev/shm/gpubridge-<pid>-* segments. Used by rank_soak.c and
 * rank_leaks.c. Header only: static, marked unused. */
#ifndef GB_TESTS_MP_RANK_METER_H
#define GB_TESTS_MP_RANK_METER_H

#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  long fds, threads, shm;
  long rssKb, heapKb;
  long maps; /* lines of /proc/self/maps: a mapping left behind shows here */
} meter_t;

/* Entries of a /proc directory, not counting "." and "..". */
static inline long meterCountDir(const char* path) {
  DIR* d = opendir(path);
  if (!d) return -1;
  long n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* Segments this process created ("/gpubridge-PID-..."), still named. */
static inline long meterOwnShm(void) {
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "gpubridge-%d-", (int)getpid());
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  long n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* Resident memory not backed by files or shared memory (statm's resident
 * minus shared): the shared-memory rings' pages, touched as traffic grows,
 * are not a leak. */
static inline long meterRssKb(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0, shared = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld %ld", &size, &resident, &shared) != 3) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : (resident - shared) * (sysconf(_SC_PAGESIZE) / 1024);
}

static inline long meterMaps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  long n = 0;
  int c;
  while ((c = getc(f)) != EOF)
    if (c == '\n') n++;
  fclose(f);
  return n;
}

/* The descriptor opendir holds while counting is not counted. */
static inline meter_t meterRead(void) {
  meter_t m;
  m.fds = meterCountDir("/proc/self/fd") - 1;
  m.threads = meterCountDir("/proc/self/task");
  m.shm = meterOwnShm();
  m.rssKb = meterRssKb();
  struct mallinfo2 mi = mallinfo2();
  m.heapKb = (long)(mi.uordblks / 1024);
  m.maps = meterMaps();
  return m;
}

static inline void meterShow(const meter_t* m, char* buf, size_t len) {
  snprintf(buf, len, "fds %ld threads %ld shm %ld rss %ld KiB heap %ld KiB maps %ld", m->fds, m->threads, m->shm,
           m->rssKb, m->heapKb, m->maps);
}

#endif
