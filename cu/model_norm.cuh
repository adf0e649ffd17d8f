// The rmsnorm of one row by one block (f32-ops.ts rmsnorm), as the pieces the kernels that end in
// a norm share: memra_rmsnorm (cu/model.cu) and memra_moe_combine_norm (cu/model_moe.cu), which
// norms the row it has just merged. Both own the same elements per thread and reduce in the same
// order, so the fused kernel's output is the two kernels' bit for bit.
//
// Thread j of kNormThreads owns elements j, j + kNormThreads, ...: its partial sum of squares
// runs in increasing i, and BlockSumFixed adds the partials in an order fixed by the block size,
// so the whole order depends only on H.
#pragma once

#include <stdint.h>

#include "cu/model_bits.cuh"
#include "cu/model_reduce.cuh"

namespace memra_model {

constexpr unsigned kNormThreads = 1024;  // a few elements a thread: few dependent trips
constexpr unsigned kNormHeld = 8;        // H up to 8192 held in registers, read once
constexpr uint64_t kNormRest = uint64_t(kNormHeld) * kNormThreads;

// Element m of this thread's held ones: i = threadIdx.x + m * kNormThreads.
__device__ __forceinline__ uint64_t NormIndex(unsigned m) { return threadIdx.x + uint64_t(m) * kNormThreads; }

// The gains of this thread's held elements: weights, so loaded before the wait (cu/pdl.cuh).
__device__ __forceinline__ void NormGains(float (&g)[kNormHeld], const uint16_t* __restrict__ gain,
                                          uint32_t H) {
#pragma unroll
  for (unsigned m = 0; m < kNormHeld; ++m) g[m] = NormIndex(m) < H ? Bf16ToF32(gain[NormIndex(m)]) : 0.0f;
}

// o = rmsnorm(v) for one row: held[m] = v[NormIndex(m)], rest(i) = v[i] for i >= kNormRest (H
// past 8192). Every thread of the block calls it; scratch: kNormThreads / 32 floats.
template <class Rest>
__device__ __forceinline__ void NormRow(float* o, const float (&held)[kNormHeld], const float (&g)[kNormHeld],
                                        const Rest& rest, const uint16_t* __restrict__ gain, uint32_t H,
                                        float* scratch) {
  // Both loops run in increasing i: the held elements, then the rest.
  float ss = 0.0f;
#pragma unroll
  for (unsigned m = 0; m < kNormHeld; ++m) {
    if (NormIndex(m) < H) ss = __fadd_rn(ss, __fmul_rn(held[m], held[m]));
  }
  for (uint64_t i = threadIdx.x + kNormRest; i < H; i += kNormThreads) {
    const float v = rest(i);
    ss = __fadd_rn(ss, __fmul_rn(v, v));
  }
  ss = BlockSumFixed<kNormThreads>(ss, scratch);
  // One rounding per operation: mean = ss / H (H exact in f32 below 2^24), r = sqrt(mean + 1e-6f),
  // out = (h / r) * g.
  const float r = __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(H)), 1e-6f));
#pragma unroll
  for (unsigned m = 0; m < kNormHeld; ++m) {
    if (NormIndex(m) < H) o[NormIndex(m)] = __fmul_rn(__fdiv_rn(held[m], r), g[m]);
  }
  for (uint64_t i = threadIdx.x + kNormRest; i < H; i += kNormThreads) {
    o[i] = __fmul_rn(__fdiv_rn(rest(i), r), Bf16ToF32(gain[i]));
  }
}

}  // namespace memra_model
