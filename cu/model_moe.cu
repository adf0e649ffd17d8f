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
#include "cu/pdl.cuh"

namespace {

using memra_model::E4m3Decode;
using memra_model::E4m3Encode;
using memra_cu::LaunchModelKernel;
using memra_cu::LoadFresh;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;

// ---- router ----

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
//
// Without a NaN among the E, that scan picks the K largest values, a tie to the lower index, in
// that order: lane l's pick, if any, is its rank, the elements that beat it, which 32 shuffles
// count at once. The K picks one at a time were each a ballot, a shuffle and a five-step
// butterfly after the last: the routing warp outlived the rest of route_quant by about 2 us
// (scripts/probes/step-timeline-probe.cu). With a NaN, the scan a pick at a time.
__device__ __forceinline__ void RouteRowNarrow(int32_t* __restrict__ ids, float* __restrict__ wts,
                                               const float* __restrict__ x, uint32_t E,
                                               uint32_t K, unsigned lane) {
  __shared__ float picked[32][MEMRA_MODEL_MAX_TOPK];  // a warp's picks' values, in pick order
  const float v = lane < E ? LoadFresh(x + lane) : 0.0f;
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

// Row s's picks and weights, by the 32 lanes of one warp (all of which call it): past E = 32 the
// scan a pick at a time, lane l over elements l, l + 32, ... (Keeping a lane's elements in a
// local array, or placing every element at once by its rank read from memory, measured slower:
// 10.5 and 29 us against 7.3 at E = 32, K = 8, scripts/probes/step-kernels-probe.cu.)
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

__global__ void router(int32_t* __restrict__ ids, float* __restrict__ wts,
                       const float* __restrict__ logits, uint32_t t, uint32_t E, uint32_t K) {
  PdlWait();
  PdlLaunchDependents();
  const uint32_t s = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= t) return;  // whole warps
  RouteRow(ids + uint64_t(s) * K, wts + uint64_t(s) * K, logits + uint64_t(s) * E, E, K, lane);
}

// ---- fp8 quantize / dequantize ----

constexpr unsigned kQuantThreads = 256;
constexpr unsigned kQuantWarps = kQuantThreads / 32;
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
    if (blockIdx.x == 0) RouteRow(ids + uint64_t(s) * K, wts + uint64_t(s) * K, logits + uint64_t(s) * E, E, K, lane);
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
