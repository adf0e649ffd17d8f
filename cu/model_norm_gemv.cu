// memra_norm_gemv: the MoE norm, then the router's product of it, in one launch (the boundary
// between the two was a launch and a drain of their own in every layer). The product's cluster of
// kNormSplit blocks is also the norm's (cu/model_norm.cuh ClusterSum): the norm's thread j of row
// group g is thread 128 g + j % 128 of block j / 128, four rows a round. Each block writes its
// elements of the norm, the cluster meets, then every block reads the rows back from L2 for its
// share of the product: memra_rmsnorm's bits, then memra_gemv's at split 8.
#include <stdint.h>

#include "cu/gemv_launch.cuh"
#include "cu/gemv_tile.cuh"
#include "cu/model.h"
#include "cu/model_norm.cuh"

namespace {

using namespace memra_tile;  // the tile and its launcher, whose instances this file holds

constexpr unsigned kNormSplit = 8;
constexpr unsigned kNormOwners = memra_model::kNormThreads / kNormSplit;  // a norm's threads a block
constexpr unsigned kNormGroups = kGemvThreads / kNormOwners;              // rows a round

template <int T, int CW, unsigned U, bool kWide>
__global__ void __launch_bounds__(kGemvThreads, 1)
    norm_gemv(float* normOut, float* __restrict__ out, uint64_t ldo, const float* x,
              const uint16_t* __restrict__ gain, const uint16_t* __restrict__ W, uint64_t ldw, uint32_t K,
              uint32_t cols) {
  using namespace memra_model;
  using memra_cu::LoadFresh;
  __shared__ float warpTotals[kGemvThreads / 32];
  const unsigned rank = cg::this_cluster().block_rank();
  const unsigned group = threadIdx.x / kNormOwners, j = rank * kNormOwners + threadIdx.x % kNormOwners;
  float g[kNormHeld];
  NormGains(g, gain, K, j);
  // This thread's rows of W, on their way into L2 while the norm runs (weights: pdl.cuh): the
  // product's loads come after the norm's meeting, where a plain product loads before its wait.
  const uint32_t col = CW * (threadIdx.x % kWarpCols);
  if (col < cols) {
    const uint32_t stride = kNormSplit * kSplitY;
    for (uint64_t c = rank * kSplitY + threadIdx.x / kWarpCols; c < K / kChunk; c += stride) {
#pragma unroll
      for (unsigned r = 0; r < kChunk; ++r) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(W + (c * kChunk + r) * ldw + col));
      }
    }
  }
  PdlWait();
  PdlLaunchDependents();
  for (unsigned s0 = 0; s0 < unsigned(T); s0 += kNormGroups) {
    const unsigned s = s0 + group;
    const auto sum = [&](float v) { return ClusterSum<kNormSplit>(v, warpTotals, group); };
    if (s < unsigned(T)) {
      const float* h = x + uint64_t(s) * K;
      float held[kNormHeld];
#pragma unroll
      for (unsigned m = 0; m < kNormHeld; ++m) held[m] = NormIndex(j, m) < K ? LoadFresh(h + NormIndex(j, m)) : 0.0f;
      NormRow(normOut + uint64_t(s) * K, held, g, [h](uint64_t i) { return LoadFresh(h + i); }, gain, K, sum, j);
    } else {
      sum(0.0f);  // a round's spare group still meets the cluster
    }
  }
  // The rows' elements, each stored by its owner, visible to the whole cluster (the barrier
  // releases and acquires at cluster scope; the product reads them from L2, LoadFresh).
  cg::this_cluster().sync();
  const uint16_t* const w[1] = {W};
  const float* xr[T];
#pragma unroll
  for (int s = 0; s < T; ++s) xr[s] = normOut + uint64_t(s) * K;
  GemvTile<T, 1, CW, kWide, false, U>(xr, w, ldw, K, cols, 0, kNormSplit, StoreRows<false>{out, ldo});
}

struct NormGemvArgs {
  float* normOut;
  float* out;
  uint64_t ldo;
  const float* x;
  const uint16_t *gain, *W;
  uint64_t ldw;
  uint32_t K, cols;
};

// One cluster: cols fit one tile at CW 2, the width PickCw gives a product this narrow.
template <int T>
cudaError_t NormGemvRows(const NormGemvArgs& a, cudaStream_t stream) {
  constexpr unsigned U = kBatchChunks<2, 1, T>;
  auto kernel = WideOk(a.W, a.ldw, 2) ? norm_gemv<T, 2, U, true> : norm_gemv<T, 2, U, false>;
  return LaunchModelKernel(kernel, dim3(kNormSplit), dim3(kGemvThreads), 0, kNormSplit, stream, a.normOut, a.out,
                           a.ldo, a.x, a.gain, a.W, a.ldw, a.K, a.cols);
}

}  // namespace

extern "C" cudaError_t memra_norm_gemv(float* normOut, float* out, uint64_t ldo, const float* x,
                                       const uint16_t* gain, const uint16_t* W, uint64_t ldw, uint32_t K,
                                       uint32_t cols, uint32_t t, cudaStream_t stream) {
  static_assert(MEMRA_MODEL_NORM_GEMV_MAX_COLS == kWarpCols * 2, "one column tile at CW 2");
  if (t == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || K == 0 || K > (1u << 24) || cols == 0 || cols > MEMRA_MODEL_NORM_GEMV_MAX_COLS)
    return cudaErrorInvalidValue;
  const NormGemvArgs a{normOut, out, ldo, x, gain, W, ldw, K, cols};
  switch (t) {
    case 1: return NormGemvRows<1>(a, stream);
    case 2: return NormGemvRows<2>(a, stream);
    case 3: return NormGemvRows<3>(a, stream);
    case 4: return NormGemvRows<4>(a, stream);
    case 5: return NormGemvRows<5>(a, stream);
    case 6: return NormGemvRows<6>(a, stream);
    case 7: return NormGemvRows<7>(a, stream);
    default: return NormGemvRows<8>(a, stream);
  }
}
