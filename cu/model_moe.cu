// The MoE's small kernels: routing, the fp8 round trip of the expert input (what crosses the EP
// link), and the slot-order merge with the residual. The expert FFN itself is a gemv
// (model_experts.cu). The merge and the fp8 scales are the points where the sharded walk must agree
// with the unsharded one bit for bit, so each f32 operation there is one explicit rounding, as
// f32-ops.ts spells it.
#include <math.h>
#include <stdint.h>

#include "cu/launch.cuh"
#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/model_norm.cuh"
#include "cu/model_quant.cuh"
#include "cu/model_route.cuh"
#include "cu/pdl.cuh"

namespace {

using memra_model::E4m3Decode;
using memra_cu::LaunchModelKernel;
using memra_cu::LoadFresh;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;

// ---- router ----

using memra_route::RouteRow;

// Row s's logits, read from memory once the kernel ahead has written them.
struct FreshLogits {
  const float* x;
  __device__ __forceinline__ float operator()(uint32_t i) const { return LoadFresh(x + i); }
};

__global__ void router(int32_t* __restrict__ ids, float* __restrict__ wts,
                       const float* __restrict__ logits, uint32_t t, uint32_t E, uint32_t K) {
  PdlWait();
  PdlLaunchDependents();
  const uint32_t s = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= t) return;  // whole warps
  RouteRow(ids + uint64_t(s) * K, wts + uint64_t(s) * K, FreshLogits{logits + uint64_t(s) * E}, E, K, lane);
}

// ---- fp8 quantize / dequantize ----

constexpr unsigned kQuantThreads = 256;
constexpr unsigned kQuantWarps = kQuantThreads / 32;
using memra_quant::kQB;
using memra_quant::QuantizeBlock;

template <bool kVec>
__global__ void __launch_bounds__(kQuantThreads)
    quantize(uint8_t* __restrict__ xq, float* __restrict__ xs, const float* __restrict__ b,
             uint64_t blocks) {
  PdlWait();
  PdlLaunchDependents();
  const uint64_t blk = uint64_t(blockIdx.x) * kQuantWarps + threadIdx.x / 32;
  if (blk >= blocks) return;
  QuantizeBlock<kVec>(xq, xs, nullptr, b, blk, threadIdx.x % 32);
}

// Root's MoE head after the router logits, in one launch: grid (blocks of kQuantWarps fp8
// blocks, t), and one more warp in each row's first block for the row's routing.
template <bool kVec>
__global__ void __launch_bounds__(kQuantThreads + 32)
    route_quant(int32_t* __restrict__ ids, float* __restrict__ wts, const float* __restrict__ logits,
                uint8_t* __restrict__ xq, float* __restrict__ xs, float* __restrict__ xd,
                const float* __restrict__ b, uint32_t E, uint32_t K, uint32_t H) {
  MEMRA_TRACE_KERNEL(kTraceRouteQuant);
  PdlWait();
  PdlLaunchDependents();
  const uint32_t s = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == kQuantWarps) {
    if (blockIdx.x == 0) {
      RouteRow(ids + uint64_t(s) * K, wts + uint64_t(s) * K, FreshLogits{logits + uint64_t(s) * E}, E, K, lane);
    }
    return;
  }
  const uint32_t perRow = H / kQB, blk = blockIdx.x * kQuantWarps + warp;
  if (blk >= perRow) return;
  QuantizeBlock<kVec>(xq, xs, xd, b, uint64_t(s) * perRow + blk, lane);
}

__global__ void dequantize(float* __restrict__ xd, const uint8_t* __restrict__ xq,
                           const float* __restrict__ xs, uint64_t n) {
  PdlWait();
  PdlLaunchDependents();
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    xd[i] = __fmul_rn(E4m3Decode(LoadFresh(xq + i)), LoadFresh(xs + i / kQB));
  }
}

// ---- the merge ----

// moe = sum over slots in slot order of f32(w * c), each add rounded, then h = f32(h + moe): the
// same terms in the same order whichever rank computed each slot's c (lo: experts below
// splitE, hi: the rest), so the EP walk matches the unsharded one bit for bit.
struct Merge {
  float* h;
  const float* wts;
  const int32_t* ids;
  const float* lo;
  const float* hi;
  uint32_t splitE, K, H;
  // Element i of row s, stored into h and returned.
  __device__ __forceinline__ float operator()(uint64_t s, uint64_t i) const {
    float moe = 0.0f;
    for (uint32_t k = 0; k < K; ++k) {
      const uint64_t q = s * K + k;
      const float* c = int64_t(LoadFresh(ids + q)) < int64_t(splitE) ? lo : hi;
      moe = __fadd_rn(moe, __fmul_rn(LoadFresh(wts + q), LoadFresh(c + q * H + i)));
    }
    const uint64_t at = s * H + i;
    const float v = __fadd_rn(LoadFresh(h + at), moe);
    h[at] = v;
    return v;
  }
};

__global__ void moe_combine(Merge m, uint64_t n) {
  PdlWait();
  PdlLaunchDependents();
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t idx = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    m(idx / m.H, idx % m.H);
  }
}

// The merge, then the rmsnorm of the merged row into out: a cluster of kMergeBlocks blocks a row,
// whose threads are the norm's (cu/model_norm.cuh), each merging the elements it then norms, so
// the norm that begins the next layer (or the final one) costs no launch of its own. The same
// bits as moe_combine, then rmsnorm. A row's merge reads t K H floats: one block a row left
// them to one SM (10.7 us a launch at bench's t = 1 against 6.6 for moe_combine alone). The
// row's slots are read once into shared memory, so a thread's contribution loads are independent.
constexpr unsigned kMergeBlocks = 8;
constexpr unsigned kMergeThreads = memra_model::kNormThreads / kMergeBlocks;
constexpr unsigned kMergeSlots = 8;  // slots whose contributions a thread loads at once

__global__ void __launch_bounds__(kMergeThreads)
    moe_combine_norm(Merge m, float* __restrict__ out, const uint16_t* __restrict__ gain) {
  MEMRA_TRACE_KERNEL(kTraceCombineNorm);
  using namespace memra_model;
  __shared__ float warpTotals[kNormThreads / 32];
  __shared__ float sw[MEMRA_MODEL_MAX_TOPK];
  __shared__ const float* sc[MEMRA_MODEL_MAX_TOPK];
  memra_cu::ClusterArriveStarted();
  float held[kNormHeld], g[kNormHeld];
  const unsigned nt = (blockIdx.x % kMergeBlocks) * kMergeThreads + threadIdx.x;  // the norm's thread
  NormGains(g, gain, m.H, nt);
  // The row's weights and ids, and its held elements of h, before the wait, as expert_down reads
  // its ids (cu/pdl.cuh): they are the router's and the residual's, older than the experts between
  // them and this merge, and this grid starts only once every block of the kernel ahead has
  // started, which that kernel did only after the one ahead of it let it... back to expert_up,
  // which lets the next kernel start only once its own wait has returned, after the router (and
  // so the residual before it) finished. After the wait: the contributions, one round trip (with
  // h after it too, the merge took 6.7 us of the launch's 8.7 from its release,
  // scripts/probes/step-timeline-probe.cu).
  const uint64_t s = blockIdx.x / kMergeBlocks;
  float* h = m.h + s * m.H;
  float hv[kNormHeld];
#pragma unroll
  for (unsigned j = 0; j < kNormHeld; ++j) hv[j] = NormIndex(nt, j) < m.H ? LoadFresh(h + NormIndex(nt, j)) : 0.0f;
  if (threadIdx.x < m.K) {
    const uint64_t q = s * m.K + threadIdx.x;
    sw[threadIdx.x] = LoadFresh(m.wts + q);
    sc[threadIdx.x] = (int64_t(LoadFresh(m.ids + q)) < int64_t(m.splitE) ? m.lo : m.hi) + q * m.H;
  }
  __syncthreads();
  PdlWait();
  PdlLaunchDependents();
  MEMRA_TRACE_MARK(1);
  // Merge's sum for each held element: slot order, f32(w * c) then one rounded add. Every
  // contribution of kMergeSlots slots is loaded before the first add: this kernel's loads queue
  // in L2 behind the next layer's latent_query, whose blocks start as it lets them and load 17 MB
  // of Wq and Wdkv before their wait, so a round trip here costs about what that takes to drain.
  // A loop of slots unrolled by 4 made bench's 8 slots two round trips: the merge was done 5.9 us
  // after the release, 1.3 us in one (scripts/probes/step-timeline-probe.cu, traced, on an H100).
  // A slot past K re-reads the group's first and an element past H its slot's first, so that no
  // load waits on a branch.
  float moe[kNormHeld];
#pragma unroll
  for (unsigned j = 0; j < kNormHeld; ++j) moe[j] = 0.0f;
  for (uint32_t k0 = 0; k0 < m.K; k0 += kMergeSlots) {
    float cv[kMergeSlots][kNormHeld];
#pragma unroll
    for (unsigned k = 0; k < kMergeSlots; ++k) {
      const float* c = sc[k0 + k < m.K ? k0 + k : k0];
#pragma unroll
      for (unsigned j = 0; j < kNormHeld; ++j) {
        cv[k][j] = LoadFresh(c + (NormIndex(nt, j) < m.H ? NormIndex(nt, j) : 0));
      }
    }
#pragma unroll
    for (unsigned k = 0; k < kMergeSlots; ++k) {
#pragma unroll
      for (unsigned j = 0; j < kNormHeld; ++j) {
        if (k0 + k < m.K && NormIndex(nt, j) < m.H) moe[j] = __fadd_rn(moe[j], __fmul_rn(sw[k0 + k], cv[k][j]));
      }
    }
  }
#pragma unroll
  for (unsigned j = 0; j < kNormHeld; ++j) {
    held[j] = 0.0f;
    if (NormIndex(nt, j) < m.H) h[NormIndex(nt, j)] = held[j] = __fadd_rn(hv[j], moe[j]);
  }
  for (uint64_t i = nt + kNormRest; i < m.H; i += kNormThreads) m(s, i);
  MEMRA_TRACE_MARK(0);
  // Past the held ones, this thread reads back what it stored (its own elements).
  NormRow(out + s * m.H, held, g, [h](uint64_t i) { return h[i]; }, gain, m.H,
          [&](float v) { return ClusterSum<kMergeBlocks>(v, warpTotals); }, nt);
}

}  // namespace

extern "C" cudaError_t memra_router(int32_t* ids, float* wts, const float* logits, uint32_t t,
                                    uint32_t E, uint32_t K, cudaStream_t stream) {
  if (t == 0 || K == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || E > MEMRA_MODEL_MAX_EXPERTS || K > MEMRA_MODEL_MAX_TOPK ||
      K > E) {
    return cudaErrorInvalidValue;
  }
  return LaunchModelKernel(router, dim3(1), dim3(32 * t), 0, 1, stream, ids, wts, logits, t, E, K);
}

extern "C" cudaError_t memra_quantize(uint8_t* xq, float* xs, const float* b, uint32_t t,
                                      uint32_t H, cudaStream_t stream) {
  if (t == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || H % kQB != 0) return cudaErrorInvalidValue;
  const uint64_t blocks = uint64_t(t) * (H / kQB);
  const unsigned grid = static_cast<unsigned>((blocks + kQuantWarps - 1) / kQuantWarps);
  // Every block starts 512 bytes after the previous one, so b's own alignment decides.
  const auto kernel = memra_cu::Aligned(b, 16) ? quantize<true> : quantize<false>;
  return LaunchModelKernel(kernel, dim3(grid), dim3(kQuantThreads), 0, 1, stream, xq, xs, b, blocks);
}

extern "C" cudaError_t memra_route_quant(int32_t* ids, float* wts, const float* logits,
                                         uint8_t* xq, float* xs, float* xd, const float* b,
                                         uint32_t t, uint32_t E, uint32_t K, uint32_t H,
                                         cudaStream_t stream) {
  if (t == 0 || K == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || E > MEMRA_MODEL_MAX_EXPERTS || K > MEMRA_MODEL_MAX_TOPK ||
      K > E || H % kQB != 0) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid((H / kQB + kQuantWarps - 1) / kQuantWarps, t);
  const auto kernel = memra_cu::Aligned(b, 16) ? route_quant<true> : route_quant<false>;
  return LaunchModelKernel(kernel, grid, dim3(kQuantThreads + 32), 0, 1, stream, ids, wts, logits, xq,
                           xs, xd, b, E, K, H);
}

extern "C" cudaError_t memra_dequantize(float* xd, const uint8_t* xq, const float* xs,
                                        uint32_t t, uint32_t H, cudaStream_t stream) {
  if (t == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || H % kQB != 0) return cudaErrorInvalidValue;
  const uint64_t n = uint64_t(t) * H;
  return LaunchModelKernel(dequantize, dim3(memra_cu::GridFor(n)), dim3(memra_cu::kBlock), 0, 1,
                           stream, xd, xq, xs, n);
}

extern "C" cudaError_t memra_moe_combine(float* h, const float* wts, const int32_t* ids,
                                         const float* lo, const float* hi, uint32_t splitE,
                                         uint32_t t, uint32_t K, uint32_t H,
                                         cudaStream_t stream) {
  if (t == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || K > MEMRA_MODEL_MAX_TOPK) return cudaErrorInvalidValue;
  const uint64_t n = uint64_t(t) * H;
  return LaunchModelKernel(moe_combine, dim3(memra_cu::GridFor(n)), dim3(memra_cu::kBlock), 0, 1,
                           stream, Merge{h, wts, ids, lo, hi, splitE, K, H}, n);
}

extern "C" cudaError_t memra_moe_combine_norm(float* h, const float* wts, const int32_t* ids,
                                              const float* lo, const float* hi, uint32_t splitE,
                                              uint32_t t, uint32_t K, uint32_t H, float* out,
                                              const uint16_t* gain, cudaStream_t stream) {
  if (t == 0 || H == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || K > MEMRA_MODEL_MAX_TOPK) return cudaErrorInvalidValue;
  return LaunchModelKernel(moe_combine_norm, dim3(t * kMergeBlocks), dim3(kMergeThreads), 0, kMergeBlocks,
                           stream, Merge{h, wts, ids, lo, hi, splitE, K, H}, out, gain);
}
