// The fp8 round trip of the expert input, a 128-wide block at a time (MODEL.md: xs = max|b| / 448
// or 1, xq = e4m3(b / xs), xd = f32(xq) * xs), for route_quant and quantize (cu/model_moe.cu) and
// for memra_norm_gemv's routing form (cu/model_norm_gemv.cu), which quantizes the row it has just
// normed from its registers. A block's max is exact in any order and each element's code depends
// on the element and the max alone, so every form that finds the same max gives the same bits.
#pragma once

#include <math.h>
#include <stdint.h>

#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/pdl.cuh"

namespace memra_quant {

constexpr uint32_t kQB = MEMRA_MODEL_QUANT_BLOCK;
static_assert(kQB == 32 * 4, "a warp takes one block, four elements a lane");

// NaN-propagating max (Math.max's rule): one NaN in a block makes its scale NaN, as in the
// oracle. Exact and order-free otherwise.
__device__ __forceinline__ float MaxNan(float a, float b) {
  return (isnan(a) || isnan(b)) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

// max over the warp of |v| (with 0), every lane ending with it.
__device__ __forceinline__ float WarpAbsMax(float mx) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = MaxNan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  return mx;
}

// A block's scale from the max of its |b|.
__device__ __forceinline__ float BlockScale(float mx) { return mx == 0.0f ? 1.0f : __fdiv_rn(mx, 448.0f); }

// Element v of a block with scale `scale` into xq[at] and, with xd, its round trip into xd[at].
__device__ __forceinline__ void PutCode(uint8_t* __restrict__ xq, float* __restrict__ xd, uint64_t at, float v,
                                        float scale) {
  const uint8_t q = memra_model::E4m3Encode(__fdiv_rn(v, scale));
  xq[at] = q;
  if (xd != nullptr) xd[at] = __fmul_rn(memra_model::E4m3Decode(q), scale);
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
    const float4 v4 = memra_cu::LoadFresh(reinterpret_cast<const float4*>(b + at));
    v[0] = v4.x, v[1] = v4.y, v[2] = v4.z, v[3] = v4.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = memra_cu::LoadFresh(b + at + i);
  }
  float mx = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) mx = MaxNan(mx, fabsf(v[i]));
  const float scale = BlockScale(WarpAbsMax(mx));
  if (lane == 0) xs[blk] = scale;
#pragma unroll
  for (int i = 0; i < 4; ++i) PutCode(xq, xd, at + i, v[i], scale);
}

}  // namespace memra_quant
