/* The vendor runtime behind one ops table. One device per process, chosen on
 * first use: a real GPU (cuda/, hip/, loaded with dlopen) or the host device
 * (host/): streams are worker threads and flags are host words, so the same
 * schedule runs with or without a GPU. */
#ifndef GB_DEVICE_DEVICE_H
#define GB_DEVICE_DEVICE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "gpubridge/gpubridge.h"

/* A word in host memory that streams and the proxy thread signal through.
 * value only grows. error != 0 carries a gbResult_t to whoever waits.
 * Lifetime: a host waiter that returns may free the flag at once, so a
 * setter's last touch is the store that releases the waiter: the store of
 * value (gbFlagSetHost), or of error alone (a write that will never come).
 * An error set together with a value releases waiters only once that value
 * is in (errorValue), so the store of value stays the last touch. */
typedef struct {
  _Atomic uint64_t value;
  atomic_int error;
  int timeoutSec; /* the deadline of the work that releases it, set by its owner (0: GPUBRIDGE_TIMEOUT's) */
  int pollNs;     /* a host waiter sleeps at most this long between looks (0: by its wait, os/backoff.h), set by
                     its owner: a GPU's write wakes nobody */
  int foreign;    /* written by other processes' streams (a member's signal): a dropped write leaves it alone, as
                     its waiter hears that member's failure through the member's own failure word, with its cause */
  _Atomic uint64_t errorValue; /* with error: the value its setter stores after it (0: none) */
} gbFlag_t;
/* GPUs write value at its address (cuStreamWriteValue64) and a flag array's
 * addresses are base + index * sizeof(gbFlag_t): the atomics keep the layout. */
_Static_assert(sizeof(_Atomic uint64_t) == 8 && _Alignof(_Atomic uint64_t) == 8,
               "a flag's value is a plain 64-bit word");
_Static_assert(sizeof(gbFlag_t) == 32 && _Alignof(gbFlag_t) == 8, "gbFlag_t's layout is the GPUs'");
_Static_assert(offsetof(gbFlag_t, value) == 0 && offsetof(gbFlag_t, error) == 8 && offsetof(gbFlag_t, errorValue) == 24,
               "gbFlag_t's layout is the GPUs'");

/* A stream's wait for a flag outlives the deadline of the work that releases
 * it by this much: whoever owns the flag releases it (or sets its error) first. */
#define GB_FLAG_WAIT_MARGIN_SEC 5

/* One reduction a stream runs (reduceAsync): dst = the fold of src[0..nsrc-1]
 * with gbReduceOrdered's order and bits (base/dtype.h). Addresses are the
 * device's: device memory, or host memory it reaches (hostRegister's
 * devPtr). op is sum, prod, max or min (avg: sum with divisor > 0). */
#define GB_REDUCE_MAX_SRCS 8
typedef struct {
  void* dst;
  const void* src[GB_REDUCE_MAX_SRCS];
  int nsrc;
  size_t count;
  int dtype;   /* gbDataType_t */
  int op;      /* gbRedOp_t: gbSum .. gbMin */
  int divisor; /* > 0: divide every finished element (avg) */
  int ring;    /* fold in the ring's order (nsrc >= 3) */
  int wire;    /* a base/wire.h gbWire_t: the sources are in that wire format (op sum): decoded, added in float
                  from src[0] on, divided, rounded once to dtype (gbWireFold's bits); ring unused */
} gbReduceArgs_t;

/* One encoding a stream runs (encodeAsync): dst = count elements of dtype
 * at src in a wire format (base/wire.h, gbWireEncode's bits). Addresses are
 * the device's: device memory (a copy then moves the narrowed bytes out) or
 * mapped host memory (a staging slot, for a small part). */
typedef struct {
  void* dst;
  const void* src;
  size_t count;
  int dtype; /* gbDataType_t the wire narrows */
  int wire;  /* gbWire_t */
} gbEncodeArgs_t;

/* One exchange a stream runs (exchangeAsync): an all-reduce among the
 * members of a shared segment driven by the stream alone, no host thread
 * between members (stage/exchange.c). The range is cut into `blocks` equal
 * blocks (count * b / blocks), each with flags of its own, so a GPU's thread
 * block waits for nothing but other members. A member's exchanges run one
 * after the other (the caller orders them across streams with the done
 * flags), and uses alternate between two buffers. Per block b, in order:
 * for use > 2, wait until every member k set full[k][0] >= use - 1 in my
 * flags (it began its use - 1, so it ended its use - 2 and read this
 * buffer); copy my input red.src[me]'s range into mine; set full[me][b] =
 * use in every other member's flags; wait until every member k set
 * full[k][b] >= use in mine; fold red.src[0..nsrc-1] (member k's part for k
 * != me) into red.dst as reduceAsync does; set done[i] = use for each index
 * i < maxBlocks with i % blocks == b. Member m's flags (flags[m]; flagsDev[m]
 * their device address): full[k][b] at index k * maxBlocks + b; done:
 * maxBlocks flags of mine. ready is set to use when the exchange starts.
 * Every wait also ends once *stop is set (my flags were released after a
 * failure: a member's late write may lower a released flag again): a host
 * wait then fails the stream; a GPU goes on, and the error reaches the user
 * through the communicator. */
typedef struct {
  gbReduceArgs_t red;
  int me;
  int blocks, maxBlocks;
  uint64_t use;
  void* mine;                               /* my part of this use (device address) */
  gbFlag_t* flags[GB_REDUCE_MAX_SRCS];
  void* flagsDev[GB_REDUCE_MAX_SRCS];
  gbFlag_t* ready;
  void* readyDev;
  gbFlag_t* done;
  void* doneDev;
  const atomic_int* stop;                   /* set (never cleared) when my flags were released: every wait ends */
  void* stopDev;
} gbExchangeArgs_t;

/* Member `member`'s full flag of `block` in one member's flags. */
static inline gbFlag_t* gbExchangeFlag(gbFlag_t* flags, int member, int block, int maxBlocks) {
  return flags + (size_t)member * (size_t)maxBlocks + (size_t)block;
}

/* Checks an exchange's arguments, alike on every device (device/exchange.c):
 * gbInvalidArgument naming what is wrong. */
gbResult_t gbDeviceExchangeCheck(const gbExchangeArgs_t* x);

/* Checks an encoding's arguments, alike on every device (device/encode.c). */
gbResult_t gbDeviceEncodeCheck(const gbEncodeArgs_t* e);
/* The host device's exchange, on its stream thread (device/host/exchange.c):
 * waits are bounded by each flag's deadline, else fallbackSec. */
gbResult_t gbDeviceHostExchange(const gbExchangeArgs_t* x, double fallbackSec);

/* Which runtime an ops table drives (gbDeviceOps.runtime): island/ picks
 * its library by it, never by the name. */
enum { GB_DEVICE_RUNTIME_HOST = 0, GB_DEVICE_RUNTIME_CUDA = 1, GB_DEVICE_RUNTIME_HIP = 2, GB_DEVICE_NUM_RUNTIMES = 3 };

/* Work a stream runs on the host (the host device's island steps). */
typedef gbResult_t (*gbStreamFn_t)(void* arg);

typedef struct gbDeviceOps {
  const char* name;         /* "host", "cuda", "hip" */
  int runtime;              /* GB_DEVICE_RUNTIME_HOST, _CUDA, _HIP */
  int runKind;              /* gbRunKind_t */
  const char* vendor;       /* island label: "nvidia", "amd", or GPUBRIDGE_VENDOR's value */
  int hostMemory;           /* device memory is host memory (the host device): the proxy can
                               work in the caller's buffers, no staging copies */

  gbResult_t (*memAlloc)(void** ptr, size_t bytes);
  gbResult_t (*memFree)(void* ptr);
  gbResult_t (*memcpyToDevice)(void* dst, const void* src, size_t bytes);
  gbResult_t (*memcpyToHost)(void* dst, const void* src, size_t bytes);

  /* Host memory the device can reach (pinned and mapped): staging slots, flags. */
  gbResult_t (*hostAlloc)(void** ptr, size_t bytes);
  gbResult_t (*hostFree)(void* ptr);

  gbResult_t (*streamCreate)(void** stream);
  gbResult_t (*streamDestroy)(void* stream);
  /* Waits for the stream; returns (and clears) the stream's first error. */
  gbResult_t (*streamSynchronize)(void* stream);

  /* Stream work, in stream order; each returns once enqueued.
   * stream NULL is the device's default stream. */
  gbResult_t (*copyAsync)(void* dst, const void* src, size_t bytes, void* stream);
  /* The stream sets flag->value = value. */
  gbResult_t (*flagWrite)(gbFlag_t* flag, uint64_t value, void* stream);
  /* For a flag array the stream writes often (the flight recorder's done
   * flags): flagsMap looks up once the address at which streams reach
   * flags[0] (flags from hostAlloc); flagWriteMapped is flagWrite without
   * the lookup, mapped being flag's such address: the array's plus its index
   * times sizeof(gbFlag_t). NULL where streams use host addresses (the host
   * device): use flagWrite. */
  gbResult_t (*flagsMap)(gbFlag_t* flags, void** mapped);
  gbResult_t (*flagWriteMapped)(gbFlag_t* flag, void* mapped, uint64_t value, void* stream);
  /* The stream waits until flag->value >= value. On the host device a flag
   * error becomes the stream's error; a GPU sees only the value, so whoever
   * sets an error also releases the value. */
  gbResult_t (*flagWait)(gbFlag_t* flag, uint64_t value, void* stream);
  /* The stream runs fn(arg) on a host thread, then freeArg(arg) (also when
   * the work is dropped after an earlier error). NULL where the device has no
   * host work (a real GPU). */
  gbResult_t (*launchHostFn)(void* stream, gbStreamFn_t fn, void* arg, void (*freeArg)(void*));
  /* Host memory made elsewhere (a shared segment, page aligned) made
   * reachable: page-locked and mapped, so copies to and from it run at full
   * speed and kernels read it; *devPtr is its address on the device. The
   * host device: *devPtr = ptr, nothing to do. */
  gbResult_t (*hostRegister)(void* ptr, size_t bytes, void** devPtr);
  gbResult_t (*hostUnregister)(void* ptr);
  /* The stream runs one reduction (gbReduceArgs_t). A GPU launches a kernel
   * loaded at run time (device/gpu/kernels); the host device folds with
   * gbReduceOrdered on its stream thread. */
  gbResult_t (*reduceAsync)(const gbReduceArgs_t* args, void* stream);
  /* The stream runs one encoding (gbEncodeArgs_t): a GPU launches the
   * encoding kernel, the host device runs gbWireEncode on its thread. */
  gbResult_t (*encodeAsync)(const gbEncodeArgs_t* args, void* stream);
  /* The stream runs one exchange (gbExchangeArgs_t): a GPU launches the
   * reduction kernel in its exchange mode; the host device runs it on its
   * stream thread. */
  gbResult_t (*exchangeAsync)(const gbExchangeArgs_t* args, void* stream);
  /* Waits for every stream of the device (teardown on a GPU, where no host
   * function tells when a communicator's stream work is done). NULL on the
   * host device, which counts finished work with launchHostFn instead. */
  gbResult_t (*deviceSynchronize)(void);
  /* This process's GPU: UUID and PCI bus id ("" when unknown) and index.
   * NULL on the host device. */
  void (*identify)(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index);
  /* 1 when this process's GPU work goes through an MPS server, so the
   * processes of one GPU run at once instead of time-slicing it. NULL: no. */
  int (*mps)(void);
} gbDeviceOps;

/* This process's device, chosen once: GPUBRIDGE_VENDOR set -> host device
 * simulating that vendor; else the host device as a CPU rank. */
gbResult_t gbDeviceGet(const gbDeviceOps** out);

/* The host device (also for tests). */
const gbDeviceOps* gbDeviceHostOps(void);

/* Stands in for a GPU that could not be opened, so the rank can still join
 * the rendezvous and every rank hears why (run kind real, vendor "unusable"). */
const gbDeviceOps* gbDeviceUnusableOps(void);

/* Waits on the host until flag->value >= value: spins briefly, then polls,
 * until the deadline (seconds from now) or *abortFlag. Returns gbSuccess,
 * the flag's error, gbTimeout, or gbRemoteError when aborted. */
gbResult_t gbFlagWaitHost(gbFlag_t* flag, uint64_t value, double timeoutSec,
                          const atomic_int* abortFlag);
/* gbFlagWaitHost's one look, without waiting: 1 when that wait would be
 * over now, *res saying how (gbSuccess, the flag's error, or gbRemoteError
 * when aborted); 0 while it would go on. */
int gbFlagTestHost(gbFlag_t* flag, uint64_t value, const atomic_int* abortFlag, gbResult_t* res);
/* How long a stream waits for flag: its timeoutSec plus the margin, or
 * fallbackSec (GPUBRIDGE_TIMEOUT's plus the margin) when its owner set none. */
double gbFlagStreamWaitSec(const gbFlag_t* flag, double fallbackSec);
/* Sets value (and error first, when nonzero) with release ordering, and
 * wakes host waiters; reads and writes nothing of *flag after the store of
 * value, so the waiter may free the flag as soon as it sees the value. */
void gbFlagSetHost(gbFlag_t* flag, uint64_t value, int error);

#endif
