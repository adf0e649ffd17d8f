// Block-wide f32 reductions in a fixed order (the sum; the attention's max uses the same fold).
// The slice rule (cu/model.h) lets a reduction's order depend only on its length; this one
// depends on nothing but the block size, which each caller fixes at compile time: a xor
// butterfly inside each warp (commutative pairs, so every lane ends with the same bits), then
// the warp totals added one after another in warp order.
#pragma once

namespace memra_model {

// A 1-D block of kThreads threads folds `op` over one value per thread; every thread of it must
// call it, and every thread gets the same result. `scratch` holds kThreads / 32 floats of shared
// memory, free again on return. `op` must be commutative for every lane to end with the same bits.
template <unsigned kThreads, typename Op>
__device__ __forceinline__ float BlockReduceFixed(float v, float* scratch, Op op) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  constexpr unsigned kWarps = kThreads / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (kWarps == 1) return v;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = scratch[0];
#pragma unroll
  for (unsigned w = 1; w < kWarps; ++w) total = op(total, scratch[w]);
  // A second call may reuse scratch: nobody writes it before everyone has read it.
  __syncthreads();
  return total;
}

// One rounding per addition, never contracted into an FMA.
struct SumRn {
  __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};

template <unsigned kThreads>
__device__ __forceinline__ float BlockSumFixed(float v, float* scratch) {
  return BlockReduceFixed<kThreads>(v, scratch, SumRn());
}

}  // namespace memra_model
