// The rmsnorm of one row by one block (f32-ops.ts rmsnorm), as the pieces the kernels that end in
// a norm share: memra_rmsnorm (cu/model.cu) and memra_moe_combine_norm (cu/model_moe.cu), which
// norms the row it has just merged. Both own the same elements per thread and reduce in the same
// order, so the fused kernel's output is the two kernels' bit for bit.
//
// Thread j of kNormThreads owns elements j, j + kNormThreads, ...: its partial sum of squares
// runs in increasing i, and BlockSumFixed adds the partials in an order fixed by the block size,
// so the whole order depends only on H. A row may also be spread over a cluster of blocks whose
// threads together are the kNormThreads (ClusterSum): the same owners, the same order.
#pragma once

#include <cooperative_groups.h>
#include <stdint.h>

#include "cu/cluster_started.cuh"
#include "cu/model_bits.cuh"
#include "cu/model_reduce.cuh"
#include "cu/trace.cuh"

namespace memra_model {

constexpr unsigned kNormThreads = 1024;  // a few elements a thread: few dependent trips
constexpr unsigned kNormHeld = 8;        // H up to 8192 held in registers, read once
constexpr uint64_t kNormRest = uint64_t(kNormHeld) * kNormThreads;

// j below is the norm's thread (< kNormThreads): threadIdx.x in one block, or its place in the
// cluster. Element m of its held ones: i = j + m * kNormThreads.
__device__ __forceinline__ uint64_t NormIndex(unsigned j, unsigned m) { return j + uint64_t(m) * kNormThreads; }

// The gains of thread j's held elements: weights, so loaded before the wait (cu/pdl.cuh).
__device__ __forceinline__ void NormGains(float (&g)[kNormHeld], const uint16_t* __restrict__ gain,
                                          uint32_t H, unsigned j) {
#pragma unroll
  for (unsigned m = 0; m < kNormHeld; ++m) g[m] = NormIndex(j, m) < H ? Bf16ToF32(gain[NormIndex(j, m)]) : 0.0f;
}

// BlockSumFixed<kNormThreads> over a cluster of kBlocks blocks of kNormThreads / kBlocks threads:
// each warp's butterfly, then the 32 warp totals in order (warp w of block r is the norm's warp
// r * warps + w). Each warp stores its total into every block's shared memory, the cluster meets
// once, and each block adds the totals from its own memory. The pull form (each block reading the
// others' totals after the meeting) needed a second meeting so that no block left while another
// still read it: in the traced chain (scripts/probes/step-timeline-probe.cu, t = 1, on an H100)
// the merge's two meetings were done 2.3 and 4.6 us after its sum. warpTotals: 32 floats of
// shared memory (every warp of the cluster's). Every thread of the cluster calls it, once, after
// memra_cu::ClusterArriveStarted (cu/cluster_started.cuh).
template <unsigned kBlocks>
__device__ __forceinline__ float ClusterSum(float v, float* warpTotals) {
  constexpr unsigned kWarps = kNormThreads / kBlocks / 32, kAll = kNormThreads / 32;
  namespace cg = cooperative_groups;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  memra_cu::ClusterWaitStarted();
  if (threadIdx.x % 32 == 0) {
    memra_cu::StoreToEveryBlock<kBlocks>(warpTotals, cg::this_cluster().block_rank() * kWarps + threadIdx.x / 32, v);
  }
  // The stores, released and acquired at cluster scope; nothing is read across blocks after it.
  cg::this_cluster().sync();
  MEMRA_TRACE_MARK(2);
  float total = warpTotals[0];
#pragma unroll
  for (unsigned w = 1; w < kAll; ++w) total = __fadd_rn(total, warpTotals[w]);
  MEMRA_TRACE_MARK(3);
  return total;
}

// Thread j's partial sum of squares: held[m] = v[NormIndex(j, m)] for m < kHeld, rest(i) = v[i]
// past them. Both loops run in increasing i, so any kHeld gives the same bits: a kernel that
// holds fewer elements a thread (memra_norm_gemv) sums in the order memra_rmsnorm does.
template <unsigned kHeld, class Rest>
__device__ __forceinline__ float NormSquares(const float (&held)[kHeld], const Rest& rest, uint32_t H, unsigned j) {
  float ss = 0.0f;
#pragma unroll
  for (unsigned m = 0; m < kHeld; ++m) {
    if (NormIndex(j, m) < H) ss = __fadd_rn(ss, __fmul_rn(held[m], held[m]));
  }
  for (uint64_t i = j + uint64_t(kHeld) * kNormThreads; i < H; i += kNormThreads) {
    const float v = rest(i);
    ss = __fadd_rn(ss, __fmul_rn(v, v));
  }
  return ss;
}

// The divisor of a row whose squares sum to ss, one rounding per operation: mean = ss / H (H
// exact in f32 below 2^24), r = sqrt(mean + 1e-6f); an element is then (h / r) * g.
__device__ __forceinline__ float NormScale(float ss, uint32_t H) {
  return __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(H)), 1e-6f));
}

// o = rmsnorm(v) for one row, by its thread j: held[m] = v[NormIndex(j, m)], rest(i) = v[i] for i >= kNormRest (H
// past 8192). Every thread of the block (or cluster) calls it.
// sum(v): the block's (or cluster's) fixed-order total of every thread's v.
template <class Rest, class Sum>
__device__ __forceinline__ void NormRow(float* o, const float (&held)[kNormHeld], const float (&g)[kNormHeld],
                                        const Rest& rest, const uint16_t* __restrict__ gain, uint32_t H,
                                        const Sum& sum, unsigned j) {
  const float r = NormScale(sum(NormSquares(held, rest, H, j)), H);
#pragma unroll
  for (unsigned m = 0; m < kNormHeld; ++m) {
    if (NormIndex(j, m) < H) o[NormIndex(j, m)] = __fmul_rn(__fdiv_rn(held[m], r), g[m]);
  }
  for (uint64_t i = j + kNormRest; i < H; i += kNormThreads) {
    o[i] = __fmul_rn(__fdiv_rn(rest(i), r), Bf16ToF32(gain[i]));
  }
}

}  // namespace memra_model
