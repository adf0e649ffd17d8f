// Low-latency (LL) two-rank exchange: every TP join as ONE kernel per rank, no events, no
// separate barrier. PERF.md: "a design whose readers poll the data itself, instead of a separate
// barrier, saves a crossing". NCCL's LL protocol is the model.
//
// Values cross NVLink in 16-byte lines {v0, epoch, v1, epoch} written with one vector store into
// the peer's receive slots; the reader polls its OWN memory until both halves of the line carry
// the epoch it expects. Each {value, epoch} half is one single-copy-atomic 8-byte word, so no
// fence orders data and flag: seeing the flag is seeing the value. One crossing per join.
//
// Receive slots rotate over kLlDepth epochs. Before writing the slots of epoch e a sender waits
// until the peer has COMPLETED epoch e - kLlDepth (their last use): the peer's last block stores
// `ack = e` into the sender's state when an epoch is done. With a depth of two (the first
// version) a one-way join (broadcast, gather) ran at one ack round trip per two joins; four lets
// the sender run ahead. Every LL join launches on both ranks (a rank with nothing to send or
// receive still runs and acks), so the ranks' epochs advance in lockstep.
//
// Latency, not bandwidth, is what a TP join pays for, so the kernel is written to put as few
// dependent memory trips as possible on its path (measured 2026-11-30, notes/perf.md): every
// thread issues its epoch, ack and source loads together; a thread's receive loads are all in
// flight before it polls any of them; and the ack is a plain volatile store. It needs no release
// fence: the only thing it publishes is "my reads of these slots are done", and every such read
// has returned (its flag was compared) before the block barrier that precedes the store. A
// system-scope release there waited for this rank's own NVLink stores to be acknowledged.
//
// The epoch lives in device memory (LlState.epoch, advanced by the last block of each launch),
// so graph replays stay paired. Waits are bounded by `spin_limit` SM clock ticks: a value that
// never arrives stores 40043 into *err, a peer that never finished epoch e - kLlDepth stores
// 40044; the epoch is then NOT advanced and the link must be drained and reset.
#include <stdint.h>

#include "cu/kernels.h"

namespace {

constexpr unsigned kLlThreads = 1024;
constexpr unsigned kLlMaxBlocks = 132;
constexpr unsigned kLlDepth = 4;  // a power of two: the slot set is e & (kLlDepth - 1)
constexpr unsigned kLinesPerThread = 2;  // lines in flight per thread before it polls
constexpr int kRefusedData = 40043;
constexpr int kRefusedAck = 40044;

// One per rank, zeroed before first use. `epoch` and `done` are this rank's; `ack` is written by
// the peer (its own 128-byte line, so the peer's store never shares a line with our counters).
struct LlState {
  unsigned epoch;
  unsigned done;
  unsigned pad0[30];
  unsigned ack;
  unsigned pad1[31];
};
static_assert(sizeof(LlState) == 256, "LL state layout");

__device__ __forceinline__ bool Reached(unsigned flag, unsigned e) {
  return static_cast<int>(flag - e) >= 0;
}

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
  int reduce;           // 1: recvDst[i] = rank-order sum of sendSrc[i] and the peer's value
  unsigned rows, rowLen;
  const float* sendSrc;  // rows x rowLen, dense; null: sends nothing
  const float* localSrc; // rows x rowLen, dense, copied to localDst; null: no local copy
  float* localDst;
  float* recvDst;        // null: receives nothing
  uint64_t dstStride;    // row stride of localDst and recvDst
  uint4* selfRecv;       // kLlDepth x (cap / 2) lines
  uint4* peerRecv;
  unsigned cap;          // values per epoch's slot set (even)
  LlState* self;
  LlState* peer;
  int rank;
  int* err;
  long long spinLimit;
};

// Element i of a rows x rowLen block, dense, into a destination whose rows are dstStride apart.
__device__ __forceinline__ uint64_t Strided(const LlJob& j, unsigned i) {
  const unsigned r = i / j.rowLen;
  return uint64_t(r) * j.dstStride + (i - r * j.rowLen);
}

__global__ void __launch_bounds__(kLlThreads) ll_exchange(LlJob j) {
  __shared__ int refused;
  if (threadIdx.x == 0) refused = 0;
  // Independent loads first, all in flight at once: the epoch (the previous kernel on this
  // stream wrote it), the peer's ack, and below, this thread's source values.
  const unsigned e = j.self->epoch + 1;
  unsigned ack = j.sendSrc != nullptr ? LoadVolatile(&j.self->ack) : 0;
  const unsigned total = j.rows * j.rowLen;
  const unsigned lines = (total + 1) / 2;  // an odd count's last line carries one value
  const unsigned set = (e & (kLlDepth - 1)) * (j.cap / 2);
  const unsigned stride = gridDim.x * blockDim.x;
  bool failed = false;
  __syncthreads();  // `refused` initialised before any thread can set it

  // This rank's values, loaded once per line: sent, copied locally (broadcast and all-gather copy
  // the very values they send) and, in a reduce, added to the peer's.
  const float* src = j.sendSrc != nullptr ? j.sendSrc : j.localSrc;
  bool acked = j.sendSrc == nullptr;
  for (unsigned first = blockIdx.x * blockDim.x + threadIdx.x; first < lines && !failed;
       first += stride * kLinesPerThread) {
    float mine[kLinesPerThread][2];
    unsigned idx[kLinesPerThread];
#pragma unroll
    for (unsigned k = 0; k < kLinesPerThread; k++) {
      idx[k] = first + k * stride;
      const unsigned i = 2 * idx[k];
      mine[k][0] = src != nullptr && i < total ? src[i] : 0.f;
      mine[k][1] = src != nullptr && i + 1 < total ? src[i + 1] : 0.f;
    }

    if (!acked) {
      // The peer must have finished epoch e - kLlDepth, the last one that used this slot set.
      const long long t0 = clock64();
      while (!Reached(ack, e - kLlDepth)) {
        if (clock64() - t0 > j.spinLimit) {
          atomicCAS(j.err, 0, kRefusedAck);
          failed = true;
          break;
        }
        ack = LoadVolatile(&j.self->ack);
      }
      if (failed) break;
      acked = true;
    }
    if (j.sendSrc != nullptr) {
#pragma unroll
      for (unsigned k = 0; k < kLinesPerThread; k++) {
        if (idx[k] < lines) StoreLine(&j.peerRecv[set + idx[k]], mine[k][0], mine[k][1], e);
      }
    }

    // The local copy waits on nothing: done after the stores are on their way, before polling.
    if (j.localSrc != nullptr) {
#pragma unroll
      for (unsigned k = 0; k < kLinesPerThread; k++) {
#pragma unroll
        for (unsigned h = 0; h < 2; h++) {
          const unsigned i = 2 * idx[k] + h;
          if (idx[k] >= lines || i >= total) continue;
          j.localDst[Strided(j, i)] = j.localSrc == src ? mine[k][h] : j.localSrc[i];
        }
      }
    }

    if (j.recvDst == nullptr) continue;
    uint4 got[kLinesPerThread];
#pragma unroll
    for (unsigned k = 0; k < kLinesPerThread; k++) {
      if (idx[k] < lines) got[k] = LoadLine(&j.selfRecv[set + idx[k]]);
    }
    const long long t0 = clock64();
#pragma unroll
    for (unsigned k = 0; k < kLinesPerThread; k++) {
      if (idx[k] >= lines) continue;
      while (got[k].y != e || got[k].w != e) {
        if (clock64() - t0 > j.spinLimit) {
          atomicCAS(j.err, 0, kRefusedData);
          failed = true;
          break;
        }
        got[k] = LoadLine(&j.selfRecv[set + idx[k]]);
      }
      if (failed) break;
      const float theirs[2] = {__uint_as_float(got[k].x), __uint_as_float(got[k].z)};
#pragma unroll
      for (unsigned h = 0; h < 2; h++) {
        const unsigned i = 2 * idx[k] + h;
        if (i >= total) break;
        if (j.reduce) {
          // Global rank order: rank 0's operand first on both ranks, so both hold the same bits.
          // mine[] was read before recvDst (which may alias sendSrc) is written.
          j.recvDst[i] = j.rank == 0 ? mine[k][h] + theirs[h] : theirs[h] + mine[k][h];
        } else {
          j.recvDst[Strided(j, i)] = theirs[h];
        }
      }
    }
  }

  // The last block to finish publishes the epoch: locally for the next launch, and as the ack
  // that lets the peer reuse this slot set. Each block's count follows its threads' reads
  // (gathered by the barrier; every read already returned its flag), so the block that sees the
  // full count knows every read of this epoch is done. A single block (up to 4,096 values: every
  // TP join of the bench model) needs no count at all.
  if (failed) refused = 1;
  __syncthreads();
  if (threadIdx.x == 0 && !refused) {
    bool last = gridDim.x == 1;
    if (!last) {
      __threadfence();
      last = atomicAdd(&j.self->done, 1u) == gridDim.x - 1;
      if (last) j.self->done = 0;
    }
    if (last) {
      j.self->epoch = e;
      StoreVolatile(&j.peer->ack, e);
    }
  }
}

}  // namespace

extern "C" size_t memra_tp_ll_state_bytes(void) { return sizeof(LlState); }
extern "C" unsigned memra_tp_ll_depth(void) { return kLlDepth; }

extern "C" cudaError_t memra_tp_ll_exchange(int reduce, uint64_t rows, uint64_t rowLen,
                                            const float* sendSrc, const float* localSrc,
                                            float* localDst, float* recvDst, uint64_t dstStride,
                                            void* selfRecv, void* peerRecv, uint64_t cap,
                                            void* selfState, void* peerState, int rank, int* err,
                                            long long spinLimit, cudaStream_t stream) {
  const uint64_t total = rows * rowLen;
  if (total > 0xffffffffull || (cap & 1) != 0 || cap > 0xffffffffull) return cudaErrorInvalidValue;
  if ((sendSrc != nullptr || recvDst != nullptr) && total > cap) return cudaErrorInvalidValue;
  // One thread per line of two values: a TP join (4-16 KB) runs as one block and publishes its
  // epoch without the cross-block count; large joins give each thread kLinesPerThread lines.
  const uint64_t lines = (total + 1) / 2;
  uint64_t blocks = (lines + kLlThreads * kLinesPerThread - 1) / (kLlThreads * kLinesPerThread);
  if (blocks < 1) blocks = 1;
  if (blocks > kLlMaxBlocks) blocks = kLlMaxBlocks;
  LlJob j{reduce, static_cast<unsigned>(rows), static_cast<unsigned>(rowLen), sendSrc, localSrc,
          localDst, recvDst, dstStride, static_cast<uint4*>(selfRecv),
          static_cast<uint4*>(peerRecv), static_cast<unsigned>(cap),
          static_cast<LlState*>(selfState), static_cast<LlState*>(peerState), rank, err,
          spinLimit};
  ll_exchange<<<static_cast<unsigned>(blocks), kLlThreads, 0, stream>>>(j);
  return cudaGetLastError();
}
