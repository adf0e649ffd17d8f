// memra_latent_query: the attention's two input products in one launch.
//
// c = a @ Wdkv goes straight into the cache at each row's position, and q = a @ Wq beside it:
// the column tiles of both matrices are one grid, so the small Wdkv (R columns) costs a few
// blocks of a full wave instead of a launch of its own, and no separate copy writes the cache.
// Each output's sum is memra_gemv's for K (the slice rule), whichever matrix it belongs to.
// The tile and the slice rule: cu/gemv_tile.cuh.
#include <stdint.h>

#include <atomic>

#include "cu/gemv_launch.cuh"
#include "cu/gemv_tile.cuh"
#include "cu/model.h"

namespace {

using namespace memra_tile;  // the tile and its launcher, whose instances this file holds

struct LatentQueryArgs {
  float* q;             // [t][qcols]
  const float* a;       // [t][K]
  const uint16_t* wdkv; // [K][R]
  const uint16_t* wq;   // [K][qcols]
  float* cache;         // this layer's rows of slot 0; slot s at + s * slotStride
  uint64_t slotStride;
  const int32_t* pos;
  uint32_t K, R, qcols, P;
};

template <int T>
struct StoreLatentQuery {
  const LatentQueryArgs* a;
  bool latent;  // this block's tile is Wdkv's
  __device__ void operator()(unsigned s, uint32_t j, const float (&v)[1]) const {
    if (!latent) {
      a->q[uint64_t(s) * a->qcols + j] = v[0];
      return;
    }
    const int32_t p = memra_cu::LoadFresh(a->pos + s);
    // The host checks positions before a step; a bad one here must not write outside the slot.
    if (p >= 0 && uint32_t(p) < a->P) a->cache[uint64_t(s) * a->slotStride + uint64_t(p) * a->R + j] = v[0];
  }
};

template <int T, int CW, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    latent_query(const LatentQueryArgs a, unsigned latentTiles, unsigned split) {
  MEMRA_TRACE_KERNEL(kTraceLatentQuery);
  PdlLaunchDependents();
  const unsigned tile = blockIdx.x / split;
  const bool latent = tile < latentTiles;
  const uint16_t* const w[1] = {latent ? a.wdkv : a.wq};
  const float* xr[T];
#pragma unroll
  for (int s = 0; s < T; ++s) xr[s] = a.a + uint64_t(s) * a.K;
  const uint32_t col0 = (latent ? tile : tile - latentTiles) * kWarpCols * CW;
  GemvTile<T, 1, CW, kWide, kStage>(xr, w, latent ? a.R : a.qcols, a.K, latent ? a.R : a.qcols, col0,
                                   split, StoreLatentQuery<T>{&a, latent});
}

template <int T, int CW>
cudaError_t LatentQueryLaunch(const LatentQueryArgs& a, bool wide, cudaStream_t stream) {
  static std::atomic<size_t> granted[4];
  const unsigned split = Split(a.K), latentTiles = static_cast<unsigned>(Tiles(a.R, CW));
  bool stage;
  const size_t smem = GemvSmem<1, T, CW>(a.K, split, &stage);
  auto kernel = MEMRA_PICK4(latent_query, T, CW);
  const cudaError_t err = memra_cu::AllowSmem(kernel, smem, granted[MEMRA_PICK4_AT]);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((latentTiles + Tiles(a.qcols, CW)) * split));
  return LaunchModelKernel(kernel, grid, dim3(kGemvThreads), smem, split, stream, a, latentTiles, split);
}

template <int T>
cudaError_t LatentQueryRows(const LatentQueryArgs& a, cudaStream_t stream) {
  const unsigned split = Split(a.K);
  const auto ok = [](int c, const void* p) {
    const LatentQueryArgs& g = *static_cast<const LatentQueryArgs*>(p);
    return WideOk(g.wdkv, g.R, c) && WideOk(g.wq, g.qcols, c);
  };
  const int cw = PickCw(CwMax(T, 1), ok, &a, a.R + a.qcols, split);
  const bool wide = ok(cw, &a);
  if constexpr (CwMax(T, 1) >= 8) {
    if (cw == 8) return LatentQueryLaunch<T, 8>(a, wide, stream);
  }
  if constexpr (CwMax(T, 1) >= 4) {
    if (cw == 4) return LatentQueryLaunch<T, 4>(a, wide, stream);
  }
  return LatentQueryLaunch<T, 2>(a, wide, stream);
}

}  // namespace

extern "C" cudaError_t memra_latent_query(float* q, const float* a, const uint16_t* wdkv,
                                          const uint16_t* wq, float* cache, uint64_t slotStride,
                                          const int32_t* pos, uint32_t K, uint32_t R,
                                          uint32_t qcols, uint32_t t, uint32_t P,
                                          cudaStream_t stream) {
  if (t == 0 || (R == 0 && qcols == 0)) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || slotStride < uint64_t(P) * R) return cudaErrorInvalidValue;
  const LatentQueryArgs args{q, a, wdkv, wq, cache, slotStride, pos, K, R, qcols, P};
  switch (t) {
    case 1: return LatentQueryRows<1>(args, stream);
    case 2: return LatentQueryRows<2>(args, stream);
    case 3: return LatentQueryRows<3>(args, stream);
    case 4: return LatentQueryRows<4>(args, stream);
    case 5: return LatentQueryRows<5>(args, stream);
    case 6: return LatentQueryRows<6>(args, stream);
    case 7: return LatentQueryRows<7>(args, stream);
    case 8: return LatentQueryRows<8>(args, stream);
    default: return cudaErrorInvalidValue;
  }
}
