// memra_norm_gemv: the MoE norm, then the router's product of it, in one launch (the boundary
// between the two was a launch and a drain of their own in every layer). The product is one
// cluster of kNormSplit blocks, split 8 (memra_gemv's bits at split 8).
//
// The norm costs no cluster meeting of its own. Each thread stands in for kNormThreads /
// kGemvThreads of memra_rmsnorm's threads (the same elements, the same butterfly, the warp totals
// in the same order: its bits), so one block makes a row's whole sum. With one row (t = 1) every
// block of the cluster norms it, redundantly: its 16 KB (at H = 4096) come from L2 in one round
// trip, where meeting the cluster to share the sum cost two cluster barriers and a third before
// the product could read the normed row back from L2; a block stores the elements its share of
// the product reads, straight into the product's staged x too, so the product starts without
// another trip. With several rows, block r norms row r and the cluster meets once.
#include <stdint.h>

#include <atomic>

#include "cu/gemv_launch.cuh"
#include "cu/gemv_tile.cuh"
#include "cu/model.h"
#include "cu/model_norm.cuh"
#include "cu/prefetch_l2.cuh"

namespace {

using namespace memra_tile;  // the tile and its launcher, whose instances this file holds

constexpr unsigned kNormSplit = 8;
constexpr unsigned kStandIns = memra_model::kNormThreads / kGemvThreads;  // norm threads a thread
static_assert(kStandIns * kGemvThreads == memra_model::kNormThreads, "whole norm warps a thread's warp");
constexpr unsigned kNormWarps = memra_model::kNormThreads / 32;
// Elements of a norm thread held from the first round trip: H up to 4096 (the rest, in the same
// order, one at a time: memra_model::NormSquares).
constexpr unsigned kHeld = 4;
// Rows of K a block's share of the product reads, in runs of kShareRun: chunk c (4 rows) is
// block (c / kSplitY) % kNormSplit's (GemvTile's chunks first + i * stride at split 8).
constexpr unsigned kShareRun = kSplitY * kChunk;
constexpr unsigned kShareStride = kShareRun * kNormSplit;

// The e-th of thread tid's elements of the block's share, K or past it when there is none.
__device__ __forceinline__ uint64_t ShareIndex(unsigned rank, unsigned tid, unsigned e) {
  const uint64_t idx = tid + uint64_t(e) * kGemvThreads;
  return (idx / kShareRun) * kShareStride + rank * kShareRun + idx % kShareRun;
}

// The divisor of row h (its memra_rmsnorm bits), made by this block alone: each thread stands in
// for kStandIns norm threads, holding their first kHeld elements (held, loaded by the caller in
// one round trip), each warp's butterfly into warpTotals, then the 32 totals in order once the
// block has met (BlockSumFixed's order). Every thread of the block calls it; `norms` false: a
// block with no row, which still meets the others.
__device__ __forceinline__ float RowScale(const float (&held)[kStandIns][kHeld], const float* h, uint32_t K,
                                          bool norms) {
  __shared__ float warpTotals[kNormWarps];
  __shared__ float scale;
  if (norms) {
#pragma unroll
    for (unsigned v = 0; v < kStandIns; ++v) {
      const unsigned j = threadIdx.x + v * kGemvThreads;
      float ss = memra_model::NormSquares(held[v], [h](uint64_t i) { return memra_cu::LoadFresh(h + i); }, K, j);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
      if (j % 32 == 0) warpTotals[j / 32] = ss;
    }
  }
  __syncthreads();
  if (norms && threadIdx.x == 0) {
    float total = warpTotals[0];
    for (unsigned w = 1; w < kNormWarps; ++w) total = __fadd_rn(total, warpTotals[w]);
    scale = memra_model::NormScale(total, K);
  }
  __syncthreads();
  return scale;
}

// Each block norms one row in one round trip (RowScale). One row (T = 1): every block norms it and
// stores its share, which with kStage also goes straight into the product's staged x. Several:
// block r norms row r (T <= kNormSplit), stores it whole, and the cluster meets before the
// product reads the rows from L2 (staged by StageX with kStage). Every block norming every row
// held T * 8 elements a thread in flight: at t = 8 the launch took 27 us a layer against 12 a row
// a block (the kernel table, eager); at t = 2 and 4 the two ways measured the same (`bash
// scripts/gpu-session.sh ab-roofline`, three rounds).
template <int T, int CW, unsigned U, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    norm_gemv(float* normOut, float* __restrict__ out, uint64_t ldo, const float* x,
              const uint16_t* __restrict__ gain, const uint16_t* __restrict__ W, uint64_t ldw, uint32_t K,
              uint32_t cols) {
  MEMRA_TRACE_KERNEL(kTraceNormGemv);
  using namespace memra_model;
  using memra_cu::LoadFresh;
  constexpr bool kOwnRow = T > 1;
  static_assert(!kOwnRow || T <= int(kNormSplit), "a row a block");
  const unsigned rank = cg::this_cluster().block_rank(), tid = threadIdx.x;
  const unsigned s = kOwnRow ? rank : 0;  // the row this block norms
  const bool norms = s < unsigned(T);
  const float* h = x + uint64_t(s) * K;
  // This thread's rows of W, on their way into L2 while the norm runs (weights: pdl.cuh): the
  // product's loads come after the norm, where a plain product loads before its wait.
  const uint32_t col = CW * (tid % kWarpCols);
  if (col < cols) {
    const uint32_t stride = kNormSplit * kSplitY;
    for (uint64_t c = rank * kSplitY + tid / kWarpCols; c < K / kChunk; c += stride) {
#pragma unroll
      for (unsigned r = 0; r < kChunk; ++r) {
        memra_cu::PrefetchL2(W + (c * kChunk + r) * ldw + col);
      }
    }
  }
  // The gains of the elements this thread stores first (weights, so before the wait): its held
  // ones of a whole row, or the first of its share.
  const uint64_t k0 = ShareIndex(rank, tid, 0);
  float g[kStandIns][kHeld] = {}, g0 = 0.0f;
  if constexpr (kOwnRow) {
#pragma unroll
    for (unsigned v = 0; v < kStandIns; ++v) {
#pragma unroll
      for (unsigned m = 0; m < kHeld; ++m) {
        const uint64_t i = NormIndex(tid + v * kGemvThreads, m);
        g[v][m] = i < K ? Bf16ToF32(gain[i]) : 0.0f;
      }
    }
  } else {
    g0 = k0 < K ? Bf16ToF32(gain[k0]) : 0.0f;
  }
  PdlWait();
  PdlLaunchDependents();
  // The row's held elements and, for a share, its first element: one round trip.
  float held[kStandIns][kHeld];
#pragma unroll
  for (unsigned v = 0; v < kStandIns; ++v) {
#pragma unroll
    for (unsigned m = 0; m < kHeld; ++m) {
      const uint64_t i = NormIndex(tid + v * kGemvThreads, m);
      held[v][m] = norms && i < K ? LoadFresh(h + i) : 0.0f;
    }
  }
  const float h0 = !kOwnRow && k0 < K ? LoadFresh(h + k0) : 0.0f;
  const float r = RowScale(held, h, K, norms);
  MEMRA_TRACE_MARK(0);
  float* o = normOut + uint64_t(s) * K;
  if constexpr (kOwnRow) {
    if (norms) {
#pragma unroll
      for (unsigned v = 0; v < kStandIns; ++v) {
        const unsigned j = tid + v * kGemvThreads;
#pragma unroll
        for (unsigned m = 0; m < kHeld; ++m) {
          if (NormIndex(j, m) < K) o[NormIndex(j, m)] = __fmul_rn(__fdiv_rn(held[v][m], r), g[v][m]);
        }
        for (uint64_t i = j + uint64_t(kHeld) * kNormThreads; i < K; i += kNormThreads) {
          o[i] = __fmul_rn(__fdiv_rn(LoadFresh(h + i), r), Bf16ToF32(gain[i]));
        }
      }
    }
    // Every row, stored by its block, visible to the whole cluster (the barrier releases and
    // acquires at cluster scope; the product reads them from L2, LoadFresh).
    cg::this_cluster().sync();
  } else {
    extern __shared__ float4 gemvSmem[];
    float* const staged = reinterpret_cast<float*>(gemvSmem) + PartBytes<1, T, CW>() / sizeof(float);
    const uint32_t q = XChunksPerWarp(K, kNormSplit);
    const uint64_t full = uint64_t(K / kChunk) * kChunk;
    // Each element of the share into normOut and, for a full chunk, into the staged x.
    const auto put = [&](uint64_t k, float v) {
      o[k] = v;
      if constexpr (kStage) {
        if (k < full) staged[StagedX(k, 0, T, q, rank, kNormSplit)] = v;
      }
    };
    if (k0 < K) put(k0, __fmul_rn(__fdiv_rn(h0, r), g0));
    for (unsigned e = 1;; ++e) {
      const uint64_t k = ShareIndex(rank, tid, e);
      if (k >= K) break;
      put(k, __fmul_rn(__fdiv_rn(LoadFresh(h + k), r), Bf16ToF32(gain[k])));
    }
    // The share, stored by this block's threads, visible to all of them: in shared memory, and in
    // L2 for what the product still reads from normOut (a row's tail, a clipped thread, or all of
    // it when nothing is staged).
    __syncthreads();
  }
  MEMRA_TRACE_MARK(1);
  const uint16_t* const w[1] = {W};
  const float* xr[T];
#pragma unroll
  for (int i = 0; i < T; ++i) xr[i] = normOut + uint64_t(i) * K;
  GemvTile<T, 1, CW, kWide, kStage, U, kDynamicPart<1, T, CW>, kStage && !kOwnRow>(
      xr, w, ldw, K, cols, 0, kNormSplit, StoreRows<false>{out, ldo});
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

// One cluster: cols fit one tile at CW 2, the width PickCw gives a product this narrow. x goes
// through shared memory where that fits the budget (any K of a real model).
template <int T>
cudaError_t NormGemvRows(const NormGemvArgs& a, cudaStream_t stream) {
  constexpr unsigned U = kBatchChunks<2, 1, T>;
  static std::atomic<size_t> granted[4];
  const size_t staged = PartBytes<1, T, 2>() +
                        size_t(kSplitY) * T * XChunksPerWarp(a.K, kNormSplit) * sizeof(float4);
  const bool wide = WideOk(a.W, a.ldw, 2), stage = staged <= kSmemBudget;
  auto kernel = MEMRA_PICK4(norm_gemv, T, 2, U);
  const size_t bytes = stage ? staged : PartBytes<1, T, 2>();
  const cudaError_t err = memra_cu::AllowSmem(kernel, bytes, granted[MEMRA_PICK4_AT]);
  if (err != cudaSuccess) return err;
  return LaunchModelKernel(kernel, dim3(kNormSplit), dim3(kGemvThreads), bytes, kNormSplit, stream, a.normOut, a.out,
                           a.ldo, a.x, a.gain, a.W, a.ldw, a.K, a.cols);
}

}  // namespace

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
