// Two-rank tensor-parallel link kernels (seed 000: the Rust engine's small-message all-reduce this
// design comes from, docs/architecture.md#terms): the push/fold pair a caller orders with
// cross-device events, and the one-shot all-reduce that orders itself through flags in the two
// ranks' signal blocks (the shape of vLLM's cross_device_reduce_1stage).
//
// Every pointer that may belong to the peer (dst of a push, either input of the one-shot, the
// peer's signal block) is dereferenced INSIDE a kernel, so it is only meaningful with peer access
// enabled between two distinct devices: two contexts on one card share no address space.
#include <cuda/atomic>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "cu/kernels.h"
#include "cu/launch.cuh"
#include "cu/serial_epoch.cuh"

namespace {

// ---- signal block ----
//
// One per rank, in that rank's device memory, zeroed once before the first launch and kept for
// the link's lifetime. The peer WRITES into it (its start/end slots); only the owner reads it.
//
//   start[b][r]  written by rank r's block b into the OTHER rank's block: "rank r entered epoch
//                start[b][r] of block b". Rank r's own block leaves its own [b][r] slot unused
//                (two ranks: the layout keeps vLLM's [block][rank] indexing so the writer never
//                computes a slot from the reader's rank).
//   end[b][r]    the same for leaving: "rank r has finished reading both inputs in epoch e".
//   epoch[b]     the last epoch block b of THIS rank completed. Read and written only by thread 0
//                of block b on this rank, one launch after another on one stream.
//
// Each array starts on a 128-byte boundary of the block (real cache lines when the block itself
// starts on one, as a cudaMalloc'ed block does), so the peer's writes into start/end never share
// a line with the epochs this rank rewrites. The struct keeps 4-byte alignment (padding, not
// alignas), so any 4-byte-aligned allocation holds one. Offsets: start 0, end 640, epoch 1280;
// 1664 bytes. All values are epochs that grow by one per launch per block and compare
// wrap-safely, so a zeroed block is a valid starting state.
constexpr unsigned kArMaxBlocks = 72;  // the seed's AR_BLOCKS
constexpr unsigned kArThreads = 512;

constexpr unsigned PadTo32(unsigned words) { return (words + 31u) / 32u * 32u; }

struct ArSignal {
  unsigned start[kArMaxBlocks][2];
  unsigned padStart[PadTo32(kArMaxBlocks * 2) - kArMaxBlocks * 2];
  unsigned end[kArMaxBlocks][2];
  unsigned padEnd[PadTo32(kArMaxBlocks * 2) - kArMaxBlocks * 2];
  unsigned epoch[kArMaxBlocks];
  unsigned padEpoch[PadTo32(kArMaxBlocks) - kArMaxBlocks];
};
static_assert(offsetof(ArSignal, start) == 0, "signal layout");
static_assert(offsetof(ArSignal, end) % 128 == 0, "end flags start a 128-byte line");
static_assert(offsetof(ArSignal, epoch) % 128 == 0, "epochs start a 128-byte line");
static_assert(sizeof(ArSignal) % 128 == 0, "signal block is whole 128-byte lines");
static_assert(offsetof(ArSignal, end) == 640 && offsetof(ArSignal, epoch) == 1280 &&
                  sizeof(ArSignal) == 1664,
              "the layout documented above");

using SysFlag = cuda::atomic_ref<unsigned, cuda::thread_scope_system>;

// One side of a pairwise barrier, run by thread 0 of a block: announce epoch `e` in the peer's
// block, then wait for the peer's announcement in ours. Returns false when the wait outlives
// `spinLimit` SM clock ticks (clock64 is per SM, and a block never migrates, so the difference is
// meaningful).
//
// The store is a system-scope RELEASE: everything that happens-before it in this block (for the
// entry barrier the earlier stream work that staged this rank's input; for the exit barrier every
// thread's reads of both inputs, gathered by the __syncthreads before the call) is visible to a
// peer thread that acquires the value. System scope because the observer is another device across
// NVLink; device scope would order nothing for it.
//
// The load is a system-scope ACQUIRE: the peer's release covered its staged input (entry) or its
// finished reads of ours (exit), and the acquire makes this block's later accesses, ordered after
// it by the __syncthreads that follows the call, see that state. A relaxed/volatile poll would
// let the reads of the peer's input be satisfied before the flag was seen.
__device__ __forceinline__ bool PairBarrier(unsigned* peerSlot, unsigned* selfSlot, unsigned e,
                                            long long spinLimit) {
  SysFlag(*peerSlot).store(e, cuda::memory_order_release);
  SysFlag self(*selfSlot);
  if (Reached(self.load(cuda::memory_order_acquire), e)) return true;
  const long long t0 = clock64();
  while (!Reached(self.load(cuda::memory_order_acquire), e)) {
    if (clock64() - t0 > spinLimit) return false;
  }
  return true;
}

// ---- push / fold ----
// dst may be the peer's pointer and could alias src in a caller's mistake: no __restrict__.

__global__ void push_f32(const float* src, float* dst, uint64_t n) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = src[i];
  }
}

// n4 float4 groups, then the scalar tail; launched only when both pointers are 16-byte aligned.
__global__ void push_f32x4(const float4* src, float4* dst, uint64_t n4, const float* srcTail,
                           float* dstTail, unsigned tailCount) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t i = tid; i < n4; i += stride) dst[i] = src[i];
  if (tid < tailCount) dstTail[tid] = srcTail[tid];
}

// Rows over grid.y, columns over grid.x; `units` are float4 groups when Vec is set (the host
// checked that every row start on both sides is 16-byte aligned) and floats otherwise. Strides
// and row lengths arrive already in units.
template <bool Vec>
__global__ void push_2d(const float* src, float* dst, uint64_t rows, uint64_t rowUnits,
                        uint64_t srcStride, uint64_t dstStride) {
  using Unit = typename std::conditional<Vec, float4, float>::type;
  const Unit* s = reinterpret_cast<const Unit*>(src);
  Unit* d = reinterpret_cast<Unit*>(dst);
  const uint64_t colStride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t col0 = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const Unit* sr = s + r * srcStride;
    Unit* dr = d + r * dstStride;
    for (uint64_t c = col0; c < rowUnits; c += colStride) dr[c] = sr[c];
  }
}

__global__ void fold_f32(float* dst, const float* stage, uint64_t n) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] += stage[i];
  }
}

__global__ void fold_f32x4(float4* dst, const float4* stage, uint64_t n4, float* dstTail,
                           const float* stageTail, unsigned tailCount) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t i = tid; i < n4; i += stride) {
    const float4 sv = stage[i];
    float4 dv = dst[i];
    dv.x += sv.x;
    dv.y += sv.y;
    dv.z += sv.z;
    dv.w += sv.w;
    dst[i] = dv;
  }
  if (tid < tailCount) dstTail[tid] += stageTail[tid];
}

// ---- one-shot all-reduce ----

// One rank's launch, as memra_tp_ar_1stage checked it (shapes: MemraArOneShotArgs).
struct ArJob {
  const float* x;
  const float* in0;
  const float* in1;
  float* out;
  ArSignal* self;
  ArSignal* peer;
  int rank;
  uint64_t n;
  int* err;
  long long spinLimit;
};

// One launch per rank, the same `blocks` on both; block b of rank 0 pairs with block b of rank 1.
//
//   entry   thread 0: e = epoch[b] + 1; release-store e into peer.start[b][rank]; acquire-spin on
//           self.start[b][1-rank] until it reaches e. After it both ranks' staged inputs are
//           complete (each rank's earlier stream work happens-before its own flag store).
//   body    out[i] = in0[i] + in1[i] over this block's share: ALWAYS rank 0's operand first, so
//           both ranks evaluate the same f32 expression and agree bit for bit.
//   exit    __syncthreads gathers every thread's reads, then the same handshake on end[b][.].
//           It exists because the peer may still be reading THIS rank's staged input when this
//           block is done: without it, this rank's next round (a staging copy into the same
//           buffer) could overwrite bytes the peer has not read yet. The kernel completes only
//           when every block passed its exit, i.e. when the peer finished reading all of ours.
//   epoch   thread 0 stores epoch[b] = e. Only this block of this rank touches epoch[b], and the
//           next launch on the same stream (or the next replay of a graph holding this launch)
//           reads it after this kernel completed, so the epoch lives entirely on the device: no
//           host counter is frozen into the launch, which is what makes graph replays correct.
//
// Refusals (cu/kernels.h): an entry wait past spinLimit stores MEMRA_REFUSED_ENTRY into *err
// (first refusal wins) and the block returns WITHOUT touching in/out, because the peer's input is
// not known to be ready, and without advancing epoch[b]: the peer never completed this round, so
// its late arrival, if any, pairs with this block's next attempt at the same epoch instead of
// leaving the two ranks one epoch apart. An exit wait past spinLimit stores MEMRA_REFUSED_EXIT;
// `out` is already complete, and the epoch DOES advance, because the peer passed this round's
// entry and will finish it. Either way a non-zero *err means the last results are suspect: drain
// both ranks, then zero both signal blocks and the err words before the link is used again.
//
// All `blocks` blocks of both ranks must be resident at once (a block spins for its partner), so
// `blocks` stays far below the SM count; a co-running kernel that starves the grid shows up as a
// refusal rather than a hang.
//
// Vec: both stages are 16-byte aligned, so the partition and the sum go four floats at a time;
// XVec, OutVec: x and out are too (each rank's own, so they pick only the access width inside a
// partition). As template parameters, as push_2d's Vec, each instantiation carries only its own
// loop.
template <bool Vec, bool XVec, bool OutVec>
__global__ void __launch_bounds__(kArThreads) ar_1stage(ArJob j) {
  const float* x = j.x;
  const float* in0 = j.in0;
  const float* in1 = j.in1;
  float* out = j.out;
  const int rank = j.rank;
  const uint64_t n = j.n;
  __shared__ bool refused;
  const unsigned b = blockIdx.x;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t tid = uint64_t(b) * blockDim.x + threadIdx.x;
  const uint64_t n4 = n / 4;  // float4 groups, when Vec

  // Fused staging: this block copies exactly the elements that the PEER's block b will read
  // (the partition depends only on n, blocks and the stage buffers' alignment, which both ranks
  // share), so the pairwise entry barrier is all the ordering the copy needs. It saves the
  // separate staging launch: one kernel per rank per all-reduce.
  if (x != nullptr) {
    float* mine = const_cast<float*>(rank == 0 ? in0 : in1);
    if constexpr (Vec) {
      for (uint64_t i = tid; i < n4; i += stride) {
        reinterpret_cast<float4*>(mine)[i] =
            XVec ? reinterpret_cast<const float4*>(x)[i]
                 : make_float4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
      }
      const uint64_t t = n4 * 4 + tid;
      if (t < n) mine[t] = x[t];
    } else {
      for (uint64_t i = tid; i < n; i += stride) mine[i] = x[i];
    }
    // Each thread's staged stores must be visible to the peer before thread 0's release below
    // tells the peer to read them.
    __threadfence_system();
  }
  __syncthreads();

  unsigned e = 0;
  if (threadIdx.x == 0) {
    e = j.self->epoch[b] + 1;
    refused = !PairBarrier(&j.peer->start[b][rank], &j.self->start[b][1 - rank], e, j.spinLimit);
    if (refused) atomicCAS(j.err, 0, MEMRA_REFUSED_ENTRY);
  }
  __syncthreads();
  if (refused) return;

  if constexpr (Vec) {
    const float4* a4 = reinterpret_cast<const float4*>(in0);
    const float4* b4 = reinterpret_cast<const float4*>(in1);
    for (uint64_t i = tid; i < n4; i += stride) {
      const float4 p = a4[i];
      const float4 q = b4[i];
      const float4 s4 = make_float4(p.x + q.x, p.y + q.y, p.z + q.z, p.w + q.w);
      if constexpr (OutVec) {
        reinterpret_cast<float4*>(out)[i] = s4;
      } else {
        out[4 * i] = s4.x;
        out[4 * i + 1] = s4.y;
        out[4 * i + 2] = s4.z;
        out[4 * i + 3] = s4.w;
      }
    }
    const uint64_t t = n4 * 4 + tid;
    if (t < n) out[t] = in0[t] + in1[t];
  } else {
    for (uint64_t i = tid; i < n; i += stride) out[i] = in0[i] + in1[i];
  }

  __syncthreads();
  if (threadIdx.x == 0) {
    if (!PairBarrier(&j.peer->end[b][rank], &j.self->end[b][1 - rank], e, j.spinLimit)) {
      atomicCAS(j.err, 0, MEMRA_REFUSED_EXIT);
    }
    j.self->epoch[b] = e;
  }
}

using memra_cu::Aligned;

}  // namespace

extern "C" size_t memra_tp_ar_signal_bytes(void) { return sizeof(ArSignal); }

extern "C" int memra_tp_ar_max_blocks(void) { return static_cast<int>(kArMaxBlocks); }

extern "C" cudaError_t memra_tp_ar_push(const float* src, float* dst, uint64_t n,
                                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (Aligned(src, 16) && Aligned(dst, 16) && n >= 4) {
    const uint64_t n4 = n / 4;
    const unsigned tail = static_cast<unsigned>(n % 4);
    push_f32x4<<<memra_cu::GridFor(n4), memra_cu::kBlock, 0, stream>>>(
        reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), n4, src + n4 * 4,
        dst + n4 * 4, tail);
  } else {
    push_f32<<<memra_cu::GridFor(n), memra_cu::kBlock, 0, stream>>>(src, dst, n);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t memra_tp_ar_push_2d(const float* src, float* dst, uint64_t rows,
                                           uint64_t rowLen, uint64_t srcStride,
                                           uint64_t dstStride, cudaStream_t stream) {
  if (rows == 0 || rowLen == 0) return cudaSuccess;
  // Densely packed on both sides (the t = 1 gather, or whole rows) is one contiguous run, and the
  // 1-D push spreads it over the whole grid instead of one row per grid row.
  if (rows == 1 || (srcStride == rowLen && dstStride == rowLen)) {
    return memra_tp_ar_push(src, dst, rows * rowLen, stream);
  }
  // grid.y is capped by the hardware at 65535; more rows loop inside the kernel.
  const unsigned gy = static_cast<unsigned>(rows < 65535 ? rows : 65535);
  if (Aligned(src, 16) && Aligned(dst, 16) && rowLen % 4 == 0 && srcStride % 4 == 0 &&
      dstStride % 4 == 0) {
    const dim3 grid(memra_cu::GridFor(rowLen / 4), gy);
    push_2d<true><<<grid, memra_cu::kBlock, 0, stream>>>(src, dst, rows, rowLen / 4,
                                                         srcStride / 4, dstStride / 4);
  } else {
    const dim3 grid(memra_cu::GridFor(rowLen), gy);
    push_2d<false><<<grid, memra_cu::kBlock, 0, stream>>>(src, dst, rows, rowLen, srcStride,
                                                          dstStride);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t memra_tp_ar_fold(float* dst, const float* stage, uint64_t n,
                                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (Aligned(dst, 16) && Aligned(stage, 16) && n >= 4) {
    const uint64_t n4 = n / 4;
    const unsigned tail = static_cast<unsigned>(n % 4);
    fold_f32x4<<<memra_cu::GridFor(n4), memra_cu::kBlock, 0, stream>>>(
        reinterpret_cast<float4*>(dst), reinterpret_cast<const float4*>(stage), n4,
        dst + n4 * 4, stage + n4 * 4, tail);
  } else {
    fold_f32<<<memra_cu::GridFor(n), memra_cu::kBlock, 0, stream>>>(dst, stage, n);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t memra_tp_ar_1stage(const MemraArOneShotArgs* a, cudaStream_t stream) {
  if (a == nullptr) return cudaErrorInvalidValue;
  if (a->n == 0) return cudaSuccess;
  // The addon validates these; a launcher that trusted them would index the signal arrays out of
  // bounds on the peer's device.
  if (a->rank < 0 || a->rank > 1 || a->blocks < 1 || a->blocks > static_cast<int>(kArMaxBlocks) ||
      a->spin_limit <= 0) {
    return cudaErrorInvalidValue;
  }
  const ArJob j{a->x,
                a->in0,
                a->in1,
                a->out,
                static_cast<ArSignal*>(a->self_signal),
                static_cast<ArSignal*>(a->peer_signal),
                a->rank,
                a->n,
                a->err,
                a->spin_limit};
  // The element partition follows only the shared stage buffers' alignment, so both ranks split
  // [0, n) the same way: fused staging relies on block b of each rank owning the same elements.
  // x and out are per rank; their alignment only picks the access width inside a partition.
  const bool vec = Aligned(a->in0, 16) && Aligned(a->in1, 16);
  const bool xVec = a->x != nullptr && Aligned(a->x, 16);
  const bool outVec = Aligned(a->out, 16);
  void (*kernel)(ArJob) = ar_1stage<false, false, false>;
  if (vec) {
    kernel = xVec ? (outVec ? ar_1stage<true, true, true> : ar_1stage<true, true, false>)
                  : (outVec ? ar_1stage<true, false, true> : ar_1stage<true, false, false>);
  }
  kernel<<<static_cast<unsigned>(a->blocks), kArThreads, 0, stream>>>(j);
  return cudaGetLastError();
}
