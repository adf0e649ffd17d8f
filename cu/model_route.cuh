// A row's routing by one warp: the K largest of its E logits and their softmax (f32-ops.ts topk
// and softmaxInPlace), for route_quant and the router (cu/model_moe.cu) and for memra_norm_gemv's
// routing form (cu/model_norm_gemv.cu), which holds the logits it has just made in shared memory.
// `load(i)` gives logit i wherever the caller keeps them; the picks and weights are the same bits
// whatever it reads from.
//
// f32-ops.ts topk is a sequential scan: the first untaken index admits itself, then only a strictly
// greater value replaces the pick. So a pick is the first untaken index when its value is NaN, and
// otherwise the lowest index of the largest non-NaN untaken value: both are order-free, which lets
// 32 lanes (lane l holds elements l, l + 32, ...) find it.
#pragma once

#include <math.h>
#include <stdint.h>

#include "cu/model.h"

namespace memra_route {

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
//
// Without a NaN among the E, that scan picks the K largest values, a tie to the lower index, in
// that order: lane l's pick, if any, is its rank, the elements that beat it, which 32 shuffles
// count at once. The K picks one at a time were each a ballot, a shuffle and a five-step
// butterfly after the last: the routing warp outlived the rest of route_quant by about 2 us
// (scripts/probes/step-timeline-probe.cu). With a NaN, the scan a pick at a time.
template <class Load>
__device__ __forceinline__ void RouteRowNarrow(int32_t* __restrict__ ids, float* __restrict__ wts,
                                               const Load& load, uint32_t E, uint32_t K, unsigned lane) {
  __shared__ float picked[32][MEMRA_MODEL_MAX_TOPK];  // a warp's picks' values, in pick order
  const float v = lane < E ? load(lane) : 0.0f;
  float sel[MEMRA_MODEL_MAX_TOPK];
  if (!__any_sync(0xffffffffu, lane < E && isnan(v))) {
    unsigned rank = 0;
#pragma unroll
    for (unsigned j = 0; j < 32; ++j) {
      const float o = __shfl_sync(0xffffffffu, v, j);
      rank += j < E && (o > v || (o == v && j < lane));
    }
    float* const mine = picked[threadIdx.x / 32];
    if (lane < E && rank < K) {
      ids[rank] = int32_t(lane);
      mine[rank] = v;
    }
    __syncwarp();
    if (lane == 0) {
      for (uint32_t k = 0; k < K; ++k) sel[k] = mine[k];
      RouteWeights(wts, sel, K);
    }
    return;
  }
  bool taken = lane >= E;
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

// A row's picks and weights, by the 32 lanes of one warp (all of which call it): past E = 32 the
// scan a pick at a time, lane l over elements l, l + 32, ... (Keeping a lane's elements in a
// local array, or placing every element at once by its rank read from memory, measured slower:
// 10.5 and 29 us against 7.3 at E = 32, K = 8, scripts/probes/step-kernels-probe.cu.)
template <class Load>
__device__ __forceinline__ void RouteRow(int32_t* __restrict__ ids, float* __restrict__ wts, const Load& load,
                                         uint32_t E, uint32_t K, unsigned lane) {
  if (E <= 32) return RouteRowNarrow(ids, wts, load, E, K, lane);
  uint32_t taken = 0;  // bit m: element lane + 32m (E <= 1024)
  float sel[MEMRA_MODEL_MAX_TOPK];
  for (uint32_t k = 0; k < K; ++k) {
    uint32_t first = kNone, bi = kNone;
    float bv = 0.0f;
    for (uint32_t m = 0, i = lane; i < E; ++m, i += 32) {
      if ((taken >> m) & 1u) continue;
      const float v = load(i);
      if (first == kNone) first = i;
      if (!isnan(v) && (bi == kNone || v > bv)) bv = v, bi = i;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    WarpBest(bv, bi);
    // K <= E, so an untaken element exists; if the first one is NaN it is the pick.
    const float f = load(first);
    const uint32_t pick = isnan(f) ? first : bi;
    if (pick % 32 == lane) taken |= 1u << (pick / 32);
    sel[k] = isnan(f) ? f : bv;
    if (lane == 0) ids[k] = int32_t(pick);
  }
  if (lane == 0) RouteWeights(wts, sel, K);
}

}  // namespace memra_route
