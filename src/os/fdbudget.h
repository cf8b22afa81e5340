/* This process's descriptors and the connections not yet authenticated
 * (strangers, and peers before their first message) that listeners keep:
 * how many those may hold, how many they hold, and the requests of our own
 * sockets that ran out of descriptors (EMFILE, ENFILE) for some of them to
 * be dropped. The listeners' threads (net/pending.c) drop their own oldest
 * waiting connections when asked, so no thread touches another's table. */
#ifndef GB_OS_FDBUDGET_H
#define GB_OS_FDBUDGET_H

/* Waiting connections of the whole process: half the open-file limit
 * (RLIMIT_NOFILE's soft value, read at each call), at most this many... */
#define GB_FD_STRANGERS_MAX 1024
/* ...and at least this many, so real peers still get in under a tiny limit. */
#define GB_FD_STRANGERS_MIN 8
/* Descriptors one request of ours asks the listeners to free. */
#define GB_FD_RELIEF_BATCH 8
/* A request not served within this long is forgotten (whoever asked has
 * gone on, by a retry that succeeded or by its own deadline). */
#define GB_FD_RELIEF_TTL_NS (1000LL * 1000000LL)

/* How many descriptors waiting connections may hold in this process. The
 * other half of the limit is the reserve for the job's own sockets,
 * segments and files: a rank needs about GPUBRIDGE_NSOCKS_PERPEER sockets
 * per peer and host group plus a few dozen, far below half of the common
 * limit of 1,024 for the jobs one host runs. */
int gbFdStrangerBudget(void);
/* The process's count of waiting connections: the listeners add (+1) and
 * remove (-1) theirs. */
void gbFdStrangersHeld(int delta);
int gbFdStrangersCount(void);

/* Our own socket() or accept() failed with err (os/socket.c asks; other
 * opens, such as the eventfd and the shared-memory files, do not). When err is EMFILE
 * or ENFILE and waiting connections hold descriptors, asks the listeners to
 * drop some and returns 1: try again in a moment. Otherwise 0: nothing will
 * free a descriptor (the job itself needs more: ulimit -n). */
int gbFdAskRelief(int err);
/* A listener takes one pending request to drop a waiting connection (1),
 * or finds none (0). gbFdReliefReturn gives back one it could not serve. */
int gbFdReliefTake(void);
void gbFdReliefReturn(void);

/* "the open-file limit is 1024", for messages about running out. */
const char* gbFdLimitText(char* buf, unsigned len);

#endif
