/* Nameless shared segments (memfd.h). */
#include "os/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int gbMemfdCreate(const char* name, size_t bytes, const uint8_t* nonce, void** base, const char** why) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    *why = strerror(errno);
    return -1;
  }
  int err = posix_fallocate(fd, 0, (off_t)bytes);
  if (err == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) err = errno;
  void* p = err == 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (err == 0 && p == MAP_FAILED) err = errno;
  if (p == MAP_FAILED) {
    *why = strerror(err);
    close(fd);
    return -1;
  }
  memset(p, 0, bytes);
  memcpy(p, nonce, GB_MEMFD_NONCE_BYTES);
  *base = p;
  return fd;
}

void* gbMemfdOpenPeer(const char* name, int pid, int fd, size_t bytes, const uint8_t* nonce, const char** why) {
  char path[64], link[128], expect[96];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  ssize_t n = readlink(path, link, sizeof(link) - 1);
  if (n < 0) {
    *why = strerror(errno);
    return NULL;
  }
  link[n] = '\0';
  /* Checked before open(): a descriptor of another kind (a device, a FIFO)
   * is never opened. */
  snprintf(expect, sizeof(expect), "/memfd:%s", name);
  if (strncmp(link, expect, strlen(expect)) != 0) {
    *why = "it is not the peer's segment (another pid namespace?)";
    return NULL;
  }
  int sfd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (sfd < 0) {
    *why = strerror(errno);
    return NULL;
  }
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == bytes)
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
  close(sfd);
  if (p == MAP_FAILED) {
    *why = "the segment has another size or cannot be mapped";
    return NULL;
  }
  if (memcmp(p, nonce, GB_MEMFD_NONCE_BYTES) != 0) {
    munmap(p, bytes);
    *why = "the segment does not hold the offer's nonce (another pid namespace?)";
    return NULL;
  }
  return p;
}
