// Low-latency (LL) two-rank exchange: every TP join as ONE kernel per rank, no events, no
// separate barrier: the readers poll the data itself, which saves a crossing. NCCL's LL protocol
// is the model.
//
// Lines. Values cross NVLink in 16-byte lines {v0, epoch, v1, epoch} written with one vector
// store into the peer's receive slots; the reader polls its OWN memory until both halves of the
// line carry the epoch it expects. Each {value, epoch} half is one single-copy-atomic 8-byte word,
// so no fence orders data and flag: seeing the flag is seeing the value.
//
// Chunks. A join is cut into chunks of kChunkLines lines, and each chunk is its own protocol: its
// own epoch, its own ack, its own slots, exchanged between the two ranks' twin blocks, the blocks
// that take chunk c on each rank (both ranks launch the same grid for a join, so the twins are
// well defined). No block ever waits for another block of its own grid.
//
// Slot reuse (the write-after-read hazard). A chunk's slots rotate over kLlDepth epochs. Before
// writing chunk c's slots for epoch e a sender waits until the peer's twin has COMPLETED epoch
// e - kLlDepth of chunk c (their last use): the twin stores `ack[c] = e` into the sender's state
// when it is done. Every LL join launches on both ranks (a rank with nothing to send or receive
// still runs and acks), so the ranks' per-chunk epochs advance in lockstep.
//
// The ack is a plain volatile store. It needs no release fence: all it publishes is "my reads of
// these slots are done", and every such read has returned (its flag was compared) before the
// block barrier that precedes the store.
//
// A local copy (broadcast's root, the gathers' own part) covers the same element indices as the
// exchange, so the exchanging thread makes it, after its send and before it polls.
//
// A profiled join times itself (`stamp`, two u64 in device memory): block 0 stores %globaltimer
// once the kernel ahead has finished (after griddepcontrol.wait: the moment the stream reached
// the join), and every block folds its exit time into stamp[1] with atomicMax. The timer only
// grows, so a slot reused two steps later needs no reset.
//
// Epochs live in device memory (advanced by each chunk's block), so graph replays stay paired.
// Waits are bounded by `spin_limit` SM clock ticks: a value that never arrives stores
// MEMRA_REFUSED_ENTRY into *err, a twin that never finished epoch e - kLlDepth stores
// MEMRA_REFUSED_EXIT (cu/kernels.h); that chunk's epoch is then NOT advanced and the link must be
// drained and reset.
//
// This kernel's speed follows its instruction shape closely; why each choice here was kept, and
// what was tried and dropped, is in docs/performance.md ("The LL kernel's shape"). Measure any
// change against its base (the ab-ll phase of scripts/gpu-session.sh).
//
// This header holds the protocol, shared by the two ways a join runs: one launch per join
// (cu/tp_ll.cu) and the eager path's persistent server (cu/tp_ll_server.cu). Both take chunk c
// of a join in order after chunk c of the join before, so they may alternate freely.
#pragma once

#include <stdint.h>

#include "cu/globaltimer.cuh"
#include "cu/kernels.h"  // MemraLlJobArgs, the refusal words
#include "cu/serial_epoch.cuh"

#ifdef MEMRA_LL_PHASE_TRACE
// Probe builds only (scripts/probes/ll-phase-probe.cu): per epoch (mod 128) and chunk (< 4), when
// thread 0 of the chunk's block passed each phase of a launched join, %globaltimer ns. The index
// is the epoch, so every op of a run must take the same chunks.
// Arrive: the block is resident (a launch with PDL may be, before the kernel ahead ends);
// Released: past griddepcontrol.wait; Sent: its epoch, ack and inputs came back and its line is
// stored to the peer; Received: its own line came; Synced: every thread's did; Done: the epoch
// and the ack are stored.
// The stamps stay in registers (Arrive and Released in shared memory, taken before the epoch is
// known) and are stored once the chunk is done: a store whose address needs the epoch, made
// earlier, would hold thread 0 until the epoch's load returned and so delay its input loads.
enum LlPhase { kPhaseArrive, kPhaseReleased, kPhaseSent, kPhaseReceived, kPhaseSynced, kPhaseDone, kPhases };
static __device__ unsigned long long g_llPhase[128][4][kPhases];
static __shared__ unsigned long long s_llStart[2];
struct LlPhaseStamps {
  unsigned long long sent = 0, received = 0, synced = 0;
};
#define LL_STAMPS LlPhaseStamps llStamps_
#define LL_STAMP(field) (llStamps_.field = GlobalTimerNs())
#define LL_PHASE_WRITE(e, c, first)                                 \
  do {                                                              \
    if (threadIdx.x == 0 && (c) < 4) {                              \
      unsigned long long* p_ = g_llPhase[(e) % 128][(c)];           \
      p_[kPhaseDone] = GlobalTimerNs();                             \
      p_[kPhaseSent] = llStamps_.sent;                              \
      p_[kPhaseReceived] = llStamps_.received;                      \
      p_[kPhaseSynced] = llStamps_.synced;                          \
      if (first) {                                                  \
        p_[kPhaseArrive] = s_llStart[0];                            \
        p_[kPhaseReleased] = s_llStart[1];                          \
      }                                                             \
    }                                                               \
  } while (0)
#else
#define LL_STAMPS ((void)0)
#define LL_STAMP(field) ((void)0)
#define LL_PHASE_WRITE(e, c, first) ((void)0)
#endif

namespace {

constexpr unsigned kChunkLines = 256;  // one line (two values) per thread of a block
constexpr unsigned kLlThreads = kChunkLines;
constexpr unsigned kMaxChunks = 8192;  // 4M values (16 MB) per join
constexpr unsigned kMaxGrid = 264;     // two blocks an SM; each loops over its chunks
constexpr unsigned kLlDepth = 4;       // a power of two: the slot set is e & (kLlDepth - 1)

// One per rank, zeroed before first use. `epoch` is this rank's; `ack` is written by the peer,
// in its own region so the peer's stores never share a cache line with our epochs.
struct LlState {
  unsigned epoch[kMaxChunks];
  unsigned ack[kMaxChunks];
};
static_assert(sizeof(LlState) == 65536, "LL state layout");
// rows x rowLen travels as 32-bit counts: llMaxValues must fit them (so no caller checks it).
static_assert(uint64_t(kMaxChunks) * kChunkLines * 2 <= 0xffffffffull, "one LL join's values fit 32 bits");

__device__ __forceinline__ unsigned LoadVolatile(const unsigned* p) {
  unsigned v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreVolatile(unsigned* p, unsigned v) {
  asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void StoreLine(uint4* line, float v0, float v1, unsigned e) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line),
               "r"(__float_as_uint(v0)), "r"(e), "r"(__float_as_uint(v1)), "r"(e)
               : "memory");
}

__device__ __forceinline__ uint4 LoadLine(const uint4* line) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(line)
               : "memory");
  return v;
}

struct LlJob {
  int reduce;            // 1: recvDst[i] = rank-order sum of sendSrc[i] and the peer's value
  unsigned rows, rowLen;
  const float* sendSrc;  // rows x rowLen, dense; null: sends nothing
  const float* localSrc; // rows x rowLen, dense, copied to localDst; null: no local copy
  float* localDst;
  float* recvDst;        // null: receives nothing
  uint64_t dstStride;    // row stride of localDst and recvDst
  uint4* selfRecv;       // kLlDepth x (cap / 2) lines
  uint4* peerRecv;
  unsigned capLines;     // lines per epoch's slot set
  LlState* self;
  LlState* peer;
  int rank;
  int* err;
  long long spinLimit;
  unsigned long long* stamp;  // null: not profiled; else [start, end] in ns (see above)
};

// Element i of a rows x rowLen block, dense, into a destination whose rows are dstStride apart.
// One row (every t = 1 join) is the identity: the integer division by a run-time rowLen is a
// chain of dependent instructions on the path to the receive's stores, so it is skipped there.
__device__ __forceinline__ uint64_t Strided(const LlJob& j, unsigned i) {
  if (j.rows == 1) return i;
  const unsigned r = i / j.rowLen;
  return uint64_t(r) * j.dstStride + (i - r * j.rowLen);
}

// Spin (bounded) until the twin has finished epoch `need` of this chunk. False: refused.
__device__ bool AwaitAck(const LlJob& j, unsigned c, unsigned ack, unsigned need) {
  const long long t0 = clock64();
  while (!Reached(ack, need)) {
    if (clock64() - t0 > j.spinLimit) {
      atomicCAS(j.err, 0, MEMRA_REFUSED_EXIT);
      return false;
    }
    ack = LoadVolatile(&j.self->ack[c]);
  }
  return true;
}

// Spin (bounded) until both halves of the line carry epoch e. False: refused. One load in flight
// at a time (two were slower: docs/performance.md, "The LL kernel's shape").
__device__ bool AwaitLine(const LlJob& j, const uint4* slot, uint4& got, unsigned e) {
  const long long t0 = clock64();
  while (got.y != e || got.w != e) {
    if (clock64() - t0 > j.spinLimit) {
      atomicCAS(j.err, 0, MEMRA_REFUSED_ENTRY);
      return false;
    }
    got = LoadLine(slot);
  }
  return true;
}

constexpr uint64_t kLlMaxValues = uint64_t(kMaxChunks) * kChunkLines * 2;

// Chunks of kChunkLines lines (two values a line) that `total` values take.
inline uint64_t LlChunkCount(uint64_t total) { return ((total + 1) / 2 + kChunkLines - 1) / kChunkLines; }

// The job from the launchers' arguments; false where no LL join can take it: more values than
// one join may move or than `cap` slots per epoch hold, or a cap that is odd (slots travel in
// 16-byte pairs) or over 32 bits.
inline bool MakeLlJob(const MemraLlJobArgs& a, LlJob* j) {
  const uint64_t total = a.rows * a.row_len;
  if (total > kLlMaxValues || (a.cap & 1) != 0 || a.cap > 0xffffffffull) return false;
  if ((a.send_src != nullptr || a.recv_dst != nullptr) && total > a.cap) return false;
  *j = LlJob{a.reduce, static_cast<unsigned>(a.rows), static_cast<unsigned>(a.row_len), a.send_src,
             a.local_src, a.local_dst, a.recv_dst, a.dst_stride, static_cast<uint4*>(a.self_recv),
             static_cast<uint4*>(a.peer_recv), static_cast<unsigned>(a.cap / 2),
             static_cast<LlState*>(a.self_state), static_cast<LlState*>(a.peer_state), a.rank, a.err,
             a.spin_limit, a.stamp};
  return true;
}

// A join's input value: at L2 in the LL server's persistent grid, plainly in a launched join (why:
// the loads in LlChunks).
template <bool kResident>
__device__ __forceinline__ float LoadSource(const float* p) {
  return kResident ? __ldcg(p) : *p;
}

// Chunks first, first + stride, ... of job j, by one block of kLlThreads threads. False once a
// wait was refused: the refusal word is written and that chunk's epoch is not advanced.
// kResident: called from the LL server's persistent grid.
template <bool kResident>
__device__ __forceinline__ bool LlChunks(const LlJob& j, unsigned first, unsigned stride) {
  const unsigned total = j.rows * j.rowLen;
  const unsigned lines = (total + 1) / 2;  // an odd count's last line carries one value
  const unsigned chunks = (lines + kChunkLines - 1) / kChunkLines;
  // This rank's values, loaded once per line: sent, copied locally when the copy's source is the
  // send buffer, and in a reduce added to the peer's.
  const float* src = j.sendSrc;
  const float* copySrc = j.localSrc == src ? nullptr : j.localSrc;

  for (unsigned c = first; c < chunks; c += stride) {
    // Independent loads first, all in flight at once: the chunk's epoch (written by the block
    // that last took it, in an earlier kernel or an earlier job of the server), the twin's ack,
    // this thread's values. In the server (kResident) none of them may come from this SM's L1:
    // its grid outlives the kernels that write them (a launched join's epochs, the producer's
    // values), so the epoch is a volatile load and the values are loaded at L2 (ld.global.cg). A
    // launched join starts after those kernels ended, so its plain loads are fresh (and faster:
    // docs/performance.md).
    const unsigned e = (kResident ? LoadVolatile(&j.self->epoch[c]) : j.self->epoch[c]) + 1;
    LL_STAMPS;
    const unsigned ack = j.sendSrc != nullptr ? LoadVolatile(&j.self->ack[c]) : 0;
    const unsigned line = c * kChunkLines + threadIdx.x;
    const bool has = line < lines;
    const unsigned i0 = 2 * line, i1 = i0 + 1;
    const float mine0 = has && src != nullptr ? LoadSource<kResident>(&src[i0]) : 0.f;
    const float mine1 = has && src != nullptr && i1 < total ? LoadSource<kResident>(&src[i1]) : 0.f;
    const float copy0 = has && copySrc != nullptr ? LoadSource<kResident>(&copySrc[i0]) : mine0;
    const float copy1 = has && copySrc != nullptr && i1 < total ? LoadSource<kResident>(&copySrc[i1]) : mine1;
    const unsigned slot = (e & (kLlDepth - 1)) * j.capLines + line;
    bool ok = true;

    if (j.sendSrc != nullptr) {
      ok = AwaitAck(j, c, ack, e - kLlDepth);
      if (ok && has) StoreLine(&j.peerRecv[slot], mine0, mine1, e);
      LL_STAMP(sent);
    }
    // The local copy waits on nothing: stored once the line is on its way and before the poll,
    // so it overlaps the crossing.
    if (has && j.localSrc != nullptr) {
      j.localDst[Strided(j, i0)] = copy0;
      if (i1 < total) j.localDst[Strided(j, i1)] = copy1;
    }
    if (ok && has && j.recvDst != nullptr) {
      uint4 got = LoadLine(&j.selfRecv[slot]);
      ok = AwaitLine(j, &j.selfRecv[slot], got, e);
      LL_STAMP(received);
      if (ok) {
        const float theirs0 = __uint_as_float(got.x), theirs1 = __uint_as_float(got.z);
        if (j.reduce) {
          // Global rank order: rank 0's operand first on both ranks, so both hold the same bits.
          // mine0/mine1 were read before recvDst (which may alias sendSrc) is written.
          j.recvDst[i0] = j.rank == 0 ? mine0 + theirs0 : theirs0 + mine0;
          if (i1 < total) j.recvDst[i1] = j.rank == 0 ? mine1 + theirs1 : theirs1 + mine1;
        } else {
          j.recvDst[Strided(j, i0)] = theirs0;
          if (i1 < total) j.recvDst[Strided(j, i1)] = theirs1;
        }
      }
    }

    // Publish the chunk's epoch, locally for its next use and as the ack that lets the twin
    // reuse this slot set, once every thread's reads of it are done (the barrier gathers them;
    // each read already returned its flag). A refused chunk publishes nothing and ends the job.
    if (__syncthreads_or(!ok)) return false;
    LL_STAMP(synced);
    if (threadIdx.x == 0) {
      j.self->epoch[c] = e;
      StoreVolatile(&j.peer->ack[c], e);
    }
    LL_PHASE_WRITE(e, c, c == first && !kResident);
  }
  return true;
}

}  // namespace
