// The synthetic model's row-wise kernels: a step's inputs (set_i32, embed), the norm, and the
// greedy pick (argmax). The matrix products are built on cu/gemv_tile.cuh (model_gemv.cu,
// model_latent_query.cu, model_experts.cu, model_norm_gemv.cu), attention in model_attention.cu,
// routing and the fp8 round trip in model_moe.cu, weights in model_weights.cu.
#include <math.h>
#include <stdint.h>

#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/model_norm.cuh"
#include "cu/model_reduce.cuh"
#include "cu/pdl.cuh"

namespace memra_cu {

namespace {
// Per thread: each worker launches on its own stream from its own thread.
thread_local bool tPdl = false;
}  // namespace

bool PdlRequested() { return tPdl; }

}  // namespace memra_cu

extern "C" int memra_model_set_pdl(int on) {
  const int was = memra_cu::tPdl ? 1 : 0;
  memra_cu::tPdl = on != 0;
  return was;
}

namespace {

using memra_cu::LaunchModelKernel;
using memra_cu::PdlLaunchDependents;
using memra_cu::LoadFresh;
using memra_cu::PdlWait;

using memra_model::Bf16ToF32;

// ---- set_i32 ----

// Passed by value: the values travel in the launch itself, so a step's tokens need no host
// buffer that must stay alive until the copy runs (and a captured graph bakes them in).
struct I32Values {
  int32_t v[MEMRA_MODEL_MAX_I32_VALUES];
};

__global__ void set_i32(int32_t* __restrict__ dst, uint32_t n, I32Values vals) {
  PdlWait();
  PdlLaunchDependents();
  if (threadIdx.x < n) dst[threadIdx.x] = vals.v[threadIdx.x];
}

// ---- embed ----

constexpr unsigned kEmbedThreads = 256;
constexpr unsigned kEmbedMaxBlocksX = 1024;

__global__ void embed(float* __restrict__ out, const uint16_t* __restrict__ emb,
                      const int32_t* __restrict__ tokens, uint32_t H, uint32_t V) {
  PdlWait();
  PdlLaunchDependents();
  const uint32_t s = blockIdx.y;
  const int32_t tok = LoadFresh(tokens + s);
  const bool valid = tok >= 0 && static_cast<uint32_t>(tok) < V;
  const uint16_t* row = emb + uint64_t(valid ? tok : 0) * H;
  float* o = out + uint64_t(s) * H;
  // 64-bit: i + stride must not wrap for an H near 2^32.
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < H; i += gridDim.x * blockDim.x) {
    o[i] = valid ? Bf16ToF32(row[i]) : __int_as_float(0x7fc00000);
  }
}

// ---- rmsnorm ----

// One block per row (cu/model_norm.cuh). `out` may alias `in`: each element is read and written
// by its owner alone, and read (for the sum, then for the output) before that owner writes it.
__global__ void __launch_bounds__(memra_model::kNormThreads)
    rmsnorm(float* out, const float* in, const uint16_t* __restrict__ gain, uint32_t H) {
  MEMRA_TRACE_KERNEL(kTraceRmsnorm);
  using namespace memra_model;
  __shared__ float scratch[kNormThreads / 32];
  // A thread's first kNormHeld elements stay in registers between the sum and the output (one
  // read of h from L2, not two).
  float held[kNormHeld], g[kNormHeld];
  NormGains(g, gain, H, threadIdx.x);
  PdlWait();
  PdlLaunchDependents();
  const float* h = in + uint64_t(blockIdx.x) * H;
#pragma unroll
  for (unsigned m = 0; m < kNormHeld; ++m) {
    const uint64_t i = NormIndex(threadIdx.x, m);
    held[m] = i < H ? LoadFresh(h + i) : 0.0f;
  }
  NormRow(out + uint64_t(blockIdx.x) * H, held, g, [h](uint64_t i) { return LoadFresh(h + i); }, gain, H,
          [&](float v) { return BlockSumFixed<kNormThreads>(v, scratch); }, threadIdx.x);
}

// ---- argmax ----

constexpr unsigned kArgmaxThreads = 1024;

struct Best {
  float v;
  int32_t i;
};

// A strict total order on (value, index), so the winner is the same whatever order candidates
// meet in: larger value first, the lower index on equal values (-0 == +0 ties too), and NaN below
// every number. f32-ops.ts argmax lets a NaN at index 0 win (nothing compares greater than it);
// here a NaN wins only when the whole row is NaN, and then it is index 0, as there.
__device__ __forceinline__ bool Beats(const Best& b, const Best& a) {
  const bool bn = isnan(b.v), an = isnan(a.v);
  if (bn || an) return bn == an ? b.i < a.i : an;
  return b.v > a.v || (b.v == a.v && b.i < a.i);
}

__device__ __forceinline__ Best ShflBest(const Best& b, int offset) {
  return {__shfl_xor_sync(0xffffffffu, b.v, offset), __shfl_xor_sync(0xffffffffu, b.i, offset)};
}

// One block per row. INT32_MAX with NaN is "no candidate": every real element beats it.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax(int32_t* __restrict__ out, const float* __restrict__ logits, uint32_t V) {
  __shared__ Best warpBest[kArgmaxThreads / 32];
  PdlWait();
  PdlLaunchDependents();
  const float* x = logits + uint64_t(blockIdx.x) * V;
  Best best{__int_as_float(0x7fc00000), INT32_MAX};
  // Four loads in flight before their compares (the winner does not depend on the order).
  uint64_t j = threadIdx.x;
  for (; j + 3 * kArgmaxThreads < V; j += 4 * kArgmaxThreads) {
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = LoadFresh(x + j + k * kArgmaxThreads);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const Best c{v[k], static_cast<int32_t>(j + k * kArgmaxThreads)};
      if (Beats(c, best)) best = c;
    }
  }
  for (; j < V; j += kArgmaxThreads) {
    const Best c{LoadFresh(x + j), static_cast<int32_t>(j)};
    if (Beats(c, best)) best = c;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Best c = ShflBest(best, o);
    if (Beats(c, best)) best = c;
  }
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warpBest[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < kArgmaxThreads / 32; ++w) {
      if (Beats(warpBest[w], best)) best = warpBest[w];
    }
    out[blockIdx.x] = best.i;
  }
}

}  // namespace

extern "C" cudaError_t memra_set_i32(int32_t* dst, uint32_t n, const int32_t* vals,
                                     cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n > MEMRA_MODEL_MAX_I32_VALUES || vals == nullptr) return cudaErrorInvalidValue;
  I32Values v{};
  for (uint32_t i = 0; i < n; ++i) v.v[i] = vals[i];
  return LaunchModelKernel(set_i32, dim3(1), dim3(32), 0, 1, stream, dst, n, v);
}

extern "C" cudaError_t memra_embed(float* out, const uint16_t* emb, const int32_t* tokens,
                                   uint32_t t, uint32_t H, uint32_t V, cudaStream_t stream) {
  if (t == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS) return cudaErrorInvalidValue;
  unsigned bx = (H + kEmbedThreads - 1) / kEmbedThreads;
  if (bx > kEmbedMaxBlocksX) bx = kEmbedMaxBlocksX;
  return LaunchModelKernel(embed, dim3(bx, t), dim3(kEmbedThreads), 0, 1, stream, out, emb, tokens,
                           H, V);
}

extern "C" cudaError_t memra_rmsnorm(float* out, const float* in, const uint16_t* gain,
                                     uint32_t t, uint32_t H, cudaStream_t stream) {
  if (t == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS) return cudaErrorInvalidValue;
  return LaunchModelKernel(rmsnorm, dim3(t), dim3(memra_model::kNormThreads), 0, 1, stream, out, in, gain, H);
}

extern "C" cudaError_t memra_argmax(int32_t* out, const float* logits, uint32_t t, uint32_t V,
                                    cudaStream_t stream) {
  if (t == 0) return cudaSuccess;
  // V = 0 has no answer; an index must also fit the i32 it is written as.
  if (t > MEMRA_MODEL_MAX_ROWS || V == 0 || V > uint32_t(INT32_MAX)) return cudaErrorInvalidValue;
  return LaunchModelKernel(argmax, dim3(t), dim3(kArgmaxThreads), 0, 1, stream, out, logits, V);
}
