// The MoE head's per-row pieces: the router's picks and weights (RouteRow, one warp a row) and
// the fp8 round trip of one 128-element block (QuantizeBlock, one warp a block). route_quant
// (cu/model_moe.cu) and route_head (cu/model_gemv.cu, the router's product with both in its
// launch) share them, so the two give the same bits.
#pragma once

#include <math.h>
#include <stdint.h>

#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/pdl.cuh"

namespace memra_moe {

using memra_cu::LoadFresh;
using memra_model::E4m3Decode;
using memra_model::E4m3Encode;

// One warp per row. f32-ops.ts topk is a sequential scan: the first untaken index admits itself,
// then only a strictly greater value replaces the pick. So a pick is the first untaken index
// when its value is NaN, and otherwise the lowest index of the largest non-NaN untaken value:
// both are order-free, which lets 32 lanes (lane l holds elements l, l + 32, ...) find it.
constexpr uint32_t kNone = 0xffffffffu;

// The best untaken (value, index) over the warp: every lane offers (bv, bi), kNone for none;
// all lanes end with the lowest index of the largest value.
__device__ __forceinline__ void WarpBest(float& bv, uint32_t& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const uint32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oi != kNone && (bi == kNone || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
  }
}

// f32-ops.ts softmaxInPlace over the K selected, in slot order (lane 0).
__device__ __forceinline__ void RouteWeights(float* __restrict__ wts, float (&sel)[MEMRA_MODEL_MAX_TOPK],
                                             uint32_t K) {
  float mx = -INFINITY;
  for (uint32_t k = 0; k < K; ++k) mx = sel[k] > mx ? sel[k] : mx;
  float sum = 0.0f;
  for (uint32_t k = 0; k < K; ++k) {
    sel[k] = expf(__fsub_rn(sel[k], mx));
    sum = __fadd_rn(sum, sel[k]);
  }
  for (uint32_t k = 0; k < K; ++k) wts[k] = __fdiv_rn(sel[k], sum);
}

// E <= 32: lane l holds element l in a register, read once, so the K picks cost no memory
// round trip each (7.3 us at E = 32, K = 8 reading x at every pick). The same picks as the scan
// below: the first untaken index, and the best untaken non-NaN value.
__device__ __forceinline__ void RouteRowNarrow(int32_t* __restrict__ ids, float* __restrict__ wts,
                                               const float* __restrict__ x, uint32_t E,
                                               uint32_t K, unsigned lane) {
  const float v = lane < E ? LoadFresh(x + lane) : 0.0f;
  bool taken = lane >= E;
  float sel[MEMRA_MODEL_MAX_TOPK];
  for (uint32_t k = 0; k < K; ++k) {
    // K <= E, so an untaken element exists; if the first one is NaN it is the pick.
    const uint32_t first = __ffs(__ballot_sync(0xffffffffu, !taken)) - 1;
    const float f = __shfl_sync(0xffffffffu, v, first);
    float bv = v;
    uint32_t bi = !taken && !isnan(v) ? lane : kNone;
    WarpBest(bv, bi);
    const uint32_t pick = isnan(f) ? first : bi;
    if (pick == lane) taken = true;
    sel[k] = isnan(f) ? f : bv;
    if (lane == 0) ids[k] = int32_t(pick);
  }
  if (lane == 0) RouteWeights(wts, sel, K);
}

// Row s's picks and weights, by the 32 lanes of one warp (all of which call it): the scan a pick
// at a time, lane l over elements l, l + 32, ... (Keeping a lane's elements in a local array, or
// placing every element at once by its rank, measured slower: 10.5 and 29 us against 7.3 at
// E = 32, K = 8, scripts/probes/step-kernels-probe.cu.)
__device__ __forceinline__ void RouteRow(int32_t* __restrict__ ids, float* __restrict__ wts,
                                         const float* __restrict__ x, uint32_t E, uint32_t K,
                                         unsigned lane) {
  if (E <= 32) return RouteRowNarrow(ids, wts, x, E, K, lane);
  uint32_t taken = 0;  // bit m: element lane + 32m (E <= 1024)
  float sel[MEMRA_MODEL_MAX_TOPK];
  for (uint32_t k = 0; k < K; ++k) {
    uint32_t first = kNone, bi = kNone;
    float bv = 0.0f;
    for (uint32_t m = 0, i = lane; i < E; ++m, i += 32) {
      if ((taken >> m) & 1u) continue;
      const float v = LoadFresh(x + i);
      if (first == kNone) first = i;
      if (!isnan(v) && (bi == kNone || v > bv)) bv = v, bi = i;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    WarpBest(bv, bi);
    // K <= E, so an untaken element exists; if the first one is NaN it is the pick.
    const float f = LoadFresh(x + first);
    const uint32_t pick = isnan(f) ? first : bi;
    if (pick % 32 == lane) taken |= 1u << (pick / 32);
    sel[k] = isnan(f) ? f : bv;
    if (lane == 0) ids[k] = int32_t(pick);
  }
  if (lane == 0) RouteWeights(wts, sel, K);
}

// ---- fp8 quantize ----

constexpr uint32_t kQB = MEMRA_MODEL_QUANT_BLOCK;
static_assert(kQB == 32 * 4, "a warp takes one block, four elements a lane");

// NaN-propagating max (Math.max's rule): one NaN in a block makes its scale NaN, as in the
// oracle. Exact and order-free otherwise.
__device__ __forceinline__ float MaxNan(float a, float b) {
  return (isnan(a) || isnan(b)) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

// One 128-element block by one warp; lane l holds elements 4l .. 4l + 3 of it. With xd, also
// the block's round trip xd = f32(decode(xq)) * xs, as memra_dequantize computes it.
template <bool kVec>
__device__ __forceinline__ void QuantizeBlock(uint8_t* __restrict__ xq, float* __restrict__ xs,
                                              float* __restrict__ xd, const float* __restrict__ b,
                                              uint64_t blk, unsigned lane) {
  const uint64_t at = blk * kQB + 4 * lane;
  float v[4];
  if (kVec) {
    const float4 v4 = LoadFresh(reinterpret_cast<const float4*>(b + at));
    v[0] = v4.x, v[1] = v4.y, v[2] = v4.z, v[3] = v4.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = LoadFresh(b + at + i);
  }
  float mx = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) mx = MaxNan(mx, fabsf(v[i]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = MaxNan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const float scale = mx == 0.0f ? 1.0f : __fdiv_rn(mx, 448.0f);
  if (lane == 0) xs[blk] = scale;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint8_t q = E4m3Encode(__fdiv_rn(v[i], scale));
    xq[at + i] = q;
    if (xd != nullptr) xd[at + i] = __fmul_rn(E4m3Decode(q), scale);
  }
}

}  // namespace memra_moe
