// Low-latency (LL) two-rank exchange: every TP join as ONE kernel per rank, no events, no
// separate barrier. PERF.md: "a design whose readers poll the data itself, instead of a separate
// barrier, saves a crossing". NCCL's LL protocol is the model.
//
// Each value crosses NVLink as one 8-byte store {value bits, epoch} into the peer's receive
// buffer; the reader polls its OWN memory until the slot carries the epoch it expects. Data and
// flag share one single-copy-atomic word, so no fence orders them: seeing the flag is seeing the
// value. One crossing per join instead of the barrier's two or the events' two.
//
// Receive buffers are double-buffered by epoch parity. Before writing slot parity p at epoch e a
// sender waits until the peer has COMPLETED epoch e - 2 (the last use of parity p): the peer's
// last block stores `ack = e` into the sender's state when an epoch is done, after every block's
// reads. Every LL join launches on both ranks (a rank with nothing to send or receive still runs
// and acks), so the two ranks' epochs advance in lockstep and one counter per rank suffices.
//
// The epoch lives in device memory (LlState.epoch, advanced by the last block of each launch),
// so graph replays stay paired. Waits are bounded by `spin_limit` SM clock ticks: a value that
// never arrives stores 40043 into *err, a peer that never finished the epoch before last stores
// 40044; the epoch is then NOT advanced and the link must be drained and reset.
#include <cuda/atomic>
#include <stdint.h>

#include "cu/kernels.h"

namespace {

constexpr unsigned kLlThreads = 512;
constexpr unsigned kLlMaxBlocks = 132;
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

__device__ __forceinline__ void StoreLl(uint2* slot, float v, unsigned e) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(slot), "r"(__float_as_uint(v)),
               "r"(e)
               : "memory");
}

__device__ __forceinline__ uint2 LoadLl(const uint2* slot) {
  uint2 v;
  asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(slot)
               : "memory");
  return v;
}

struct LlJob {
  int reduce;           // 1: recvDst[i] = rank-order sum of sendSrc[i] and the peer's value
  uint64_t rows, rowLen;
  const float* sendSrc;  // rows x rowLen, dense; null: sends nothing
  const float* localSrc; // rows x rowLen, dense, copied to localDst; null: no local copy
  float* localDst;
  float* recvDst;        // null: receives nothing
  uint64_t dstStride;    // row stride of localDst and recvDst
  uint2* selfRecv;
  uint2* peerRecv;
  uint64_t cap;          // slots per parity
  LlState* self;
  LlState* peer;
  int rank;
  int* err;
  long long spinLimit;
};

__global__ void __launch_bounds__(kLlThreads) ll_exchange(LlJob j) {
  __shared__ unsigned eShared;
  __shared__ int refused;
  if (threadIdx.x == 0) {
    eShared = j.self->epoch + 1;
    refused = 0;
  }
  __syncthreads();
  const unsigned e = eShared;
  const uint64_t par = (e & 1u) * j.cap;
  const uint64_t total = j.rows * j.rowLen;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;

  if (j.localSrc != nullptr) {
    for (uint64_t i = tid; i < total; i += stride) {
      const uint64_t r = i / j.rowLen, c = i - r * j.rowLen;
      j.localDst[r * j.dstStride + c] = j.localSrc[i];
    }
  }

  if (j.sendSrc != nullptr) {
    // The peer must have finished epoch e - 2, the last one that used this parity's slots.
    if (threadIdx.x == 0) {
      cuda::atomic_ref<unsigned, cuda::thread_scope_system> ack(j.self->ack);
      const long long t0 = clock64();
      while (!Reached(ack.load(cuda::memory_order_acquire), e - 2)) {
        if (clock64() - t0 > j.spinLimit) {
          atomicCAS(j.err, 0, kRefusedAck);
          refused = 1;
          break;
        }
      }
    }
    __syncthreads();
    if (refused) return;
    for (uint64_t i = tid; i < total; i += stride) StoreLl(&j.peerRecv[par + i], j.sendSrc[i], e);
  }

  if (j.recvDst != nullptr) {
    const long long t0 = clock64();
    for (uint64_t i = tid; i < total && !refused; i += stride) {
      uint2 v = LoadLl(&j.selfRecv[par + i]);
      while (v.y != e) {
        if (clock64() - t0 > j.spinLimit) {
          atomicCAS(j.err, 0, kRefusedData);
          refused = 1;
          break;
        }
        v = LoadLl(&j.selfRecv[par + i]);
      }
      if (v.y != e) break;
      const float theirs = __uint_as_float(v.x);
      const uint64_t r = i / j.rowLen, c = i - r * j.rowLen;
      if (j.reduce) {
        // Global rank order: rank 0's operand first on both ranks, so both hold the same bits.
        // sendSrc[i] is read here by the thread that sent it, before recvDst[i] (which may alias
        // it) is written.
        const float mine = j.sendSrc[i];
        j.recvDst[i] = j.rank == 0 ? mine + theirs : theirs + mine;
      } else {
        j.recvDst[r * j.dstStride + c] = theirs;
      }
    }
  }

  // The last block to finish publishes the epoch: locally for the next launch, and as the ack
  // that lets the peer reuse this parity. Each block's fence orders its threads' reads (gathered
  // by the barrier) before its count; the block that sees the full count then publishes with a
  // system-scope release, whose fence follows its own count and so carries every block's reads
  // to the peer that acquires the ack. A single block (small joins) needs no count at all.
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
      cuda::atomic_ref<unsigned, cuda::thread_scope_system>(j.peer->ack).store(
          e, cuda::memory_order_release);
    }
  }
}

}  // namespace

extern "C" size_t memra_tp_ll_state_bytes(void) { return sizeof(LlState); }

extern "C" cudaError_t memra_tp_ll_exchange(int reduce, uint64_t rows, uint64_t rowLen,
                                            const float* sendSrc, const float* localSrc,
                                            float* localDst, float* recvDst, uint64_t dstStride,
                                            void* selfRecv, void* peerRecv, uint64_t cap,
                                            void* selfState, void* peerState, int rank, int* err,
                                            long long spinLimit, cudaStream_t stream) {
  const uint64_t total = rows * rowLen;
  if ((sendSrc != nullptr || recvDst != nullptr) && total > cap) return cudaErrorInvalidValue;
  // Four elements a thread before another block: a small join (the TP hops move 4-16 KB) then
  // runs as one block and publishes its epoch without the cross-block count.
  uint64_t blocks = (total + 4 * kLlThreads - 1) / (4 * kLlThreads);
  if (blocks < 1) blocks = 1;
  if (blocks > kLlMaxBlocks) blocks = kLlMaxBlocks;
  LlJob j{reduce, rows, rowLen, sendSrc, localSrc, localDst, recvDst, dstStride,
          static_cast<uint2*>(selfRecv), static_cast<uint2*>(peerRecv), cap,
          static_cast<LlState*>(selfState), static_cast<LlState*>(peerState), rank, err,
          spinLimit};
  ll_exchange<<<static_cast<unsigned>(blocks), kLlThreads, 0, stream>>>(j);
  return cudaGetLastError();
}
