/* plan/p2p.c: a send/recv group's schedule (gbPlanP2pBuild), on island
 * layouts given as sizes. The expected values are the rules written out
 * here, apart from plan/:
 * - a message goes through the island when its peer is in my island and
 *   the policy is not flat; every other message through the host;
 * - the host part takes the channels when the world has them (channelBytes
 *   > 0, at most 8 ranks), whatever the group holds (so two ranks never
 *   disagree); otherwise the bulk buffer, each message at a 64-byte aligned
 *   place, one host step;
 * - on the channels my messages to myself are one stream each way too, not
 *   chunked: a receive gets the bytes at its offsets of the send stream;
 * - on the channels, a peer's host messages one way are one stream in the
 *   group's order, cut into chunks of channelBytes; nchunks is the most of
 *   any stream; depth is min(stagingSlots, channelDepth); host steps are the
 *   chunks of every stream both ways. */
#include <stdio.h>
#include <string.h>

#include "plan/p2p.h"

#include "unit/check.h"
#include "unit/plan_layout.h"

/* msgs under policy; channels of 1000-byte chunks, 6 deep; 4 staging slots. */
static gbPlanP2pInput_t input(const layout_t* l, int policy, const gbPlanP2pMsg_t* msgs, int n) {
  gbPlanP2pInput_t in;
  memset(&in, 0, sizeof(in));
  in.topo = &l->topo;
  in.policy = policy;
  in.msgs = msgs;
  in.nmsgs = n;
  in.channelBytes = 1000;
  in.channelDepth = 6;
  in.stagingSlots = 4;
  return in;
}

static gbPlanP2p_t build(const gbPlanP2pInput_t* in) {
  gbPlanP2p_t p;
  gbResult_t res = gbPlanP2pBuild(in, &p);
  CHECK(res == gbSuccess, "gbPlanP2pBuild: %s", gbGetLastError(NULL));
  return p;
}

static int checked;

/* 2+2, me rank 1 (island 0 holds ranks 0 and 1). */
static void checkRouting(void) {
  layout_t l;
  makeLayout(&l, (const int[]){2, 2}, 2, 1);
  const gbPlanP2pMsg_t msgs[] = {{0, 1, 100}, {1, 0, 100}, {2, 1, 100}, {3, 0, 100}, {0, 0, 100}};
  static const int island[] = {1, 1, 0, 0, 1};
  static const int policies[] = {gbPolicyHierarchical, gbPolicyAuto, gbPolicyNative};
  for (size_t k = 0; k < sizeof(policies) / sizeof(policies[0]); k++) {
    gbPlanP2pInput_t in = input(&l, policies[k], msgs, 5);
    gbPlanP2p_t p = build(&in);
    for (int i = 0; i < 5; i++)
      CHECK(p.ops[i].viaIsland == island[i], "policy %d, message %d to/from %d: via island %d, expected %d",
            policies[k], i, msgs[i].peer, p.ops[i].viaIsland, island[i]);
    CHECK(p.nisland == 3 && p.nhost == 2, "policy %d: 3 via island, 2 via host; got %d, %d", policies[k],
          p.nisland, p.nhost);
    /* The message to myself went through the island: the channels still fit. */
    CHECK(p.channels == 1, "policy %d: channels (self only via island)", policies[k]);
    gbPlanP2pFree(&p);
    checked += 7;
  }

  /* Flat: everything through the host, including the message to myself. */
  gbPlanP2pInput_t in = input(&l, gbPolicyFlat, msgs, 5);
  gbPlanP2p_t p = build(&in);
  for (int i = 0; i < 5; i++) CHECK(p.ops[i].viaIsland == 0, "flat, message %d: via host", i);
  CHECK(p.nisland == 0 && p.nhost == 5, "flat: 0 via island, 5 via host; got %d, %d", p.nisland, p.nhost);
  CHECK(p.channels == 1, "flat with a message to myself: channels all the same");
  gbPlanP2pFree(&p);
  checked += 7;
}

/* The bulk path: no channels in the world, or too many ranks. */
static void checkBulk(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1, 1}, 3, 0);
  const gbPlanP2pMsg_t msgs[] = {{1, 1, 100}, {0, 1, 64}, {0, 0, 64}, {2, 0, 0}, {2, 1, 65}};
  gbPlanP2pInput_t in = input(&l, gbPolicyFlat, msgs, 5);
  in.channelBytes = 0;
  gbPlanP2p_t p = build(&in);
  CHECK(p.channels == 0, "no channels: bulk");
  static const size_t at[] = {0, 128, 192, 256, 256};
  for (int i = 0; i < 5; i++)
    CHECK(p.ops[i].bulkAt == at[i], "bulk message %d at %zu, got %zu", i, at[i], p.ops[i].bulkAt);
  CHECK(p.bulkBytes == 384, "bulk buffer 128 + 64 + 64 + 0 + 128 = 384 bytes, got %zu", p.bulkBytes);
  CHECK(p.hostSteps == 1 && p.nchunks == 1 && p.depth == 1, "bulk: one host step (%zu), one chunk (%zu)",
        p.hostSteps, p.nchunks);
  size_t off, len;
  gbPlanP2pChunk(&p, 1, 1, 0, &off, &len);
  CHECK(len == 0, "bulk: no channel chunks");
  gbPlanP2pFree(&p);
  checked += 9;

  /* With channels the same group takes them; my own stream is copied, not chunked. */
  in = input(&l, gbPolicyFlat, msgs, 5);
  p = build(&in);
  CHECK(p.channels == 1, "channels, a message to myself included");
  size_t from, into;
  CHECK(gbPlanP2pSelf(&p, 2, 1, &from, &into) == 64 && from == 0 && into == 0, "my 64 bytes to myself, whole");
  CHECK(gbPlanP2pSelf(&p, 1, 2, &from, &into) == 0, "a send is no receive");
  CHECK(gbPlanP2pSelf(&p, 2, 0, &from, &into) == 0, "a send to rank 1 is not mine");
  gbPlanP2pChunk(&p, 0, 1, 0, &off, &len);
  CHECK(len == 0, "no chunk of my own stream");
  /* 1 + 1 chunks to and from rank 1 / 2 (100 B out to 1, 65 B out to 2, 0 B in from 2) */
  CHECK(p.hostSteps == 2 && p.nchunks == 1, "host steps 2 (%zu), chunks 1 (%zu)", p.hostSteps, p.nchunks);
  gbPlanP2pFree(&p);
  checked += 6;

  /* Two sends to myself (40 + 24 bytes) into one receive of 64, and one of 64 into two of 30 + 34. */
  const gbPlanP2pMsg_t split[] = {{0, 1, 40}, {0, 0, 64}, {0, 1, 24}, {0, 1, 64}, {0, 0, 30}, {0, 0, 34}};
  in = input(&l, gbPolicyFlat, split, 6);
  p = build(&in);
  /* Send stream: [0,40) op 0, [40,64) op 2, [64,128) op 3. Receive stream: [0,64) op 1, [64,94) op 4, [94,128) op 5. */
  CHECK(gbPlanP2pSelf(&p, 1, 0, &from, &into) == 40 && from == 0 && into == 0, "op 0 into op 1 at 0");
  CHECK(gbPlanP2pSelf(&p, 1, 2, &from, &into) == 24 && from == 0 && into == 40, "op 2 into op 1 at 40");
  CHECK(gbPlanP2pSelf(&p, 4, 3, &from, &into) == 30 && from == 0 && into == 0, "op 3's first 30 into op 4");
  CHECK(gbPlanP2pSelf(&p, 5, 3, &from, &into) == 34 && from == 30 && into == 0, "op 3's last 34 into op 5");
  CHECK(gbPlanP2pSelf(&p, 4, 0, &from, &into) == 0, "op 0 does not reach op 4");
  CHECK(p.hostSteps == 0 && p.nchunks == 0, "only myself: no host step, no chunk");
  gbPlanP2pFree(&p);
  checked += 6;

  /* No channels in the world. */
  in.channelBytes = 0;
  p = build(&in);
  CHECK(p.channels == 0 && p.hostSteps == 1, "no channels: bulk, one host step");
  gbPlanP2pFree(&p);

  /* A world larger than the channels' members. */
  layout_t big;
  makeLayout(&big, (const int[]){5, 5}, 2, 0);
  const gbPlanP2pMsg_t far[] = {{7, 1, 10}};
  in = input(&big, gbPolicyHierarchical, far, 1);
  p = build(&in);
  CHECK(p.channels == 0 && p.nhost == 1 && p.hostSteps == 1, "10 ranks: bulk");
  gbPlanP2pFree(&p);

  /* Only island messages: the host part has nothing to do. */
  layout_t two;
  makeLayout(&two, (const int[]){2, 1}, 2, 0);
  const gbPlanP2pMsg_t near[] = {{1, 1, 5000}, {1, 0, 5000}};
  in = input(&two, gbPolicyHierarchical, near, 2);
  in.channelBytes = 0;
  p = build(&in);
  CHECK(p.nhost == 0 && p.hostSteps == 0 && p.bulkBytes == 0, "island only, bulk: no host step");
  gbPlanP2pFree(&p);
  in.channelBytes = 1000;
  p = build(&in);
  CHECK(p.nhost == 0 && p.hostSteps == 0 && p.nchunks == 0 && p.sendBytes[1] == 0 && p.recvBytes[1] == 0,
        "island only, channels: no stream, no host step");
  gbPlanP2pFree(&p);
  checked += 5;
}

/* Two sends to rank 1 form one stream of 1500 + 700 bytes in 1000-byte chunks. */
static void checkStream(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1, 1}, 3, 0);
  const gbPlanP2pMsg_t msgs[] = {{1, 1, 1500}, {2, 0, 10}, {1, 1, 700}};
  gbPlanP2pInput_t in = input(&l, gbPolicyHierarchical, msgs, 3);
  gbPlanP2p_t p = build(&in);
  CHECK(p.channels == 1 && p.chunkBytes == 1000, "channels of 1000-byte chunks");
  CHECK(p.sendBytes[1] == 2200 && p.recvBytes[1] == 0, "rank 1: 2200 bytes out, 0 in; got %zu, %zu", p.sendBytes[1],
        p.recvBytes[1]);
  CHECK(p.recvBytes[2] == 10 && p.sendBytes[2] == 0, "rank 2: 10 bytes in; got %zu", p.recvBytes[2]);
  CHECK(p.ops[2].streamAt == 1500, "the second send starts at 1500 of the stream, got %zu", p.ops[2].streamAt);
  CHECK(p.nchunks == 3, "ceil(2200 / 1000) = 3 chunks, got %zu", p.nchunks);

  static const size_t chunkLen[] = {1000, 1000, 200, 0};
  for (size_t k = 0; k < 4; k++) {
    size_t off, len;
    gbPlanP2pChunk(&p, 1, 1, k, &off, &len);
    CHECK(len == chunkLen[k] && (len == 0 || off == k * 1000), "chunk %zu: [%zu, +%zu), got [%zu, +%zu)", k,
          k * 1000, chunkLen[k], off, len);
  }
  /* Pieces: chunk 0 is 1000 of the first send; chunk 1 its last 500, then
   * the second's first 500; chunk 2 the second's last 200. */
  static const struct {
    int op;
    size_t k, n, from, into;
  } pieces[] = {{0, 0, 1000, 0, 0}, {2, 0, 0, 0, 0},   {0, 1, 500, 1000, 0}, {2, 1, 500, 0, 500},
                {0, 2, 0, 0, 0},    {2, 2, 200, 500, 0}, {2, 3, 0, 0, 0},     {1, 0, 10, 0, 0}};
  for (size_t j = 0; j < sizeof(pieces) / sizeof(pieces[0]); j++) {
    size_t from, into, n = gbPlanP2pPiece(&p, pieces[j].op, pieces[j].k, &from, &into);
    CHECK(n == pieces[j].n && (n == 0 || (from == pieces[j].from && into == pieces[j].into)),
          "message %d in chunk %zu: %zu bytes from %zu at %zu; got %zu from %zu at %zu", pieces[j].op, pieces[j].k,
          pieces[j].n, pieces[j].from, pieces[j].into, n, from, into);
  }
  /* Listed once, chunk by chunk: 2 pieces in chunk 0 (the send's 1000, the
   * receive's 10), 2 in chunk 1, 1 in chunk 2. */
  CHECK(p.chunkPieces[0] == 0 && p.chunkPieces[1] == 2 && p.chunkPieces[2] == 4 && p.chunkPieces[3] == 5,
        "pieces per chunk 2, 2, 1: got starts %zu %zu %zu %zu", p.chunkPieces[0], p.chunkPieces[1], p.chunkPieces[2],
        p.chunkPieces[3]);
  gbPlanP2pFree(&p);
  checked += 18;
}

/* nchunks, depth and host steps on 4 islands of one rank, me rank 3. */
static void checkCounts(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1, 1, 1}, 4, 3);
  /* rank 0: 2500 out (3 chunks), 1000 in (1); rank 1: 5001 in (6); rank 2: 1 out (1). */
  const gbPlanP2pMsg_t msgs[] = {{0, 1, 2000}, {1, 0, 5001}, {0, 0, 1000}, {2, 1, 1}, {0, 1, 500}};
  gbPlanP2pInput_t in = input(&l, gbPolicyFlat, msgs, 5);
  static const struct {
    int slots, channelDepth, depth;
  } depths[] = {{4, 6, 4}, {8, 6, 6}, {6, 6, 6}, {1, 3, 1}};
  for (size_t k = 0; k < sizeof(depths) / sizeof(depths[0]); k++) {
    in.stagingSlots = depths[k].slots;
    in.channelDepth = depths[k].channelDepth;
    gbPlanP2p_t p = build(&in);
    CHECK(p.channels == 1, "channels");
    CHECK(p.nchunks == 6, "the most chunks of any stream: 6 (5001 in from rank 1), got %zu", p.nchunks);
    CHECK(p.hostSteps == 11, "host steps 3 + 1 + 6 + 1 = 11, got %zu", p.hostSteps);
    CHECK(p.depth == depths[k].depth, "%d staging slots, channels %d deep: depth %d, got %d", depths[k].slots,
          depths[k].channelDepth, depths[k].depth, p.depth);
    gbPlanP2pFree(&p);
    checked += 4;
  }
}

/* Zero-byte messages add no chunks. */
static void checkEmpty(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1}, 2, 0);
  const gbPlanP2pMsg_t none[] = {{1, 1, 0}, {1, 0, 0}};
  gbPlanP2pInput_t in = input(&l, gbPolicyFlat, none, 2);
  gbPlanP2p_t p = build(&in);
  CHECK(p.channels == 1 && p.nhost == 2, "two host messages on the channels");
  CHECK(p.nchunks == 0 && p.hostSteps == 0, "zero bytes: no chunks (%zu), no host steps (%zu)", p.nchunks,
        p.hostSteps);
  size_t off, len;
  gbPlanP2pChunk(&p, 1, 1, 0, &off, &len);
  CHECK(len == 0, "zero bytes: no chunk 0");
  gbPlanP2pFree(&p);

  const gbPlanP2pMsg_t some[] = {{1, 1, 0}, {1, 1, 1000}, {1, 1, 0}, {1, 0, 0}};
  in = input(&l, gbPolicyFlat, some, 4);
  p = build(&in);
  CHECK(p.nchunks == 1 && p.hostSteps == 1, "1000 bytes out between empty sends: 1 chunk, 1 step; got %zu, %zu",
        p.nchunks, p.hostSteps);
  size_t from, into;
  CHECK(gbPlanP2pPiece(&p, 0, 0, &from, &into) == 0 && gbPlanP2pPiece(&p, 2, 0, &from, &into) == 0 &&
            gbPlanP2pPiece(&p, 1, 0, &from, &into) == 1000,
        "only the 1000-byte send has a piece of chunk 0");
  gbPlanP2pFree(&p);

  /* An empty group. */
  in = input(&l, gbPolicyHierarchical, NULL, 0);
  p = build(&in);
  CHECK(p.nisland == 0 && p.nhost == 0 && p.hostSteps == 0 && p.nchunks == 0, "an empty group: nothing");
  gbPlanP2pFree(&p);
  checked += 6;
}

int main(void) {
  checkRouting();
  checkBulk();
  checkStream();
  checkCounts();
  checkEmpty();
  if (failures) {
    fprintf(stderr, "%d of %d checks failed\n", failures, checked);
    return 1;
  }
  printf("%d checks passed\n", checked);
  return 0;
}
