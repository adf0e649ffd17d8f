// The model's matrix-vector products: memra_gemv, and the expert FFN halves (memra_expert_up,
// memra_expert_down), which are the same product with the matrix picked per slot on the device.
//
// THE SLICE RULE is what shapes this file. An output column's value must not depend on which
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
#include <cooperative_groups.h>
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "cu/launch.cuh"
#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/model_norm.cuh"
#include "cu/pdl.cuh"
#include "cu/smem_limit.cuh"

namespace cg = cooperative_groups;

namespace {

using memra_cu::LaunchModelKernel;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;

constexpr unsigned kWarpCols = 32;     // x-threads: a warp spans one tile's columns
constexpr unsigned kSplitY = 16;       // y-threads: partials per block
constexpr unsigned kGemvThreads = kWarpCols * kSplitY;
constexpr unsigned kChunk = 4;         // consecutive k rows per chunk
// Clusters of up to 8 blocks are portable (no opt-in attribute).
constexpr unsigned kMaxSplit = 8;
// Rows of K per block before another block of the cluster joins. A block's epilogue (its
// partials through shared memory, the cluster's through distributed shared memory) leaves its SM
// streaming nothing, so a wide matrix wants one long-lived block an SM: 2048 rows (K = 4096: two
// blocks a tile) measured best for every wide matrix of `bench` (scripts/probes/gemv-sweep.cu,
// one H200: Wq 43.7 -> 33.0 us, Wo 15.1 -> 11.6, the vocabulary 76 -> 64 against 512 rows).
constexpr unsigned kRowsPerBlock = 2048;
// Narrower tiles (more blocks) until a launch has most of a block an SM (the register budget
// below leaves room for one 512-thread block an SM): narrowing further, to a second partial wave,
// costs more than the SMs a wave of 96 leaves idle (bench: expert_up 49.1 us at 96 blocks, 56.3 at
// 192; Wq's half 18.8 at 128, 22.6 at 256; scripts/probes/gemv-sweep.cu).
constexpr uint64_t kTargetBlocks = 96;

// The number of blocks that split one tile's k range: a function of K and the rows a block takes
// alone (the slice rule), 1 to kMaxSplit.
unsigned Split(uint32_t K, uint32_t rowsPerBlock = kRowsPerBlock) {
  const uint32_t s = (K + rowsPerBlock - 1) / rowsPerBlock;
  return s < 1 ? 1 : (s > kMaxSplit ? kMaxSplit : s);
}

// The expert FFN's first half streams two matrices a block: 4096 rows each (H = 4096: one block
// a tile) measured best (W1 and W3 of `bench` at t = 1: 55.2 us at 2048 rows, 49.1 at 4096).
constexpr unsigned kExpertUpRows = 4096;

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

// The n (<= CW) weights at p, zeros past them. kFull (n == CW, known at compile time): no
// bounds tests, so a batch of these is straight-line loads. kWide: one 2*CW-byte load (the
// launcher proved the alignment); otherwise one 2-byte load each. Same words either way.
template <int CW, bool kWide, bool kFull>
__device__ __forceinline__ WRow<CW> LoadRow(const uint16_t* p, unsigned n) {
  WRow<CW> r;
  if constexpr (kWide && kFull) {
    if constexpr (CW == 8) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
      r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
    } else if constexpr (CW == 4) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
      r.w[0] = v.x, r.w[1] = v.y;
    } else {
      r.w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
    }
  } else {
#pragma unroll
    for (int i = 0; i < CW / 2; ++i) {
      const uint32_t lo = (kFull || 2u * i < n) ? __ldg(p + 2 * i) : 0u;
      const uint32_t hi = (kFull || 2u * i + 1 < n) ? __ldg(p + 2 * i + 1) : 0u;
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
// a thread: static while it fits the 48 KB a block has without asking, dynamic past 32 KB.
template <int M, int T, int CW>
constexpr bool kDynamicPart = M * T * CW > 16;

template <int M, int T, int CW>
__host__ __device__ constexpr size_t PartBytes() {
  return kDynamicPart<M, T, CW> ? size_t(kSplitY) * M * T * kWarpCols * CW * sizeof(float) : 0;
}

// Shared-memory float4s of one warp's staged x: row s's i-th chunk of the warp at [s * q + i].
// q: the most chunks a warp of the launch takes (XChunksPerWarp).
__host__ __device__ constexpr uint32_t XChunksPerWarp(uint32_t K, unsigned split) {
  return (K / kChunk + kSplitY * split - 1) / (kSplitY * split);
}

// The chunks first, first + stride, ... < full of every row into xs, by the lanes of `mask`
// (those of this warp that will read them), which then meet. Called once PdlWait() has returned.
template <int T>
__device__ __forceinline__ void StageX(float4* xs, uint32_t q, const float* const (&xr)[T],
                                       uint64_t first, uint32_t stride, uint64_t full,
                                       unsigned mask) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned li = __popc(mask & ((1u << lane) - 1)), nl = __popc(mask);
  const uint32_t mine = first < full ? uint32_t((full - first + stride - 1) / stride) : 0;
#pragma unroll
  for (int s = 0; s < T; ++s) {
    for (uint32_t i = li; i < mine; i += nl) xs[s * q + i] = LoadX4(xr[s] + (first + uint64_t(i) * stride) * kChunk);
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

// acc[m][s][i] += x_s[k] * W_m[k][j + i] over this thread's chunks (first, first + stride, ...)
// in increasing k, then the short tail chunk if it is this thread's. Whole batches of U chunks
// (kBatchChunks) are loaded with no branch between the loads, before the first of their FMAs.
// kStage (full threads only): x from this warp's staged chunks xs (StageX, the lanes of `mask`).
template <int T, int M, int CW, bool kWide, bool kStage, bool kFull, unsigned U>
__device__ __forceinline__ void AccumulateChunks(float (&acc)[M][T][CW],
                                                 const float* const (&xr)[T],
                                                 const uint16_t* const (&w)[M], uint64_t ldw,
                                                 uint32_t K, uint32_t first, uint32_t stride,
                                                 unsigned n, float4* xs, uint32_t q,
                                                 unsigned mask) {
  const uint64_t full = K / kChunk;
  uint64_t c = first;
  // The first batch of weights is loaded before the previous kernel has finished (pdl.cuh); x is
  // read only after PdlWait().
  bool waited = false;
  if constexpr (!kFull) {
    PdlWait();
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
      PdlWait();
      if constexpr (kStage) StageX<T>(xs, q, xr, first, stride, full, mask);
      waited = true;
    };
    // x of the chunk at c, the thread's i-th.
    const auto x4 = [&](int s, uint64_t at, uint32_t i) {
      if constexpr (kStage) return xs[s * q + i];
      return LoadX4(xr[s] + at * kChunk);
    };
    uint32_t i = 0;
    // Not unrolled further: one batch is all the registers a thread should hold in flight.
#pragma unroll 1
    for (; c + uint64_t(U - 1) * stride < full; c += uint64_t(U) * stride, i += U) {
      WRow<CW> wv[U][kChunk][M];
#pragma unroll
      for (unsigned u = 0; u < U; ++u) {
        LoadChunk<M, CW, kWide, kFull>(wv[u], w, (c + u * stride) * kChunk, ldw, n);
      }
      if (!waited) wait();
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
  if (!waited) PdlWait();
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
template <int T, int M, int CW, bool kWide, bool kStage, unsigned U = kBatchChunks<CW, M, T>, class Epi>
__device__ __forceinline__ void GemvTile(const float* const (&xrow)[T],
                                         const uint16_t* const (&W)[M], uint64_t ldw, uint32_t K,
                                         uint32_t cols, uint32_t col0, unsigned split,
                                         const Epi& epi) {
  static_assert(M * T * CW <= kMaxAccumulators, "accumulators within a thread's registers");
  constexpr unsigned kTile = kWarpCols * CW, kRows = M * T;
  // part[y][m * T + s][c] at part[(y * kRows + m * T + s) * kTile + c]: static up to 32 KB, past
  // it at the start of the launch's dynamic shared memory (PartBytes), the staged x after it.
  extern __shared__ float4 gemvSmem[];
  float* part;
  if constexpr (kDynamicPart<M, T, CW>) {
    part = reinterpret_cast<float*>(gemvSmem);
  } else {
    __shared__ float staticPart[kSplitY * kRows * kTile];
    part = staticPart;
  }
  const unsigned tid = threadIdx.x, tx = tid % kWarpCols, ty = tid / kWarpCols;
  const unsigned rank = split > 1 ? cg::this_cluster().block_rank() : 0;

  const uint32_t q = XChunksPerWarp(K, split);
  float4* const xs = gemvSmem + PartBytes<M, T, CW>() / sizeof(float4) + uint64_t(ty) * T * q;

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
      AccumulateChunks<T, M, CW, kWide, kStage, true, U>(acc, xr, w, ldw, K, rank * kSplitY + ty,
                                                         split * kSplitY, n, xs, q, mask);
    } else {
      AccumulateChunks<T, M, CW, kWide, kStage, false, U>(acc, xr, w, ldw, K, rank * kSplitY + ty,
                                                          split * kSplitY, n, xs, q, mask);
    }
  }
  // A thread that loaded nothing still stores below; the one-time wait is free for the others.
  PdlWait();
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int s = 0; s < T; ++s) {
#pragma unroll
      for (int i = 0; i < CW; ++i) part[(ty * kRows + m * T + s) * kTile + CW * tx + i] = acc[m][s][i];
    }
  }
  __syncthreads();
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

// ---- memra_gemv ----

template <bool kAccumulate>
struct StoreRows {
  float* out;
  uint64_t ldo;
  __device__ void operator()(unsigned s, uint32_t j, const float (&v)[1]) const {
    float* o = out + uint64_t(s) * ldo + j;
    *o = kAccumulate ? __fadd_rn(memra_cu::LoadFresh(o), v[0]) : v[0];
  }
};

template <int T, int CW, bool kAccumulate, unsigned U, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    gemv(float* __restrict__ out, uint64_t ldo, const float* __restrict__ x, uint64_t ldx,
         const uint16_t* __restrict__ W, uint64_t ldw, uint32_t K, uint32_t cols,
         unsigned split) {
  PdlLaunchDependents();
  const uint16_t* const w[1] = {W};
  const float* xr[T];
#pragma unroll
  for (int s = 0; s < T; ++s) xr[s] = x + uint64_t(s) * ldx;
  GemvTile<T, 1, CW, kWide, kStage, U>(xr, w, ldw, K, cols, (blockIdx.x / split) * kWarpCols * CW, split,
                                      StoreRows<kAccumulate>{out, ldo});
}

// ---- the attention's two input products in one launch ----
//
// c = a @ Wdkv goes straight into the cache at each row's position, and q = a @ Wq beside it:
// the column tiles of both matrices are one grid, so the small Wdkv (R columns) costs a few
// blocks of a full wave instead of a launch of its own, and no separate copy writes the cache.
// Each output's sum is memra_gemv's for K (the slice rule), whichever matrix it belongs to.

struct LatentQueryArgs {
  float* q;             // [t][qcols]
  const float* a;       // [t][K]
  const uint16_t* wdkv; // [K][R]
  const uint16_t* wq;   // [K][qcols]
  float* cache;         // this layer's rows of slot 0; slot s at + s * slotStride
  uint64_t slotStride;
  const int32_t* pos;
  uint32_t K, R, qcols, P;
};

template <int T>
struct StoreLatentQuery {
  const LatentQueryArgs* a;
  bool latent;  // this block's tile is Wdkv's
  __device__ void operator()(unsigned s, uint32_t j, const float (&v)[1]) const {
    if (!latent) {
      a->q[uint64_t(s) * a->qcols + j] = v[0];
      return;
    }
    const int32_t p = memra_cu::LoadFresh(a->pos + s);
    // The host checks positions before a step; a bad one here must not write outside the slot.
    if (p >= 0 && uint32_t(p) < a->P) a->cache[uint64_t(s) * a->slotStride + uint64_t(p) * a->R + j] = v[0];
  }
};

template <int T, int CW, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    latent_query(const LatentQueryArgs a, unsigned latentTiles, unsigned split) {
  PdlLaunchDependents();
  const unsigned tile = blockIdx.x / split;
  const bool latent = tile < latentTiles;
  const uint16_t* const w[1] = {latent ? a.wdkv : a.wq};
  const float* xr[T];
#pragma unroll
  for (int s = 0; s < T; ++s) xr[s] = a.a + uint64_t(s) * a.K;
  const uint32_t col0 = (latent ? tile : tile - latentTiles) * kWarpCols * CW;
  GemvTile<T, 1, CW, kWide, kStage>(xr, w, latent ? a.R : a.qcols, a.K, latent ? a.R : a.qcols, col0,
                                   split, StoreLatentQuery<T>{&a, latent});
}

// ---- the expert FFN, grouped by expert ----
//
// Block row y of a launch is group y: the y-th smallest owned expert some slot names, with the
// slots naming it in slot order. Its blocks stream that expert's weights once and apply them to
// T of the group's slots a pass (ExpertRows). Which slot lands in which pass changes no sum, so
// an output is the same whatever the grouping (the slice rule).

constexpr unsigned kMaxSlots = MEMRA_MODEL_MAX_ROWS * MEMRA_MODEL_MAX_TOPK;
constexpr unsigned kMaskWords = MEMRA_MODEL_MAX_EXPERTS / 32;

struct ExpertGroup {
  uint64_t local;         // the expert's index among this rank's nE
  unsigned n;             // slots naming it
  const uint16_t* slots;  // their indices s * K + k, increasing (shared memory)
};

// Every thread of the block calls it (it holds barriers); every block of a cluster gets the same
// answer, so a cluster returns whole when its group is empty.
__device__ bool FindGroup(const int32_t* __restrict__ ids, unsigned slots, uint32_t e0,
                          uint32_t nE, ExpertGroup* group) {
  __shared__ uint32_t present[kMaskWords];
  __shared__ uint16_t list[kMaxSlots];
  __shared__ int32_t chosen;
  __shared__ unsigned count;
  const unsigned tid = threadIdx.x;
  for (unsigned i = tid; i < kMaskWords; i += blockDim.x) present[i] = 0;
  __syncthreads();
  for (unsigned q = tid; q < slots; q += blockDim.x) {
    const int64_t e = int64_t(memra_cu::LoadFresh(ids + q)) - int64_t(e0);
    if (e >= 0 && e < int64_t(nE)) atomicOr(&present[e / 32], 1u << (e % 32));
  }
  __syncthreads();
  if (tid == 0) {
    unsigned g = blockIdx.y;
    int32_t found = -1;
    for (unsigned w = 0; w < (nE + 31) / 32 && found < 0; ++w) {
      uint32_t m = present[w];
      const unsigned c = __popc(m);
      if (g >= c) {
        g -= c;
        continue;
      }
      for (unsigned k = 0; k < g; ++k) m &= m - 1;
      found = int32_t(w * 32 + __ffs(m) - 1);
    }
    chosen = found;
  }
  __syncthreads();
  if (chosen < 0) return false;
  if (tid < 32) {
    unsigned n = 0;
    for (unsigned base = 0; base < slots; base += 32) {
      const unsigned q = base + tid;
      const bool match = q < slots && int64_t(memra_cu::LoadFresh(ids + q)) - int64_t(e0) == chosen;
      const uint32_t m = __ballot_sync(0xffffffffu, match);
      if (match) list[n + __popc(m & ((1u << tid) - 1))] = uint16_t(q);
      n += __popc(m);
    }
    if (tid == 0) count = n;
  }
  __syncthreads();
  *group = {uint64_t(chosen), count, list};
  return true;
}

// At t = 1 a valid routing names each expert once: block row y is slot y alone, as owned or
// not, with no grouping pass (its barriers and reads would be the whole kernel's latency).
__device__ __forceinline__ bool SlotGroup(const int32_t* __restrict__ ids, uint32_t e0, uint32_t nE,
                                          ExpertGroup* group) {
  __shared__ uint16_t slot;
  const int64_t e = int64_t(memra_cu::LoadFresh(ids + blockIdx.y)) - int64_t(e0);
  if (e < 0 || e >= int64_t(nE)) return false;
  slot = uint16_t(blockIdx.y);
  *group = {uint64_t(e), 1, &slot};
  return true;
}

template <int T>
struct SiluGateUp {
  float* act[T];  // each row's slot row, null for a pass's unused rows
  // f32-ops.ts: silu(g) = f32(g / f32(1 + f32(exp(-g)))), then f32(silu * up).
  __device__ void operator()(unsigned s, uint32_t f, const float (&v)[2]) const {
    if (act[s] == nullptr) return;
    const float g = v[0];
    const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
    act[s][f] = __fmul_rn(silu, v[1]);
  }
};

template <int T, int CW, bool kPerSlot, unsigned U, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    expert_up(float* __restrict__ act, const float* __restrict__ xd,
              const int32_t* __restrict__ ids, const uint16_t* __restrict__ w1,
              const uint16_t* __restrict__ w3, uint32_t e0, uint32_t nE, uint32_t K, uint32_t H,
              uint32_t F, unsigned slots, unsigned split) {
  // Which expert's weights to read is itself the router's output.
  PdlWait();
  PdlLaunchDependents();
  ExpertGroup g;
  if (!(kPerSlot ? SlotGroup(ids, e0, nE, &g) : FindGroup(ids, slots, e0, nE, &g))) return;
  const uint16_t* const w[2] = {w1 + g.local * H * F, w3 + g.local * H * F};
  const uint32_t col0 = (blockIdx.x / split) * kWarpCols * CW;
  for (unsigned b = 0; b < g.n; b += T) {
    const float* xr[T];
    SiluGateUp<T> epi;
#pragma unroll
    for (int s = 0; s < T; ++s) {
      const unsigned i = b + s < g.n ? b + s : g.n - 1;
      const uint64_t q = g.slots[i];
      xr[s] = xd + (q / K) * H;
      epi.act[s] = b + s < g.n ? act + q * F : nullptr;
    }
    GemvTile<T, 2, CW, kWide, kStage, U>(xr, w, F, H, F, col0, split, epi);
  }
}

template <int T>
struct StoreContrib {
  float* contrib[T];  // each row's slot row, null for a pass's unused rows
  __device__ void operator()(unsigned s, uint32_t i, const float (&v)[1]) const {
    if (contrib[s] != nullptr) contrib[s][i] = v[0];
  }
};

template <int T, int CW, bool kPerSlot, unsigned U, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    expert_down(float* __restrict__ contrib, const float* __restrict__ act,
                const int32_t* __restrict__ ids, const uint16_t* __restrict__ w2, uint32_t e0,
                uint32_t nE, uint32_t K, uint32_t H, uint32_t F, unsigned slots, unsigned split) {
  // Only act is expert_up's: the ids are read before the wait, so the first batch of W2 is in
  // flight when expert_up finishes (GemvTile waits after loading it). They were written two
  // kernels back (the router), and this grid can start only once every block of expert_up has
  // returned from its own PdlWait, which waits for that kernel to complete: they are in L2.
  PdlLaunchDependents();
  ExpertGroup g;
  if (!(kPerSlot ? SlotGroup(ids, e0, nE, &g) : FindGroup(ids, slots, e0, nE, &g))) return;
  const uint16_t* const w[1] = {w2 + g.local * F * H};
  const uint32_t col0 = (blockIdx.x / split) * kWarpCols * CW;
  for (unsigned b = 0; b < g.n; b += T) {
    const float* xr[T];
    StoreContrib<T> epi;
#pragma unroll
    for (int s = 0; s < T; ++s) {
      const unsigned i = b + s < g.n ? b + s : g.n - 1;
      const uint64_t q = g.slots[i];
      xr[s] = act + q * F;
      epi.contrib[s] = b + s < g.n ? contrib + q * H : nullptr;
    }
    GemvTile<T, 1, CW, kWide, kStage, U>(xr, w, H, F, H, col0, split, epi);
  }
}

// ---- the norm and the product after it ----
//
// memra_norm_gemv: the MoE norm, then the router's product of it, in one launch (the boundary
// between the two was a launch and a drain of their own in every layer). The product's cluster of
// kNormSplit blocks is also the norm's (cu/model_norm.cuh ClusterSum): the norm's thread j of row
// group g is thread 128 g + j % 128 of block j / 128, four rows a round. Each block writes its
// elements of the norm, the cluster meets, then every block reads the rows back from L2 for its
// share of the product: memra_rmsnorm's bits, then memra_gemv's at split 8.
constexpr unsigned kNormSplit = 8;
constexpr unsigned kNormOwners = memra_model::kNormThreads / kNormSplit;  // a norm's threads a block
constexpr unsigned kNormGroups = kGemvThreads / kNormOwners;              // rows a round

template <int T, int CW, unsigned U, bool kWide>
__global__ void __launch_bounds__(kGemvThreads, 1)
    norm_gemv(float* normOut, float* __restrict__ out, uint64_t ldo, const float* x,
              const uint16_t* __restrict__ gain, const uint16_t* __restrict__ W, uint64_t ldw, uint32_t K,
              uint32_t cols) {
  using namespace memra_model;
  using memra_cu::LoadFresh;
  __shared__ float warpTotals[kGemvThreads / 32];
  const unsigned rank = cg::this_cluster().block_rank();
  const unsigned group = threadIdx.x / kNormOwners, j = rank * kNormOwners + threadIdx.x % kNormOwners;
  float g[kNormHeld];
  NormGains(g, gain, K, j);
  // This thread's rows of W, on their way into L2 while the norm runs (weights: pdl.cuh): the
  // product's loads come after the norm's meeting, where a plain product loads before its wait.
  const uint32_t col = CW * (threadIdx.x % kWarpCols);
  if (col < cols) {
    const uint32_t stride = kNormSplit * kSplitY;
    for (uint64_t c = rank * kSplitY + threadIdx.x / kWarpCols; c < K / kChunk; c += stride) {
#pragma unroll
      for (unsigned r = 0; r < kChunk; ++r) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(W + (c * kChunk + r) * ldw + col));
      }
    }
  }
  PdlWait();
  PdlLaunchDependents();
  for (unsigned s0 = 0; s0 < unsigned(T); s0 += kNormGroups) {
    const unsigned s = s0 + group;
    const auto sum = [&](float v) { return ClusterSum<kNormSplit>(v, warpTotals, group); };
    if (s < unsigned(T)) {
      const float* h = x + uint64_t(s) * K;
      float held[kNormHeld];
#pragma unroll
      for (unsigned m = 0; m < kNormHeld; ++m) held[m] = NormIndex(j, m) < K ? LoadFresh(h + NormIndex(j, m)) : 0.0f;
      NormRow(normOut + uint64_t(s) * K, held, g, [h](uint64_t i) { return LoadFresh(h + i); }, gain, K, sum, j);
    } else {
      sum(0.0f);  // a round's spare group still meets the cluster
    }
  }
  // The rows' elements, each stored by its owner, visible to the whole cluster (the barrier
  // releases and acquires at cluster scope; the product reads them from L2, LoadFresh).
  cg::this_cluster().sync();
  const uint16_t* const w[1] = {W};
  const float* xr[T];
#pragma unroll
  for (int s = 0; s < T; ++s) xr[s] = normOut + uint64_t(s) * K;
  GemvTile<T, 1, CW, kWide, false, U>(xr, w, ldw, K, cols, 0, kNormSplit, StoreRows<false>{out, ldo});
}

// ---- launching ----
//
// The launcher picks only how columns are laid over threads (CW columns a thread, wide or 2-byte
// weight loads, x staged in shared memory or read from L2); none of it reaches the order of a sum.

// The widest CW the accumulators allow for M matrices of T rows (kMaxAccumulators).
constexpr int CwMax(int T, int M) {
  return kMaxAccumulators / (M * T) >= 8 ? 8 : (kMaxAccumulators / (M * T) >= 4 ? 4 : 2);
}

// Every row of W (stride ldw) starts CW-column aligned for one 2*CW-byte load.
bool WideOk(const uint16_t* W, uint64_t ldw, int cw) {
  return memra_cu::Aligned(W, 2 * static_cast<uintptr_t>(cw)) && ldw % static_cast<uint64_t>(cw) == 0;
}

uint64_t Tiles(uint32_t cols, int cw) {
  const uint64_t tile = kWarpCols * static_cast<uint64_t>(cw);
  return (cols + tile - 1) / tile;
}

// The widest aligned CW, narrowed while the launch would leave SMs idle (a narrow matrix).
int PickCw(int cwMax, bool (*wideOk)(int, const void*), const void* ctx, uint32_t cols,
           uint64_t blocksPerTile) {
  int cw = cwMax;
  while (cw > 2 && !wideOk(cw, ctx)) cw /= 2;
  while (cw > 2 && Tiles(cols, cw) * blocksPerTile < kTargetBlocks) cw /= 2;
  return cw;
}

// The dynamic shared memory a gemv launch may take, part[] and staged x together: under the 227
// KB a block may have, room left for the kernels' static shared memory (FindGroup's lists).
constexpr size_t kSmemBudget = 200 * 1024;

// Dynamic shared memory of a launch of T rows of M matrices at CW: part[] (PartBytes) and, where
// it fits the budget, staged x (`stage`). At T = 1 x is read from L2: one float4 of x a chunk
// costs less than the staging's wait at the start (scripts/probes/gemv-sweep.cu: Wo 12.2 us
// staged, 11.6 not).
template <int M, int T, int CW>
size_t GemvSmem(uint32_t K, unsigned split, bool* stage) {
  const size_t part = PartBytes<M, T, CW>();
  const size_t x = size_t(kSplitY) * T * XChunksPerWarp(K, split) * sizeof(float4);
  *stage = T > 1 && part + x <= kSmemBudget;
  return part + (*stage ? x : 0);
}

// grid.x = tiles x split, clustered by split along x (a cluster is one tile's blocks). granted:
// the launcher's record of each of its kernels' shared-memory ceilings (MEMRA_PICK4's order).
template <class Kernel, class... Args>
cudaError_t LaunchTiles(Kernel kernel, uint32_t cols, int cw, unsigned gridY, unsigned split,
                        size_t smem, std::atomic<size_t>& granted, cudaStream_t stream,
                        Args... args) {
  const cudaError_t err = memra_cu::AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(Tiles(cols, cw) * split), gridY, 1);
  return LaunchModelKernel(kernel, grid, dim3(kGemvThreads), smem, split, stream, args...);
}

// The instance of `kernel<..., wide, stage>` for the runtime flags `wide` and `stage` in scope:
// the launchers below share this one dispatch (#undef'd after them). MEMRA_PICK4_AT: its index
// among the four.
#define MEMRA_PICK4(kernel, ...)                                              \
  (wide ? (stage ? kernel<__VA_ARGS__, true, true> : kernel<__VA_ARGS__, true, false>) \
        : (stage ? kernel<__VA_ARGS__, false, true> : kernel<__VA_ARGS__, false, false>))
#define MEMRA_PICK4_AT (2 * int(wide) + int(stage))

struct GemvArgs {
  float* out;
  uint64_t ldo;
  const float* x;
  uint64_t ldx;
  const uint16_t* W;
  uint64_t ldw;
  uint32_t K, cols;
};

template <int T, int CW, bool kAccumulate = false, unsigned U = kBatchChunks<CW, 1, T>>
cudaError_t GemvLaunch(const GemvArgs& a, bool wide, unsigned split, cudaStream_t stream) {
  static std::atomic<size_t> granted[4];
  bool stage;
  const size_t smem = GemvSmem<1, T, CW>(a.K, split, &stage);
  return LaunchTiles(MEMRA_PICK4(gemv, T, CW, kAccumulate, U), a.cols, CW, 1, split, smem,
                     granted[MEMRA_PICK4_AT], stream, a.out, a.ldo, a.x, a.ldx, a.W, a.ldw, a.K,
                     a.cols, split);
}

template <int T, bool kAccumulate>
cudaError_t GemvRows(const GemvArgs& a, unsigned split, cudaStream_t stream) {
  const int cw = PickCw(
      CwMax(T, 1), [](int c, const void* p) {
        const GemvArgs& g = *static_cast<const GemvArgs*>(p);
        return WideOk(g.W, g.ldw, c);
      }, &a, a.cols, split);
  const bool wide = WideOk(a.W, a.ldw, cw);
  if constexpr (CwMax(T, 1) >= 8) {
    if (cw == 8) return GemvLaunch<T, 8, kAccumulate>(a, wide, split, stream);
  }
  if constexpr (CwMax(T, 1) >= 4) {
    if (cw == 4) return GemvLaunch<T, 4, kAccumulate>(a, wide, split, stream);
  }
  return GemvLaunch<T, 2, kAccumulate>(a, wide, split, stream);
}

bool ExpertArgsOk(uint32_t t, uint32_t K) {
  return t <= MEMRA_MODEL_MAX_ROWS && K <= MEMRA_MODEL_MAX_TOPK;
}

struct ExpertUpArgs {
  float* act;
  const float* xd;
  const int32_t* ids;
  const uint16_t *w1, *w3;
  uint32_t e0, nE, K, H, F;
};

// Chunks a thread of expert_up loads before their FMAs. Passes of four rows at CW 4 take three,
// not the one kBatchChunks shrinks to at 32 accumulators: a chunk of the two matrices is 16
// registers, so three fit beside the accumulators (ptxas: 128 registers, 8 bytes spilled). The
// experts of `bench` at t = 8: 218.4 us at one, 202.7 at two, 198.9 at three
// (`scripts/probes/gemv-sweep.cu` with `batch`, which times the production layouts under others).
template <int CW, int T>
constexpr unsigned kExpertUpBatch = T == 4 && CW == 4 ? 3 : kBatchChunks<CW, 2, T>;

// grid.y: one row of blocks a group, as many groups as there can be (slots, or nE if fewer).
// One pass of one row (T = 1) is the t = 1 launch: slot y is block row y (SlotGroup).
template <int T, int CW, unsigned U = kExpertUpBatch<CW, T>>
cudaError_t ExpertUpLaunch(const ExpertUpArgs& a, bool wide, unsigned slots, unsigned groups,
                           unsigned split, cudaStream_t stream) {
  static std::atomic<size_t> granted[4];
  bool stage;
  const size_t smem = GemvSmem<2, T, CW>(a.H, split, &stage);
  return LaunchTiles(MEMRA_PICK4(expert_up, T, CW, T == 1, U), a.F, CW, T == 1 ? slots : groups, split,
                     smem, granted[MEMRA_PICK4_AT], stream, a.act, a.xd, a.ids, a.w1, a.w3, a.e0,
                     a.nE, a.K, a.H, a.F, slots, split);
}

struct ExpertDownArgs {
  float* contrib;
  const float* act;
  const int32_t* ids;
  const uint16_t* w2;
  uint32_t e0, nE, K, H, F;
};

template <int T, int CW, unsigned U = kBatchChunks<CW, 1, T>>
cudaError_t ExpertDownLaunch(const ExpertDownArgs& a, bool wide, unsigned slots, unsigned groups,
                             unsigned split, cudaStream_t stream) {
  static std::atomic<size_t> granted[4];
  bool stage;
  const size_t smem = GemvSmem<1, T, CW>(a.F, split, &stage);
  return LaunchTiles(MEMRA_PICK4(expert_down, T, CW, T == 1, U), a.H, CW, T == 1 ? slots : groups, split,
                     smem, granted[MEMRA_PICK4_AT], stream, a.contrib, a.act, a.ids, a.w2, a.e0,
                     a.nE, a.K, a.H, a.F, slots, split);
}

// Rows a pass of a group takes: one at t = 1 (no grouping), then up to four (a valid routing
// gives an expert at most t slots, about tK/E of them on average: at t = 8 with E = 32 and K = 8,
// two, and three or four for a third of the experts). A group past one pass re-reads its weights,
// from HBM by then: passes of two made `bench`'s experts at t = 8 stream at 2.7 TB/s.
constexpr int ExpertRows(uint32_t t) { return t == 1 ? 1 : (t == 2 ? 2 : 4); }

// The launch for passes of T rows at the widest CW that keeps SMs busy (PickCw). The first half
// at T = 4 stops at CW 4: at 8 its 64 accumulators and two matrices' loads spill (ptxas -v).
template <int T>
constexpr int ExpertUpCwMax = T >= 4 ? 4 : CwMax(T, 2);

template <int T>
cudaError_t ExpertUpRows(const ExpertUpArgs& a, unsigned slots, unsigned groups, unsigned split,
                         cudaStream_t stream) {
  const auto ok = [](int c, const void* p) {
    const ExpertUpArgs& g = *static_cast<const ExpertUpArgs*>(p);
    return WideOk(g.w1, g.F, c) && WideOk(g.w3, g.F, c);
  };
  const int cw = PickCw(ExpertUpCwMax<T>, ok, &a, a.F, uint64_t(split) * groups);
  const bool wide = ok(cw, &a);
  if constexpr (ExpertUpCwMax<T> >= 8) {
    if (cw == 8) return ExpertUpLaunch<T, 8>(a, wide, slots, groups, split, stream);
  }
  if constexpr (ExpertUpCwMax<T> >= 4) {
    if (cw == 4) return ExpertUpLaunch<T, 4>(a, wide, slots, groups, split, stream);
  }
  return ExpertUpLaunch<T, 2>(a, wide, slots, groups, split, stream);
}

template <int T>
cudaError_t ExpertDownRows(const ExpertDownArgs& a, unsigned slots, unsigned groups,
                           unsigned split, cudaStream_t stream) {
  const auto ok = [](int c, const void* p) {
    const ExpertDownArgs& g = *static_cast<const ExpertDownArgs*>(p);
    return WideOk(g.w2, g.H, c);
  };
  const int cw = PickCw(CwMax(T, 1), ok, &a, a.H, uint64_t(split) * groups);
  const bool wide = ok(cw, &a);
  if constexpr (CwMax(T, 1) >= 8) {
    if (cw == 8) return ExpertDownLaunch<T, 8>(a, wide, slots, groups, split, stream);
  }
  if constexpr (CwMax(T, 1) >= 4) {
    if (cw == 4) return ExpertDownLaunch<T, 4>(a, wide, slots, groups, split, stream);
  }
  return ExpertDownLaunch<T, 2>(a, wide, slots, groups, split, stream);
}

template <int T, int CW>
cudaError_t LatentQueryLaunch(const LatentQueryArgs& a, bool wide, cudaStream_t stream) {
  static std::atomic<size_t> granted[4];
  const unsigned split = Split(a.K), latentTiles = static_cast<unsigned>(Tiles(a.R, CW));
  bool stage;
  const size_t smem = GemvSmem<1, T, CW>(a.K, split, &stage);
  auto kernel = MEMRA_PICK4(latent_query, T, CW);
  const cudaError_t err = memra_cu::AllowSmem(kernel, smem, granted[MEMRA_PICK4_AT]);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((latentTiles + Tiles(a.qcols, CW)) * split));
  return LaunchModelKernel(kernel, grid, dim3(kGemvThreads), smem, split, stream, a, latentTiles, split);
}

template <int T>
cudaError_t LatentQueryRows(const LatentQueryArgs& a, cudaStream_t stream) {
  const unsigned split = Split(a.K);
  const auto ok = [](int c, const void* p) {
    const LatentQueryArgs& g = *static_cast<const LatentQueryArgs*>(p);
    return WideOk(g.wdkv, g.R, c) && WideOk(g.wq, g.qcols, c);
  };
  const int cw = PickCw(CwMax(T, 1), ok, &a, a.R + a.qcols, split);
  const bool wide = ok(cw, &a);
  if constexpr (CwMax(T, 1) >= 8) {
    if (cw == 8) return LatentQueryLaunch<T, 8>(a, wide, stream);
  }
  if constexpr (CwMax(T, 1) >= 4) {
    if (cw == 4) return LatentQueryLaunch<T, 4>(a, wide, stream);
  }
  return LatentQueryLaunch<T, 2>(a, wide, stream);
}

struct NormGemvArgs {
  float* normOut;
  float* out;
  uint64_t ldo;
  const float* x;
  const uint16_t *gain, *W;
  uint64_t ldw;
  uint32_t K, cols;
};

// One cluster: cols fit one tile at CW 2, the width PickCw gives a product this narrow.
template <int T>
cudaError_t NormGemvRows(const NormGemvArgs& a, cudaStream_t stream) {
  constexpr unsigned U = kBatchChunks<2, 1, T>;
  auto kernel = WideOk(a.W, a.ldw, 2) ? norm_gemv<T, 2, U, true> : norm_gemv<T, 2, U, false>;
  return LaunchModelKernel(kernel, dim3(kNormSplit), dim3(kGemvThreads), 0, kNormSplit, stream, a.normOut, a.out,
                           a.ldo, a.x, a.gain, a.W, a.ldw, a.K, a.cols);
}

#undef MEMRA_PICK4
#undef MEMRA_PICK4_AT

template <bool kAccumulate>
cudaError_t GemvBatch(const GemvArgs& a, uint32_t t, unsigned split, cudaStream_t stream) {
  switch (t) {
    case 1: return GemvRows<1, kAccumulate>(a, split, stream);
    case 2: return GemvRows<2, kAccumulate>(a, split, stream);
    case 3: return GemvRows<3, kAccumulate>(a, split, stream);
    case 4: return GemvRows<4, kAccumulate>(a, split, stream);
    case 5: return GemvRows<5, kAccumulate>(a, split, stream);
    case 6: return GemvRows<6, kAccumulate>(a, split, stream);
    case 7: return GemvRows<7, kAccumulate>(a, split, stream);
    case 8: return GemvRows<8, kAccumulate>(a, split, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" cudaError_t memra_gemv(float* out, uint64_t ldo, const float* x, uint64_t ldx,
                                  const uint16_t* W, uint64_t ldw, uint32_t K, uint32_t cols,
                                  uint32_t t, int accumulate, uint32_t split,
                                  cudaStream_t stream) {
  if (t == 0 || cols == 0) return cudaSuccess;
  if (split > kMaxSplit) return cudaErrorInvalidValue;
  const GemvArgs a{out, ldo, x, ldx, W, ldw, K, cols};
  const unsigned s = split == 0 ? Split(K) : split;
  return accumulate ? GemvBatch<true>(a, t, s, stream) : GemvBatch<false>(a, t, s, stream);
}

extern "C" cudaError_t memra_expert_up(float* act, const float* xd, const int32_t* ids,
                                       const uint16_t* w1, const uint16_t* w3, uint32_t e0,
                                       uint32_t nE, uint32_t t, uint32_t K, uint32_t H,
                                       uint32_t F, cudaStream_t stream) {
  if (!ExpertArgsOk(t, K) || nE > MEMRA_MODEL_MAX_EXPERTS) return cudaErrorInvalidValue;
  if (t == 0 || K == 0 || F == 0 || nE == 0) return cudaSuccess;
  const ExpertUpArgs a{act, xd, ids, w1, w3, e0, nE, K, H, F};
  const unsigned split = Split(H, kExpertUpRows), slots = t * K, groups = slots < nE ? slots : nE;
  switch (ExpertRows(t)) {
    case 1: return ExpertUpRows<1>(a, slots, groups, split, stream);
    case 2: return ExpertUpRows<2>(a, slots, groups, split, stream);
    default: return ExpertUpRows<4>(a, slots, groups, split, stream);
  }
}

extern "C" cudaError_t memra_expert_down(float* contrib, const float* act, const int32_t* ids,
                                         const uint16_t* w2, uint32_t e0, uint32_t nE, uint32_t t,
                                         uint32_t K, uint32_t H, uint32_t F,
                                         cudaStream_t stream) {
  if (!ExpertArgsOk(t, K) || nE > MEMRA_MODEL_MAX_EXPERTS) return cudaErrorInvalidValue;
  if (t == 0 || K == 0 || H == 0 || nE == 0) return cudaSuccess;
  const ExpertDownArgs a{contrib, act, ids, w2, e0, nE, K, H, F};
  const unsigned split = Split(F), slots = t * K, groups = slots < nE ? slots : nE;
  switch (ExpertRows(t)) {
    case 1: return ExpertDownRows<1>(a, slots, groups, split, stream);
    case 2: return ExpertDownRows<2>(a, slots, groups, split, stream);
    default: return ExpertDownRows<4>(a, slots, groups, split, stream);
  }
}

extern "C" cudaError_t memra_latent_query(float* q, const float* a, const uint16_t* wdkv,
                                          const uint16_t* wq, float* cache, uint64_t slotStride,
                                          const int32_t* pos, uint32_t K, uint32_t R,
                                          uint32_t qcols, uint32_t t, uint32_t P,
                                          cudaStream_t stream) {
  if (t == 0 || (R == 0 && qcols == 0)) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || slotStride < uint64_t(P) * R) return cudaErrorInvalidValue;
  const LatentQueryArgs args{q, a, wdkv, wq, cache, slotStride, pos, K, R, qcols, P};
  switch (t) {
    case 1: return LatentQueryRows<1>(args, stream);
    case 2: return LatentQueryRows<2>(args, stream);
    case 3: return LatentQueryRows<3>(args, stream);
    case 4: return LatentQueryRows<4>(args, stream);
    case 5: return LatentQueryRows<5>(args, stream);
    case 6: return LatentQueryRows<6>(args, stream);
    case 7: return LatentQueryRows<7>(args, stream);
    case 8: return LatentQueryRows<8>(args, stream);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t memra_norm_gemv(float* normOut, float* out, uint64_t ldo, const float* x,
                                       const uint16_t* gain, const uint16_t* W, uint64_t ldw, uint32_t K,
                                       uint32_t cols, uint32_t t, cudaStream_t stream) {
  static_assert(MEMRA_MODEL_NORM_GEMV_MAX_COLS == kWarpCols * 2, "one column tile at CW 2");
  if (t == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || K == 0 || K > (1u << 24) || cols == 0 || cols > MEMRA_MODEL_NORM_GEMV_MAX_COLS)
    return cudaErrorInvalidValue;
  const NormGemvArgs a{normOut, out, ldo, x, gain, W, ldw, K, cols};
  switch (t) {
    case 1: return NormGemvRows<1>(a, stream);
    case 2: return NormGemvRows<2>(a, stream);
    case 3: return NormGemvRows<3>(a, stream);
    case 4: return NormGemvRows<4>(a, stream);
    case 5: return NormGemvRows<5>(a, stream);
    case 6: return NormGemvRows<6>(a, stream);
    case 7: return NormGemvRows<7>(a, stream);
    default: return NormGemvRows<8>(a, stream);
  }
}
