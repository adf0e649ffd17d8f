// memra_gemv: T rows of x times one bf16 matrix (or a slice of its columns), the split S of its K
// rows given by the caller, one per matrix (cu/gemv_tile.cuh: the tile and the slice rule).
#include <stdint.h>

#include <atomic>

#include "cu/gemv_launch.cuh"
#include "cu/gemv_tile.cuh"
#include "cu/model.h"
#ifdef MEMRA_GEMV_MMA
#include "cu/gemv_mma.cuh"
#endif

namespace {

using namespace memra_tile;  // the tile and its launcher, whose instances this file holds

template <int T, int CW, bool kAccumulate, unsigned U, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    gemv(float* __restrict__ out, uint64_t ldo, const float* __restrict__ x, uint64_t ldx,
         const uint16_t* __restrict__ W, uint64_t ldw, uint32_t K, uint32_t cols,
         unsigned split) {
  MEMRA_TRACE_KERNEL(kTraceGemv);
  PdlLaunchDependents();
  const uint16_t* const w[1] = {W};
  const float* xr[T];
#pragma unroll
  for (int s = 0; s < T; ++s) xr[s] = x + uint64_t(s) * ldx;
  GemvTile<T, 1, CW, kWide, kStage, U>(xr, w, ldw, K, cols, (blockIdx.x / split) * kWarpCols * CW, split,
                                      StoreRows<kAccumulate>{out, ldo});
}

struct GemvArgs {
  float* out;
  uint64_t ldo;
  const float* x;
  uint64_t ldx;
  const uint16_t* W;
  uint64_t ldw;
  uint32_t K, cols;
};

template <int T, int CW, bool kAccumulate = false, unsigned U = kBatchChunks<CW, 1, T>>
cudaError_t GemvLaunch(const GemvArgs& a, bool wide, unsigned split, cudaStream_t stream) {
  static std::atomic<size_t> granted[4];
  bool stage;
  const size_t smem = GemvSmem<1, T, CW>(a.K, split, &stage);
  return LaunchTiles(MEMRA_PICK4(gemv, T, CW, kAccumulate, U), a.cols, CW, 1, split, smem,
                     granted[MEMRA_PICK4_AT], stream, a.out, a.ldo, a.x, a.ldx, a.W, a.ldw, a.K,
                     a.cols, split);
}

#ifdef MEMRA_GEMV_MMA
// The tensor-core path (cu/gemv_mma.cuh), built only for the chain probe's A/B: docs/performance.md
// has what it did to the step.
template <int T, bool kAccumulate>
cudaError_t GemvMmaRows(const GemvArgs& a, unsigned split, cudaStream_t stream) {
  static std::atomic<size_t> granted;
  const auto kernel = memra_mma::gemv_mma<T, kAccumulate>;
  const size_t smem = memra_mma::MmaSmem<T>();
  const cudaError_t err = memra_cu::AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  return LaunchModelKernel(kernel, dim3(a.cols / memra_mma::kMmaCols * split), dim3(memra_mma::kMmaThreads), smem,
                           split, stream, a.out, a.ldo, a.x, a.ldx, a.W, a.ldw, a.K, a.cols);
}
#endif

template <int T, bool kAccumulate>
cudaError_t GemvRows(const GemvArgs& a, unsigned split, cudaStream_t stream) {
#ifdef MEMRA_GEMV_MMA
  if (memra_mma::GemvMmaFits(a.x, a.ldx, a.W, a.ldw, a.K, a.cols, T, split)) {
    return GemvMmaRows<T, kAccumulate>(a, split, stream);
  }
#endif
  const int cw = PickCw(
      CwMax(T, 1), [](int c, const void* p) {
        const GemvArgs& g = *static_cast<const GemvArgs*>(p);
        return WideOk(g.W, g.ldw, c);
      }, &a, a.cols, split);
  const bool wide = WideOk(a.W, a.ldw, cw);
  if constexpr (CwMax(T, 1) >= 8) {
    if (cw == 8) return GemvLaunch<T, 8, kAccumulate>(a, wide, split, stream);
  }
  if constexpr (CwMax(T, 1) >= 4) {
    if (cw == 4) return GemvLaunch<T, 4, kAccumulate>(a, wide, split, stream);
  }
  return GemvLaunch<T, 2, kAccumulate>(a, wide, split, stream);
}

template <bool kAccumulate>
cudaError_t GemvBatch(const GemvArgs& a, uint32_t t, unsigned split, cudaStream_t stream) {
  switch (t) {
    case 1: return GemvRows<1, kAccumulate>(a, split, stream);
    case 2: return GemvRows<2, kAccumulate>(a, split, stream);
    case 3: return GemvRows<3, kAccumulate>(a, split, stream);
    case 4: return GemvRows<4, kAccumulate>(a, split, stream);
    case 5: return GemvRows<5, kAccumulate>(a, split, stream);
    case 6: return GemvRows<6, kAccumulate>(a, split, stream);
    case 7: return GemvRows<7, kAccumulate>(a, split, stream);
    case 8: return GemvRows<8, kAccumulate>(a, split, stream);
    default: return cudaErrorInvalidValue;
  }
}


}  // namespace

extern "C" cudaError_t memra_gemv(float* out, uint64_t ldo, const float* x, uint64_t ldx,
                                  const uint16_t* W, uint64_t ldw, uint32_t K, uint32_t cols,
                                  uint32_t t, int accumulate, uint32_t split,
                                  cudaStream_t stream) {
  if (t == 0 || cols == 0) return cudaSuccess;
  if (split > kMaxSplit) return cudaErrorInvalidValue;
  const GemvArgs a{out, ldo, x, ldx, W, ldw, K, cols};
  const unsigned s = split == 0 ? Split(K) : split;
  return accumulate ? GemvBatch<true>(a, t, s, stream) : GemvBatch<false>(a, t, s, stream);
}
