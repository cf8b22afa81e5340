/* Nameless shared segments between processes of one host. A segment is a
 * memfd (memory that goes when the last descriptor or mapping goes), so
 * nothing outlives the processes, even one killed in the middle of the
 * set-up: a named segment in /dev/shm lives until someone unlinks it. Its
 * maker offers (pid, fd, nonce); there is no Unix socket to pass the
 * descriptor over (SCM_RIGHTS), so a peer reopens it through
 * /proc/<pid>/fd/<fd>, which Linux allows a same-user process (ptrace read
 * access). The link must name a memfd of the expected name and the segment's
 * first bytes must hold the nonce, so another pid namespace's process is
 * never used by mistake. */
#ifndef GB_OS_MEMFD_H
#define GB_OS_MEMFD_H

#include <stddef.h>
#include <stdint.h>

#define GB_MEMFD_NONCE_BYTES 16

/* A segment of bytes (page-rounded by the caller) named name, its pages
 * reserved (memory that runs out fails here, not with SIGBUS later), its size
 * sealed, zeroed, nonce in its first bytes. Returns its fd, mapped at *base,
 * or -1 with why (a static or strerror text). */
int gbMemfdCreate(const char* name, size_t bytes, const uint8_t* nonce, void** base, const char** why);

/* Maps the segment a peer offered (its pid and fd), checked to be a memfd
 * called name of exactly bytes holding nonce; NULL with why if not. */
void* gbMemfdOpenPeer(const char* name, int pid, int fd, size_t bytes, const uint8_t* nonce, const char** why);

#endif
