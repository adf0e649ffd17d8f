// The latent KV cache and absorbed MLA attention over it (MODEL.md "One decode step").
//
// One block per (row, head), 512 threads. Every reduction's order depends only on its length,
// never on nh, the head's index or t (the slice rule, cu/model.h), so rank r's heads come out
// bit-identical to the same heads of an unsharded call:
//   score_j = q_n . cache_j: lane l sums its r = 4l + 128i + e (e = 0..3) in increasing r, then
//             a xor butterfly over the 32 lanes (fixed by R);
//   softmax: the max is exact in any order; the sum of e_j is BlockSumFixed over the positions
//             (fixed by the position count);
//   o_r = sum_j p_j * cache_j[r]: four partials over j = q (mod 4), each in increasing j, added
//             in q order (fixed by the position count);
//   u_d = sum_r o_r * Wuv[n][r][d]: 32 partials over r = p (mod 32), each in increasing r, added
//             in p order (fixed by R).
// The phases are laid out for latency, which is what a decode step at short context pays: every
// thread has several independent loads in flight, and no phase loops over R or the positions
// one dependent load at a time.
#include <math.h>
#include <stdint.h>

#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/model_reduce.cuh"

namespace {

constexpr unsigned kAttnThreads = 512;
constexpr unsigned kAttnWarps = kAttnThreads / 32;
constexpr unsigned kOParts = 4;    // j partials of o (adjacent lanes, combined by shuffles)
constexpr unsigned kUParts = 32;   // r partials of u
constexpr unsigned kUGroup = 8;    // adjacent d's one thread accumulates (one 16-byte load)
constexpr unsigned kUPass = 256;   // d's per pass through the partials' shared memory
constexpr unsigned kCacheWriteThreads = 256;

// Slot s's cache for `layer`: P positions of R floats.
__device__ __forceinline__ uint64_t CacheBase(uint32_t s, uint32_t layer, uint32_t L, uint32_t P,
                                              uint32_t R) {
  return (uint64_t(s) * L + layer) * P * R;
}

__global__ void cache_write(float* __restrict__ cache, const float* __restrict__ c,
                            const int32_t* __restrict__ pos, uint32_t layer, uint32_t L,
                            uint32_t P, uint32_t R) {
  const uint32_t s = blockIdx.y;
  const int32_t p = pos[s];
  // The host checks positions before a step; a bad one here must not write outside the slot.
  if (p < 0 || uint32_t(p) >= P) return;
  float* dst = cache + CacheBase(s, layer, L, P, R) + uint64_t(p) * R;
  const float* src = c + uint64_t(s) * R;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < R;
       r += uint64_t(gridDim.x) * blockDim.x) {
    dst[r] = src[r];
  }
}

// Max is exact whatever the order; NaN scores are skipped as f32-ops.ts softmax's `x > mx` does
// (fmaxf returns the other operand).
struct MaxF {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// p[0..3] clipped to n (zeros past it; an exact zero term leaves a sum unchanged). kVec: one
// float4 load, when the launcher proved the alignment and R % 4 == 0.
template <bool kVec>
__device__ __forceinline__ float4 Load4(const float* p, uint32_t n) {
  if (kVec) return __ldg(reinterpret_cast<const float4*>(p));
  return make_float4(n > 0 ? __ldg(p) : 0.0f, n > 1 ? __ldg(p + 1) : 0.0f,
                     n > 2 ? __ldg(p + 2) : 0.0f, n > 3 ? __ldg(p + 3) : 0.0f);
}

__device__ __forceinline__ float Dot4(const float4& a, const float4& b, float d) {
  d = fmaf(a.x, b.x, d);
  d = fmaf(a.y, b.y, d);
  d = fmaf(a.z, b.z, d);
  return fmaf(a.w, b.w, d);
}

// Dynamic shared memory: sc[max(P, kUParts * kUPass-or-Dv)] (scores, then probabilities, then
// u's partials) and qo[R] (q_n, then o).
// One block an SM is all a decode step launches (t x nh blocks), so the launch bounds let ptxas
// spend registers on loads in flight (the unrolled loops below) rather than on occupancy.
template <bool kVec>
__global__ void __launch_bounds__(kAttnThreads, 1)
    mla_attention(float* __restrict__ u, uint64_t ldu, const float* __restrict__ q, uint64_t ldq,
                  const float* __restrict__ cache, const int32_t* __restrict__ pos,
                  const uint16_t* __restrict__ wuv, uint32_t layer, uint32_t L, uint32_t P,
                  uint32_t R, uint32_t Dv, uint32_t scRegion) {
  extern __shared__ float4 smem4[];
  float* sc = reinterpret_cast<float*>(smem4);
  float* qo = sc + scRegion;
  __shared__ float scratch[kAttnWarps];
  const uint32_t n = blockIdx.x, s = blockIdx.y;
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  float* un = u + uint64_t(s) * ldu + uint64_t(n) * Dv;

  const int32_t p = pos[s];
  if (p < 0 || uint32_t(p) >= P) {
    // A position the cache cannot hold: poison this head's output rather than read past the
    // slot (the host checks positions before a step; this is the device's last guard).
    for (uint32_t d = tid; d < Dv; d += kAttnThreads) un[d] = __int_as_float(0x7fc00000);
    return;
  }
  const uint32_t np = uint32_t(p) + 1;
  const float* kv = cache + CacheBase(s, layer, L, P, R);
  const uint32_t groups = (R + 3) / 4;

  const float* qn = q + uint64_t(s) * ldq + uint64_t(n) * R;
  for (uint32_t r = tid; r < R; r += kAttnThreads) qo[r] = qn[r];
  __syncthreads();

  // Scores, two positions a warp at a time (independent chains, loads in flight together).
  // MODEL.md: s_j = (q . c_j) / sqrt(R), sqrt(R) the f32 square root, and a true division.
  const float sqrtR = __fsqrt_rn(static_cast<float>(R));
  for (uint32_t j = warp; j < np; j += 2 * kAttnWarps) {
    const uint32_t j2 = j + kAttnWarps;
    const bool two = j2 < np;
    const float* row = kv + uint64_t(j) * R;
    const float* row2 = kv + uint64_t(two ? j2 : j) * R;
    float d = 0.0f, d2 = 0.0f;
    // Unrolled so a lane's loads for both positions are in flight together (R = 512: all 8).
#pragma unroll 4
    for (uint32_t g = lane; g < groups; g += 32) {
      const uint32_t left = R - 4 * g;
      const float4 c = Load4<kVec>(row + 4 * g, left);
      const float4 c2 = Load4<kVec>(row2 + 4 * g, left);
      const float4 q4 = make_float4(qo[4 * g], left > 1 ? qo[4 * g + 1] : 0.0f,
                                    left > 2 ? qo[4 * g + 2] : 0.0f,
                                    left > 3 ? qo[4 * g + 3] : 0.0f);
      d = Dot4(q4, c, d);
      d2 = Dot4(q4, c2, d2);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, o));
      d2 = __fadd_rn(d2, __shfl_xor_sync(0xffffffffu, d2, o));
    }
    if (lane == 0) {
      sc[j] = __fdiv_rn(d, sqrtR);
      if (two) sc[j2] = __fdiv_rn(d2, sqrtR);
    }
  }
  __syncthreads();

  float mx = -INFINITY;
  for (uint32_t j = tid; j < np; j += kAttnThreads) mx = fmaxf(mx, sc[j]);
  mx = memra_model::BlockReduceFixed<kAttnThreads>(mx, scratch, MaxF());
  float sum = 0.0f;
  for (uint32_t j = tid; j < np; j += kAttnThreads) {
    const float e = expf(__fsub_rn(sc[j], mx));
    sc[j] = e;
    sum = __fadd_rn(sum, e);
  }
  // BlockSumFixed's barriers also publish the e_j each thread just stored.
  sum = memra_model::BlockSumFixed<kAttnThreads>(sum, scratch);
  for (uint32_t j = tid; j < np; j += kAttnThreads) sc[j] = __fdiv_rn(sc[j], sum);
  __syncthreads();

  // o over (group of 4 r, j partial q); lanes 4m .. 4m+3 hold one group's four partials. q_n is
  // no longer needed: o takes its place. Every lane runs the same iterations (the shuffles).
  for (uint32_t base = 0; base < groups * kOParts; base += kAttnThreads) {
    const uint32_t i = base + tid, g = i / kOParts, part = i % kOParts;
    const bool active = i < groups * kOParts;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (active) {
      const uint32_t left = R - 4 * g;
#pragma unroll 8
      for (uint32_t j = part; j < np; j += kOParts) {
        const float pj = sc[j];
        const float4 c = Load4<kVec>(kv + uint64_t(j) * R + 4 * g, left);
        acc.x = fmaf(pj, c.x, acc.x);
        acc.y = fmaf(pj, c.y, acc.y);
        acc.z = fmaf(pj, c.z, acc.z);
        acc.w = fmaf(pj, c.w, acc.w);
      }
    }
    float4 o = acc;
#pragma unroll
    for (unsigned k = 1; k < kOParts; ++k) {
      const float4 v = make_float4(__shfl_down_sync(0xffffffffu, acc.x, k),
                                   __shfl_down_sync(0xffffffffu, acc.y, k),
                                   __shfl_down_sync(0xffffffffu, acc.z, k),
                                   __shfl_down_sync(0xffffffffu, acc.w, k));
      o = make_float4(__fadd_rn(o.x, v.x), __fadd_rn(o.y, v.y), __fadd_rn(o.z, v.z),
                      __fadd_rn(o.w, v.w));
    }
    if (active && part == 0) {
      const uint32_t r = 4 * g;
      qo[r] = o.x;
      if (r + 1 < R) qo[r + 1] = o.y;
      if (r + 2 < R) qo[r + 2] = o.z;
      if (r + 3 < R) qo[r + 3] = o.w;
    }
  }
  __syncthreads();

  // u over (group of 8 d, r partial), kUPass d's at a time; the partials go where sc was.
  const uint16_t* wn = wuv + uint64_t(n) * R * Dv;
  const uint32_t stride = Dv < kUPass ? Dv : kUPass;  // one partial's row in sc
  for (uint32_t d0 = 0; d0 < Dv; d0 += kUPass) {
    const uint32_t nd = Dv - d0 < kUPass ? Dv - d0 : kUPass;
    const uint32_t dg = (nd + kUGroup - 1) / kUGroup;
    for (uint32_t i = tid; i < dg * kUParts; i += kAttnThreads) {
      const uint32_t g = i % dg, part = i / dg, dl = g * kUGroup;
      const uint32_t left = nd - dl;
      float acc[kUGroup] = {};
#pragma unroll 8
      for (uint32_t r = part; r < R; r += kUParts) {
        const float orr = qo[r];
        const uint16_t* w = wn + uint64_t(r) * Dv + d0 + dl;
        uint32_t wv[kUGroup / 2];
        if (kVec && left >= kUGroup) {
          const uint4 v = __ldg(reinterpret_cast<const uint4*>(w));
          wv[0] = v.x, wv[1] = v.y, wv[2] = v.z, wv[3] = v.w;
        } else {
#pragma unroll
          for (unsigned e = 0; e < kUGroup / 2; ++e) {
            const uint32_t lo = 2 * e < left ? __ldg(w + 2 * e) : 0u;
            const uint32_t hi = 2 * e + 1 < left ? __ldg(w + 2 * e + 1) : 0u;
            wv[e] = lo | (hi << 16);
          }
        }
#pragma unroll
        for (unsigned e = 0; e < kUGroup / 2; ++e) {
          acc[2 * e] = fmaf(orr, __uint_as_float(wv[e] << 16), acc[2 * e]);
          acc[2 * e + 1] = fmaf(orr, __uint_as_float(wv[e] & 0xffff0000u), acc[2 * e + 1]);
        }
      }
#pragma unroll
      for (unsigned e = 0; e < kUGroup; ++e) {
        if (e < left) sc[part * stride + dl + e] = acc[e];
      }
    }
    __syncthreads();
    for (uint32_t d = tid; d < nd; d += kAttnThreads) {
      float a = sc[d];
#pragma unroll
      for (unsigned k = 1; k < kUParts; ++k) a = __fadd_rn(a, sc[k * stride + d]);
      un[d0 + d] = a;
    }
    __syncthreads();
  }
}

}  // namespace

extern "C" cudaError_t memra_cache_write(float* cache, const float* c, const int32_t* pos,
                                         uint32_t t, uint32_t layer, uint32_t L, uint32_t P,
                                         uint32_t R, cudaStream_t stream) {
  if (t == 0 || R == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || layer >= L) return cudaErrorInvalidValue;
  unsigned bx = (R + kCacheWriteThreads - 1) / kCacheWriteThreads;
  if (bx > 1024) bx = 1024;
  cache_write<<<dim3(bx, t), kCacheWriteThreads, 0, stream>>>(cache, c, pos, layer, L, P, R);
  return cudaGetLastError();
}

extern "C" cudaError_t memra_mla_attention(float* u, uint64_t ldu, const float* q, uint64_t ldq,
                                           const float* cache, const int32_t* pos,
                                           const uint16_t* wuv, uint32_t t, uint32_t nh,
                                           uint32_t layer, uint32_t L, uint32_t P, uint32_t R,
                                           uint32_t Dv, cudaStream_t stream) {
  if (t == 0 || nh == 0 || Dv == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || layer >= L || P == 0 || P > MEMRA_MODEL_MAX_POSITIONS ||
      R == 0 || R > MEMRA_MODEL_MAX_LATENT || nh > uint32_t(INT32_MAX)) {
    return cudaErrorInvalidValue;
  }
  // sc holds the scores (P) and later u's partials (kUParts x one pass of d's).
  const uint32_t pass = Dv < kUPass ? Dv : kUPass;
  const uint32_t region = ((P > kUParts * pass ? P : kUParts * pass) + 3u) & ~3u;
  const size_t smem = (size_t(region) + R) * sizeof(float);
  // Loads as float4 / 16-byte bf16 groups only where every row keeps the alignment.
  const bool vec = reinterpret_cast<uintptr_t>(cache) % 16 == 0 && R % 4 == 0 &&
                   reinterpret_cast<uintptr_t>(wuv) % 16 == 0 && Dv % kUGroup == 0;
  const dim3 grid(nh, t);
  if (vec) {
    mla_attention<true><<<grid, kAttnThreads, smem, stream>>>(u, ldu, q, ldq, cache, pos, wuv,
                                                              layer, L, P, R, Dv, region);
  } else {
    mla_attention<false><<<grid, kAttnThreads, smem, stream>>>(u, ldu, q, ldq, cache, pos, wuv,
                                                               layer, L, P, R, Dv, region);
  }
  return cudaGetLastError();
}
