// What the two forms of memra_mla_attention share (cu/model_attention.cu, the tiled
// flash-decoding form; cu/model_attention_short.cu, one kernel at short contexts): the position
// tile, the f32 steps each order is built from, and u's partials. The short form must round as
// the tiled form does, step for step, so a row's u does not depend on which form a call took.
#pragma once

#include <math.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cu/cp_async.cuh"
#include "cu/model.h"
#include "cu/pdl.cuh"
#include "cu/prefetch_l2.cuh"

namespace memra_mla {

constexpr unsigned kUParts = 32;  // r partials of u: partial p sums r = p (mod 32)
constexpr unsigned kUGroup = 8;   // adjacent d's one thread accumulates (one 16-byte load)

__host__ __device__ constexpr unsigned PositionTile(uint32_t R) { return R <= 512 ? 32 : 8; }

// Positions up to which the short form takes a call (memra_mla_short_positions): four tiles of
// 32, each block re-reading them all from L2 (0 above R = 512: the short form has no C = 8 path).
__host__ __device__ constexpr uint32_t ShortPositions(uint32_t R) { return R <= 512 ? 128 : 0; }

// Max is exact whatever the order; NaN scores are skipped as f32-ops.ts softmax's `x > mx` does
// (fmaxf returns the other operand).
struct MaxF {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Xor butterflies over a warp, every lane left with the same value: the max (exact in any order)
// and the sum in the order every form of the attention rounds its l in (BlockSumFixed's warp step
// too). N values at once, their shuffles interleaved so that none waits for another's round trip.
struct AddRn {
  __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};

template <unsigned N, class Op>
__device__ __forceinline__ void WarpButterfly(float (&v)[N], Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (unsigned k = 0; k < N; ++k) v[k] = op(v[k], __shfl_xor_sync(0xffffffffu, v[k], o));
  }
}

template <unsigned N>
__device__ __forceinline__ void WarpMax(float (&v)[N]) {
  WarpButterfly(v, MaxF());
}

template <unsigned N>
__device__ __forceinline__ void WarpSum(float (&v)[N]) {
  WarpButterfly(v, AddRn());
}

__device__ __forceinline__ float WarpMax(float v) {
  float a[1] = {v};
  WarpMax(a);
  return a[0];
}

__device__ __forceinline__ float WarpSum(float v) {
  float a[1] = {v};
  WarpSum(a);
  return a[0];
}

__device__ __forceinline__ float Dot4(const float4& a, const float4& b, float d) {
  d = fmaf(a.x, b.x, d);
  d = fmaf(a.y, b.y, d);
  d = fmaf(a.z, b.z, d);
  return fmaf(a.w, b.w, d);
}

__device__ __forceinline__ void Axpy4(float a, const float4& x, float4& y) {
  y.x = fmaf(a, x.x, y.x);
  y.y = fmaf(a, x.y, y.y);
  y.z = fmaf(a, x.z, y.z);
  y.w = fmaf(a, x.w, y.w);
}

// acc[e] += o_r * Wuv[r][d + e] for the 8 bf16 of one 16-byte load (two a word, low half first).
__device__ __forceinline__ void Fma8(float orr, const uint32_t (&wv)[kUGroup / 2], float (&acc)[kUGroup]) {
#pragma unroll
  for (unsigned e = 0; e < kUGroup / 2; ++e) {
    acc[2 * e] = fmaf(orr, __uint_as_float(wv[e] << 16), acc[2 * e]);
    acc[2 * e + 1] = fmaf(orr, __uint_as_float(wv[e] & 0xffff0000u), acc[2 * e + 1]);
  }
}

// rows x R floats from global src (row stride R) into shared dst (row stride dstRow). kVec (src
// 16-byte aligned; R and dstRow multiples of 4): 16-byte cp.async copies, every one of the
// thread's in flight at once, landed by WaitCopiesToShared() (cu/cp_async.cuh); otherwise loads
// of the step's own data (LoadFresh), unrolled so a thread keeps many in flight. The staging is
// a round trip to memory every block pays before any arithmetic (at a short context, all of it).
template <bool kVec>
__device__ __forceinline__ void Stage(float* dst, uint32_t dstRow, const float* src, uint32_t rows,
                                      uint32_t R) {
  if (kVec) {
    const uint32_t quads = R / 4, n = rows * quads;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint32_t r = i / quads, qd = i - r * quads;
      memra_cu::CopyToShared16(dst + r * dstRow + 4 * qd, src + uint64_t(r) * R + 4 * qd);
    }
  } else {
    const uint32_t n = rows * R;
#pragma unroll 16
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint32_t r = i / R, c = i - r * R;
      dst[r * dstRow + c] = memra_cu::LoadFresh(src + uint64_t(r) * R + c);
    }
  }
}

// Cache rows j = first, first + stride, ... (at most `count`) up to row s's position of this
// layer into L2, by every thread of the block, while it waits for the kernel ahead
// (scripts/probes/step-timeline-probe.cu put the short form's scores, the first read of the rows,
// at 3.6 of its 8.7 us: the rows are mostly out of L2 since the step before). The position is
// read before the wait, which pdl.cuh otherwise forbids: it only chooses which lines to prefetch
// (PrefetchL2 puts nothing in a register), so a stale position costs only the wrong rows' bytes,
// and it is clamped into [0, P) so every address is the slot's. Row p itself is latent_query's,
// whose store reaches L2 over whatever the prefetch brought.
__device__ __forceinline__ void PrefetchRows(const MemraMlaArgs& a, uint32_t s, uint32_t first, uint32_t stride,
                                             uint32_t count = 0xffffffffu) {
  const int32_t p = __ldcg(a.pos + s);
  if (p < 0 || first > uint32_t(p)) return;
  const uint32_t last = uint32_t(p) < a.P ? uint32_t(p) : a.P - 1, lines = a.R / 32;  // 128-byte lines
  const uint32_t all = last < first ? 0 : (last - first) / stride + 1, rows = all < count ? all : count;
  const char* kv = reinterpret_cast<const char*>(a.cache + uint64_t(s) * a.slotStride);
  for (uint32_t i = threadIdx.x; i < rows * lines; i += blockDim.x) {
    const uint64_t j = first + uint64_t(i / lines) * stride;
    memra_cu::PrefetchL2(kv + (j * a.R) * 4 + (i % lines) * 128);
  }
}

// The short form's launch (cu/model_attention_short.cu); the caller has checked the arguments
// and that a.P <= ShortPositions(a.R) and every load may be 16 bytes wide.
cudaError_t LaunchShort(const MemraMlaArgs& a, cudaStream_t stream);

}  // namespace memra_mla
