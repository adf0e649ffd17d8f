// The column-tile product every matrix-vector kernel of the model is built on: memra_gemv
// (cu/model_gemv.cu), the attention's two input products (cu/model_latent_query.cu), the expert
// FFN halves, the matrix picked per slot on the device (cu/model_experts.cu), and the MoE norm
// with the router's product (cu/model_norm_gemv.cu). How a launch lays it over the GPU is in
// cu/gemv_launch.cuh.
//
// THE SLICE RULE is what shapes these kernels. An output column's value must not depend on which
// slice of columns (cols, ldw, the rank's half), which experts, or how many rows t a call
// carries. So the summation of each output is fixed by K and the matrix's split S alone (memra_gemv
// takes S from its caller, one per matrix; the expert and attention-input kernels fix their own):
//   - k is cut into chunks of 4 consecutive rows; chunk c belongs to partial p = c mod P, with
//     P = kSplitY * S partials; a partial accumulates its chunks in increasing k (fmaf);
//   - the kSplitY partials of one block are added in y order, then the S block totals in
//     cluster-rank order.
// Which block or thread computes a column, how many columns a thread owns, whether weights
// load 16, 8, 4 or 2 bytes at a time and x as float4, and the batch t all leave that order
// alone (the tests hold t = 1..8, column slices at odd offsets and the EP halves to it, bit for
// bit).
//
// Layout: a block is 32 x-threads, each owning CW adjacent columns (CW = 8, 4 or 2: a warp reads
// 512, 256 or 128 contiguous bytes of a weight row), by 16 y-threads. The S blocks of a
// cluster share a column tile and split its partials, so a narrow matrix (Wdkv: 512 columns, the
// router: E) still spreads over many SMs; the cluster's blocks meet in distributed shared
// memory, with no workspace and no second launch. Each weight is read once for all t rows.
//
// With t > 1 rows, x is staged in shared memory, each warp its own chunks (every lane of a warp
// reads the same x), once the previous kernel has finished: a chunk's FMAs then read T float4s
// from shared memory, not T round trips to L2 (x may not go through L1: cu/pdl.cuh's
// LoadFresh). At t = 1, and where the chunks would not fit, x is read from L2. The values, and so
// the sums, are the same either way.
#pragma once

#include <cooperative_groups.h>
#include <stddef.h>
#include <stdint.h>

#include "cu/cp_async.cuh"
#include "cu/globaltimer.cuh"
#include "cu/pdl.cuh"
#include "cu/prefetch_l2.cuh"
#include "cu/weight_loads.cuh"

namespace memra_tile {

namespace cg = cooperative_groups;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;

constexpr unsigned kWarpCols = 32;     // x-threads: a warp spans one tile's columns
constexpr unsigned kSplitY = 16;       // y-threads: partials per block
constexpr unsigned kGemvThreads = kWarpCols * kSplitY;
constexpr unsigned kChunk = 4;         // consecutive k rows per chunk

// Chunks a thread loads before their FMAs: 16 loads of 16 bytes (CW 8), of 8 bytes (CW 4), or
// 32 of 4 bytes (CW 2), halved for two matrices. A decode gemv is a single wave of short-lived
// blocks, so what it costs is the number of memory round trips a thread makes in a row: with
// ~8 chunks a thread this is two or one. The kernels declare one block an SM (launch bounds) so
// that ptxas keeps these loads in flight instead of trading them for occupancy.
//
// Past 16 accumulators a thread (more rows or columns than the first tiles took), the batch
// shrinks in proportion, so that accumulators and loads in flight stay within the same registers.
template <int CW, int M, int T>
constexpr unsigned kBatchChunks = ((CW == 2 ? 8 : 4) / M) / (M * T * CW > 16 ? M * T * CW / 16 : 1) > 0
                                      ? ((CW == 2 ? 8 : 4) / M) / (M * T * CW > 16 ? M * T * CW / 16 : 1)
                                      : 1;

// CW adjacent bf16 weights of one row, kept packed (two to a word) until their FMAs.
template <int CW>
struct WRow {
  uint32_t w[CW / 2];
};

__device__ __forceinline__ float Lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float Hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// The n (<= CW) weights at p, zeros past them, each line first out of L2 (cu/weight_loads.cuh).
// kFull (n == CW, known at compile time): no bounds tests, so a batch of these is straight-line
// loads. kWide: one 2*CW-byte load (the launcher proved the alignment); otherwise one 2-byte load
// each. Same words either way.
template <int CW, bool kWide, bool kFull>
__device__ __forceinline__ WRow<CW> LoadRow(const uint16_t* p, unsigned n) {
  using memra_cu::LoadWeights;
  const uint64_t policy = memra_cu::EvictFirstPolicy();
  WRow<CW> r;
  if constexpr (kWide && kFull) {
    if constexpr (CW == 8) {
      const uint4 v = LoadWeights(reinterpret_cast<const uint4*>(p), policy);
      r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
    } else if constexpr (CW == 4) {
      const uint2 v = LoadWeights(reinterpret_cast<const uint2*>(p), policy);
      r.w[0] = v.x, r.w[1] = v.y;
    } else {
      r.w[0] = LoadWeights(reinterpret_cast<const uint32_t*>(p), policy);
    }
  } else {
#pragma unroll
    for (int i = 0; i < CW / 2; ++i) {
      const uint32_t lo = (kFull || 2u * i < n) ? LoadWeights(p + 2 * i, policy) : 0u;
      const uint32_t hi = (kFull || 2u * i + 1 < n) ? LoadWeights(p + 2 * i + 1, policy) : 0u;
      r.w[i] = lo | (hi << 16);
    }
  }
  return r;
}

// x[0..3] from L2, a float4 when p is 16-byte aligned. x is the previous kernel's output:
// LoadFresh (cu/pdl.cuh).
__device__ __forceinline__ float4 LoadX4(const float* p) {
  using memra_cu::LoadFresh;
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0) return LoadFresh(reinterpret_cast<const float4*>(p));
  return make_float4(LoadFresh(p), LoadFresh(p + 1), LoadFresh(p + 2), LoadFresh(p + 3));
}

// A thread's accumulators (M matrices x T rows x CW columns): 64 leave room, in the 128
// registers one 512-thread block an SM allows, for a batch of loads in flight (kBatchChunks).
constexpr int kMaxAccumulators = 64;

// part[] (GemvTile: every thread's accumulators, for the sums over y) needs 2 KB an accumulator
// a thread: static while it fits the 48 KB a block has without asking, dynamic past 32 KB. A
// kernel with tiles of several row counts (the grouped experts' passes) takes every one's part[]
// dynamic (kDyn), at the same place: their static arrays together would pass the 48 KB.
template <int M, int T, int CW>
constexpr bool kDynamicPart = M * T * CW > 16;

template <int M, int T, int CW, bool kDyn = kDynamicPart<M, T, CW>>
__host__ __device__ constexpr size_t PartBytes() {
  return kDyn ? size_t(kSplitY) * M * T * kWarpCols * CW * sizeof(float) : 0;
}

// The products at this many rows and more take their weights through a ring of chunks in shared
// memory, filled by cp.async (cu/cp_async.cuh): at eight rows a thread holds 64 accumulators,
// which left registers for one chunk of weights in flight (64 bytes a thread, 32 KB an SM), and
// each warp waited a round trip to HBM between its batches of FMAs. Copies hold no register while
// they fly. Each thread reads back only what its own copies wrote, so cp.async.wait_group alone
// orders a read after its copy, and the loop has no barrier. Found with the chain probe
// (scripts/probes/step-timeline-probe.cu, traced, t = 8): latent_query 50.0 -> 43.6 us a layer,
// the step 11.35 -> 11.19 ms. From four rows (two chunks deep, the experts' passes too) it gained
// 0.04 ms at t = 4 and lost 0.02 at t = 8. A build may name another count
// (-DMEMRA_GEMV_RING_MIN_T=4).
#ifndef MEMRA_GEMV_RING_MIN_T
#define MEMRA_GEMV_RING_MIN_T 8
#endif

// A thread's ring: the chunks (M matrices' kChunk rows of CW weights) that part[] holds for every
// thread of the block, at most four. It lives in part[] until the block's FMAs are done, so it
// asks the launch for no shared memory of its own; 0 where part[] is static or holds fewer than
// two, or the weights are not loaded whole (kWide).
template <int M, int T, int CW, bool kDyn, bool kWide>
__host__ __device__ constexpr unsigned RingDepth() {
  constexpr size_t kSlot = size_t(kGemvThreads) * kChunk * M * 2 * CW;
  constexpr size_t kHeld = PartBytes<M, T, CW, kDyn>() / kSlot;
  if constexpr (!kDyn || !kWide || T < MEMRA_GEMV_RING_MIN_T) return 0;
  return kHeld >= 4 ? 4 : (kHeld >= 2 ? 2 : 0);
}

// Shared-memory float4s of one warp's staged x: row s's i-th chunk of the warp at [s * q + i].
// q: the most chunks a warp of the launch takes (XChunksPerWarp).
__host__ __device__ constexpr uint32_t XChunksPerWarp(uint32_t K, unsigned split) {
  return (K / kChunk + kSplitY * split - 1) / (kSplitY * split);
}

// Where element k of row s goes in the staged x of block `rank` of a launch at `split`, as a float
// index from the start of the staged x (PartBytes past the dynamic shared memory): chunk c = k / 4
// is warp ty = c % (kSplitY * split) - kSplitY * rank's i-th, i = c / (kSplitY * split). Only
// for full chunks (c < K / 4) that belong to the block (0 <= ty < kSplitY).
__host__ __device__ constexpr uint64_t StagedX(uint64_t k, unsigned s, unsigned rows, uint32_t q, unsigned rank,
                                               unsigned split) {
  const uint64_t c = k / kChunk, stride = uint64_t(kSplitY) * split;
  const uint64_t ty = c % stride - uint64_t(kSplitY) * rank, i = c / stride;
  return ((ty * rows + s) * q + i) * kChunk + k % kChunk;
}

// The chunks first, first + stride, ... < full of every row into xs, by the lanes of `mask`
// (those of this warp that will read them), which then meet. Called once PdlWait() has returned.
// A chunk's T rows are loaded before any of them is stored. With a loop a row, each row's store
// waited for its load before the next row's load issued: T round trips to L2 in series after the
// wait (the step graph at t = 8 13.07 -> 12.76 ms, `bash scripts/gpu-session.sh ab-roofline`).
template <int T>
__device__ __forceinline__ void StageX(float4* xs, uint32_t q, const float* const (&xr)[T],
                                       uint64_t first, uint32_t stride, uint64_t full,
                                       unsigned mask) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned li = __popc(mask & ((1u << lane) - 1)), nl = __popc(mask);
  const uint32_t mine = first < full ? uint32_t((full - first + stride - 1) / stride) : 0;
  for (uint32_t i = li; i < mine; i += nl) {
    const uint64_t at = (first + uint64_t(i) * stride) * kChunk;
    float4 v[T];
#pragma unroll
    for (int s = 0; s < T; ++s) v[s] = LoadX4(xr[s] + at);
#pragma unroll
    for (int s = 0; s < T; ++s) xs[s * q + i] = v[s];
  }
  __syncwarp(mask);
}

// acc[m][s][*] += xv * row k of W_m (wv[m]): one FMA into each accumulator. Every path below
// goes through here, so each accumulator sees its products in increasing k whichever path ran.
template <int T, int M, int CW>
__device__ __forceinline__ void FmaRowWeights(float (&acc)[M][T][CW], float xv, int s,
                                              const WRow<CW> (&wv)[M]) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int i = 0; i < CW / 2; ++i) {
      acc[m][s][2 * i] = fmaf(xv, Lo(wv[m].w[i]), acc[m][s][2 * i]);
      acc[m][s][2 * i + 1] = fmaf(xv, Hi(wv[m].w[i]), acc[m][s][2 * i + 1]);
    }
  }
}

template <int T, int M, int CW>
__device__ __forceinline__ void Fma4(float (&acc)[M][T][CW], const float4& x4, int s,
                                     const WRow<CW> (&wv)[kChunk][M]) {
  const float xv[kChunk] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
  for (unsigned r = 0; r < kChunk; ++r) FmaRowWeights<T, M, CW>(acc, xv[r], s, wv[r]);
}

// Row k alone, for every x row: the clipped thread and the short tail, where batching the loads
// buys nothing.
template <int T, int M, int CW, bool kWide, bool kFull>
__device__ __forceinline__ void FmaRow(float (&acc)[M][T][CW], const float* const (&xr)[T],
                                       const uint16_t* const (&w)[M], uint64_t k, uint64_t ldw,
                                       unsigned n) {
  WRow<CW> wv[M];
#pragma unroll
  for (int m = 0; m < M; ++m) wv[m] = LoadRow<CW, kWide, kFull>(w[m] + k * ldw, n);
#pragma unroll
  for (int s = 0; s < T; ++s) FmaRowWeights<T, M, CW>(acc, memra_cu::LoadFresh(xr[s] + k), s, wv);
}

// What a product waits for before it reads x: the grid ahead (PdlWait), or with kReady a word
// that the grid ahead sets once what this block reads is stored (expert_down's group of
// expert_up, cu/model_experts.cu), read with acquire by every thread. That grid is resident
// before this one starts (PDL starts this one only once every block of it has begun), so the
// word comes; one that has not after about a second means it was not that grid's, and the kernel
// traps rather than hang the stream or read a half-written x.
template <bool kReady>
__device__ __forceinline__ void TileWait(const unsigned* ready) {
  if constexpr (kReady) {
    unsigned v = 0;
    uint64_t deadline = 0;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ready) : "memory");
      if (v != 0) break;
      const uint64_t now = GlobalTimerNs();
      if (deadline == 0) deadline = now + 1000000000ull;
      if (now > deadline) __trap();
      __nanosleep(32);
    }
    MEMRA_TRACE_WAITED();
  } else {
    PdlWait();
  }
}

// CW weights of a ring slot, as one shared load of 2*CW bytes.
template <int CW>
__device__ __forceinline__ WRow<CW> RingRow(const char* p) {
  WRow<CW> r;
  if constexpr (CW == 8) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
  } else if constexpr (CW == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    r.w[0] = v.x, r.w[1] = v.y;
  } else {
    r.w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
  return r;
}

// One chunk's 4 rows of M matrices.
template <int M, int CW, bool kWide, bool kFull>
__device__ __forceinline__ void LoadChunk(WRow<CW> (&wv)[kChunk][M], const uint16_t* const (&w)[M],
                                          uint64_t row0, uint64_t ldw, unsigned n) {
#pragma unroll
  for (unsigned r = 0; r < kChunk; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) wv[r][m] = LoadRow<CW, kWide, kFull>(w[m] + (row0 + r) * ldw, n);
  }
}

// The rows of this warp's next batch (chunks c + U * stride, ...) asked into L2 while the kernel
// ahead finishes, one bulk prefetch a row's 32 * CW weights, by lane (u, r, m). Only where the
// products at four rows and more are bound by their FMAs as much as by their bytes: at t = 8 the
// chain probe's step 11.98-11.99 -> 11.79-11.81 ms; at t = 1 and 2 it was slower (4.081 -> 4.103,
// 6.05 -> 6.26), the kernels ahead of the products being latency-bound there.
template <int M, int CW, unsigned U>
__device__ __forceinline__ void PrefetchNextBatch(const uint16_t* const (&w)[M], uint64_t c, uint32_t stride,
                                                  uint64_t full, uint64_t ldw, unsigned mask) {
  const unsigned lane = threadIdx.x % 32;
  if (mask != 0xffffffffu || lane >= U * kChunk * M) return;
  const unsigned m = lane % M, r = (lane / M) % kChunk, u = lane / (M * kChunk);
  const uint64_t next = c + uint64_t(U + u) * stride;
  // Row `r` of chunk `next`, from this warp's first column (lane 0's).
  const uint16_t* p = w[m] - CW * lane + (next * kChunk + r) * ldw;
  if (next < full && reinterpret_cast<uintptr_t>(p) % 16 == 0) memra_cu::PrefetchL2Bulk(p, kWarpCols * CW * 2);
}

// acc[m][s][i] += x_s[k] * W_m[k][j + i] over this thread's chunks (first, first + stride, ...)
// in increasing k, then the short tail chunk if it is this thread's. Whole batches of U chunks
// (kBatchChunks) are loaded with no branch between the loads, before the first of their FMAs.
// kStage (full threads only): x from this warp's staged chunks xs (StageX, the lanes of `mask`),
// or with kStaged from the chunks the kernel itself put there before the call. kRing (full
// threads only): the weights come through a ring of that many chunks at `ring` (RingDepth), the
// same chunks in the same order.
template <int T, int M, int CW, bool kWide, bool kStage, bool kFull, unsigned U, bool kStaged = false,
          unsigned kRing = 0, bool kReady = false>
__device__ __forceinline__ void AccumulateChunks(float (&acc)[M][T][CW],
                                                 const float* const (&xr)[T],
                                                 const uint16_t* const (&w)[M], uint64_t ldw,
                                                 uint32_t K, uint32_t first, uint32_t stride,
                                                 unsigned n, float4* xs, uint32_t q,
                                                 unsigned mask, char* ring = nullptr,
                                                 const unsigned* ready = nullptr) {
  const uint64_t full = K / kChunk;
  uint64_t c = first;
  // The first batch of weights is loaded before the previous kernel has finished (pdl.cuh); x is
  // read only after PdlWait().
  bool waited = false;
  if constexpr (!kFull) {
    TileWait<kReady>(ready);
    waited = true;
    // The clipped thread (at most one a launch): a row at a time, same order. Its guarded
    // 2-byte loads batched would need many more registers, and registers are allocated for the
    // whole kernel, so they would cost every thread.
#pragma unroll 1
    for (; c < full; c += stride) {
#pragma unroll 1
      for (unsigned r = 0; r < kChunk; ++r) FmaRow<T, M, CW, kWide, false>(acc, xr, w, c * kChunk + r, ldw, n);
    }
  } else {
    const auto wait = [&] {
      TileWait<kReady>(ready);
      if constexpr (kStage && !kStaged) StageX<T>(xs, q, xr, first, stride, full, mask);
      waited = true;
    };
    // x of the chunk at c, the thread's i-th.
    const auto x4 = [&](int s, uint64_t at, uint32_t i) {
      if constexpr (kStage) return xs[s * q + i];
      return LoadX4(xr[s] + at * kChunk);
    };
    uint32_t i = 0;
    if constexpr (kRing > 0) {
      // Chunk i of this thread in slot i % kRing; its row r of matrix m at (slot, r, m), the
      // block's threads side by side, so that a warp's copies and reads are 32 adjacent words.
      constexpr uint32_t kWord = 2 * CW, kWordsApart = kGemvThreads * kWord;
      const char* const mine = ring + threadIdx.x * kWord;
      const uint32_t to = static_cast<uint32_t>(__cvta_generic_to_shared(mine));
      const uint64_t policy = memra_cu::EvictFirstPolicy();
      const uint64_t step = uint64_t(stride) * kChunk * ldw;
      const uint16_t* src[M];
#pragma unroll
      for (int m = 0; m < M; ++m) src[m] = w[m] + c * kChunk * ldw;
      // This thread's chunks not yet asked for (none where K leaves its first chunk out).
      uint32_t left = c < full ? uint32_t((full - c + stride - 1) / stride) : 0;
      // The next chunk into slot d, then src at the one after. One group a chunk, empty past the
      // last, so that all but the newest kRing - 1 groups is always chunk i.
      const auto issue = [&](unsigned d) {
        if (left > 0) {
#pragma unroll
          for (int m = 0; m < M; ++m) {
            const uint16_t* row = src[m];
#pragma unroll
            for (unsigned r = 0; r < kChunk; ++r, row += ldw) {
              memra_cu::CopyWeightsToShared<kWord>(to + ((d * kChunk + r) * M + m) * kWordsApart, row, policy);
            }
          }
          --left;
        }
        memra_cu::CommitCopyGroup();
#pragma unroll
        for (int m = 0; m < M; ++m) src[m] += step;
      };
#pragma unroll
      for (unsigned d = 0; d < kRing; ++d) issue(d);
      wait();
#pragma unroll 1
      for (; c < full; c += stride, ++i) {
        const unsigned d = i % kRing;
        memra_cu::WaitCopyGroups<kRing - 1>();
        WRow<CW> wv[kChunk][M];
#pragma unroll
        for (unsigned r = 0; r < kChunk; ++r) {
#pragma unroll
          for (int m = 0; m < M; ++m) wv[r][m] = RingRow<CW>(mine + ((d * kChunk + r) * M + m) * kWordsApart);
        }
#pragma unroll
        for (int s = 0; s < T; ++s) Fma4<T, M, CW>(acc, x4(s, c, i), s, wv);
        // The slot's words are in registers (the FMAs above used them): it may take chunk i + kRing.
        issue(d);
      }
    } else {
      // Not unrolled further: one batch is all the registers a thread should hold in flight.
#pragma unroll 1
      for (; c + uint64_t(U - 1) * stride < full; c += uint64_t(U) * stride, i += U) {
        WRow<CW> wv[U][kChunk][M];
#pragma unroll
        for (unsigned u = 0; u < U; ++u) {
          LoadChunk<M, CW, kWide, kFull>(wv[u], w, (c + u * stride) * kChunk, ldw, n);
        }
        if (!waited) {
          if constexpr (T >= 4) PrefetchNextBatch<M, CW, U>(w, c, stride, full, ldw, mask);
          wait();
        }
#pragma unroll
        for (unsigned u = 0; u < U; ++u) {
#pragma unroll
          for (int s = 0; s < T; ++s) Fma4<T, M, CW>(acc, x4(s, c + u * stride, i + u), s, wv[u]);
        }
      }
#pragma unroll 1
      for (; c < full; c += stride, ++i) {
        WRow<CW> wv[kChunk][M];
        LoadChunk<M, CW, kWide, kFull>(wv, w, c * kChunk, ldw, n);
        if (!waited) wait();
#pragma unroll
        for (int s = 0; s < T; ++s) Fma4<T, M, CW>(acc, x4(s, c, i), s, wv);
      }
    }
  }
  if (!waited) TileWait<kReady>(ready);
  if (K % kChunk != 0 && full >= first && (full - first) % stride == 0) {
    for (uint32_t k = uint32_t(full) * kChunk; k < K; ++k) FmaRow<T, M, CW, kWide, kFull>(acc, xr, w, k, ldw, n);
  }
}

// One block's share of one column tile: T rows of x (xr[s], each K floats) times M matrices
// (W[m] points at column 0 of the slice, row stride ldw), columns [col0, col0 + 32 * CW) clipped
// to cols. Calls epi(s, j, v) with v[m] = the finished sum, on cluster rank 0 only. Every thread
// of every block of the cluster must reach it (no early return once a cluster has started it);
// a block may call it again (the grouped experts' passes) once it has returned. kStage: the
// launch gives it kSplitY * T * XChunksPerWarp(K, split) float4s of dynamic shared memory.
// U: chunks a thread loads before their FMAs (kBatchChunks, unless a probe picks another).
// kDyn: part[] at the start of the dynamic shared memory, whatever its size (PartBytes).
// kStaged (with kStage): the kernel has already put every full chunk of x where StageX would
// (StagedX), and the block has met since; the rows' tails and a clipped thread still read xrow.
template <int T, int M, int CW, bool kWide, bool kStage, unsigned U = kBatchChunks<CW, M, T>,
          bool kDyn = kDynamicPart<M, T, CW>, bool kStaged = false, bool kReady = false, class Epi>
__device__ __forceinline__ void GemvTile(const float* const (&xrow)[T],
                                         const uint16_t* const (&W)[M], uint64_t ldw, uint32_t K,
                                         uint32_t cols, uint32_t col0, unsigned split,
                                         const Epi& epi, const unsigned* ready = nullptr) {
  static_assert(M * T * CW <= kMaxAccumulators, "accumulators within a thread's registers");
  constexpr unsigned kTile = kWarpCols * CW, kRows = M * T;
  constexpr unsigned kRing = RingDepth<M, T, CW, kDyn, kWide>();
  // part[y][m * T + s][c] at part[(y * kRows + m * T + s) * kTile + c]: static up to 32 KB, past
  // it at the start of the launch's dynamic shared memory (PartBytes), the staged x after it.
  extern __shared__ float4 gemvSmem[];
  float* part;
  if constexpr (kDyn) {
    part = reinterpret_cast<float*>(gemvSmem);
  } else {
    __shared__ float staticPart[kSplitY * kRows * kTile];
    part = staticPart;
  }
  const unsigned tid = threadIdx.x, tx = tid % kWarpCols, ty = tid / kWarpCols;
  const unsigned rank = split > 1 ? cg::this_cluster().block_rank() : 0;

  const uint32_t q = XChunksPerWarp(K, split);
  float4* const xs = gemvSmem + PartBytes<M, T, CW, kDyn>() / sizeof(float4) + uint64_t(ty) * T * q;

  float acc[M][T][CW] = {};
  const uint32_t j = col0 + CW * tx;
  // The lanes of this warp that take the batched path, and so read the warp's staged x.
  const unsigned mask = __ballot_sync(0xffffffffu, j < cols && cols - j >= CW);
  if (j < cols) {
    const unsigned n = cols - j < CW ? cols - j : CW;
    const float* xr[T];
#pragma unroll
    for (int s = 0; s < T; ++s) xr[s] = xrow[s];
    const uint16_t* w[M];
#pragma unroll
    for (int m = 0; m < M; ++m) w[m] = W[m] + j;
    // Only the last thread of the last tile can have fewer than CW columns.
    if (n == CW) {
      AccumulateChunks<T, M, CW, kWide, kStage, true, U, kStaged, kRing, kReady>(
          acc, xr, w, ldw, K, rank * kSplitY + ty, split * kSplitY, n, xs, q, mask, reinterpret_cast<char*>(gemvSmem),
          ready);
    } else {
      AccumulateChunks<T, M, CW, kWide, kStage, false, U, false, 0, kReady>(
          acc, xr, w, ldw, K, rank * kSplitY + ty, split * kSplitY, n, xs, q, mask, nullptr, ready);
    }
  }
  // A thread that loaded nothing still stores below; the one-time wait is free for the others.
  TileWait<kReady>(ready);
  // part[] holds the rings: every thread's last chunk read before any partial overwrites them.
  if constexpr (kRing > 0) __syncthreads();
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int s = 0; s < T; ++s) {
#pragma unroll
      for (int i = 0; i < CW; ++i) part[(ty * kRows + m * T + s) * kTile + CW * tx + i] = acc[m][s][i];
    }
  }
  __syncthreads();
  MEMRA_TRACE_MARK(4);
  // This block's total per (matrix, row, column): its partials in y order, left in part[0].
  for (unsigned o = tid; o < kRows * kTile; o += kGemvThreads) {
    float a = part[o];
#pragma unroll
    for (unsigned y = 1; y < kSplitY; ++y) a = __fadd_rn(a, part[y * kRows * kTile + o]);
    part[o] = a;
  }
  if (split > 1) {
    cg::this_cluster().sync();
  } else {
    __syncthreads();
  }
  MEMRA_TRACE_MARK(5);
  if (rank == 0) {
    for (unsigned o = tid; o < T * kTile; o += kGemvThreads) {
      const unsigned s = o / kTile, c = o % kTile;
      if (col0 + c >= cols) continue;
      float v[M];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float a = part[(m * T + s) * kTile + c];
        for (unsigned b = 1; b < split; ++b) {
          const float* remote = cg::this_cluster().map_shared_rank(part, b);
          a = __fadd_rn(a, remote[(m * T + s) * kTile + c]);
        }
        v[m] = a;
      }
      epi(s, col0 + c, v);
    }
  }
  // Rank 0 reads the others' shared memory: they must not exit before it is done. Alone, the
  // block still must not overwrite part[] in a next pass before the epilogue has read it.
  if (split > 1) {
    cg::this_cluster().sync();
  } else {
    __syncthreads();
  }
}

// The plain epilogue: row s's column j into out (stride ldo), or added to what is there.
template <bool kAccumulate>
struct StoreRows {
  float* out;
  uint64_t ldo;
  __device__ void operator()(unsigned s, uint32_t j, const float (&v)[1]) const {
    float* o = out + uint64_t(s) * ldo + j;
    *o = kAccumulate ? __fadd_rn(memra_cu::LoadFresh(o), v[0]) : v[0];
  }
};

}  // namespace memra_tile
