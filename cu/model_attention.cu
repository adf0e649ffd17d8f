// The latent KV cache and absorbed MLA attention over it (docs/model.md "One decode step"), in the
// flash-decoding form: the positions are cut into tiles spread over the whole GPU, and every
// head of a block shares its tile's cache rows, which are read from memory once per step for all
// of them (the cache is what a long context costs; one block per head re-read it per head).
//
//   mla_tiles    grid (blocks, t), R <= 512: a row's (tile of 32 positions, group of HB heads)
//                items, HB picked by the row's position so that they fit one block an SM; per
//                item the tile's rows and the group's queries into shared memory, then per head
//                its scores, their max m, the sum l of exp(s - m) and the unnormalized
//                o = sum exp(s - m) * cache_j, into the workspace;
//   mla_partial  grid (tiles, t, heads / 8), R > 512: the same for tiles of 8 positions, a head a warp;
//   mla_combine  grid (heads x a cluster of 4, t): M = max m_i, o = sum_i exp(m_i - M) o_i / sum_i
//                exp(m_i - M) l_i, then u = o @ Wuv[n], each block a quarter of r and of u.
// Every order depends only on R and the position count (the slice rule, cu/model.h), never on
// nh, the head's index, the heads a block holds or t, so rank r's heads are bit-identical to the
// same heads of an unsharded call:
//   score: the lane of position j sums its r in increasing float4 groups (fmaf, x y z w), over
//          the 32 / C lanes that share a position when C < 32 (at C = 32, four partial sums over
//          the r groups g = 0..3 mod 4), then a xor butterfly of those;
//   m: exact in any order; l and the tile's o: positions in increasing j (butterfly for l);
//   combine: the tiles in increasing order; u: 32 partials over r = p (mod 32), each in
//          increasing r, added in p order;
//   except, in a build with -DMEMRA_MLA_MMA_FROM=N, at R = 512 from N positions: a tile's scores
//          and o on the tensor cores, in the order cu/mla_tile_mma.cuh gives.
// A call whose P is at most memra_mla_short_positions(R) takes one kernel that makes the same
// steps (cu/model_attention_short.cu): at a short context the two kernels are mostly fixed cost.
#include <cooperative_groups.h>
#include <math.h>
#include <stdint.h>

#include <atomic>
#include <type_traits>

#include "cu/cluster_started.cuh"
#include "cu/cp_async.cuh"
#include "cu/launch.cuh"
#include "cu/mla_parts.cuh"
#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "cu/model_reduce.cuh"
#include "cu/pdl.cuh"
#include "cu/smem_limit.cuh"

namespace {

using memra_cu::AllowSmem;
using memra_cu::LaunchModelKernel;
using memra_cu::LoadFresh;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;
using memra_mla::Axpy4;
using memra_mla::Dot4;
using memra_mla::Fma8;
using memra_mla::kUGroup;
using memra_mla::kUParts;
using memra_mla::MaxF;
using memra_mla::PositionTile;
using memra_mla::Stage;
using memra_mla::WarpMax;
using memra_mla::WarpSum;

constexpr unsigned kPartialWarps = 8;
constexpr unsigned kPartialThreads = kPartialWarps * 32;
constexpr unsigned kCombineThreads = 512;
constexpr unsigned kUPass = 256;   // d's per pass through the partials' shared memory
constexpr unsigned kCacheWriteThreads = 256;
// A padded cache row in shared memory: R + 4 floats, so rows four apart (TileHeads' scores: a
// quarter-warp reads the same r groups of two of them) start 16 banks apart where R % 32 == 0
// (at R % 32 == 16 they share banks: two wavefronts, the same values).
constexpr unsigned kRowPad = 4;

// Slot s's cache for `layer`: P positions of R floats.
__device__ __forceinline__ uint64_t CacheBase(uint32_t s, uint32_t layer, uint32_t L, uint32_t P,
                                              uint32_t R) {
  return (uint64_t(s) * L + layer) * P * R;
}

__global__ void cache_write(float* __restrict__ cache, const float* __restrict__ c,
                            const int32_t* __restrict__ pos, uint32_t layer, uint32_t L,
                            uint32_t P, uint32_t R) {
  PdlWait();
  PdlLaunchDependents();
  const uint32_t s = blockIdx.y;
  const int32_t p = LoadFresh(pos + s);
  // The host checks positions before a step; a bad one here must not write outside the slot.
  if (p < 0 || uint32_t(p) >= P) return;
  float* dst = cache + CacheBase(s, layer, L, P, R) + uint64_t(p) * R;
  const float* src = c + uint64_t(s) * R;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < R;
       r += uint64_t(gridDim.x) * blockDim.x) {
    dst[r] = LoadFresh(src + r);
  }
}

// Where a row's tile partials live: o at work + ((s * tiles + i) * nh + n) * R, then the (m, l)
// pairs after every o.
struct Workspace {
  float* o;
  float* ml;
  uint32_t tiles;
  __host__ __device__ uint64_t Index(uint32_t s, uint32_t i, uint32_t n, uint32_t nh) const {
    return (uint64_t(s) * tiles + i) * nh + n;
  }
};

__host__ __device__ inline Workspace MakeWorkspace(float* work, uint32_t t, uint32_t nh, uint32_t P,
                                                   uint32_t R) {
  const uint32_t tiles = (P + PositionTile(R) - 1) / PositionTile(R);
  return {work, work + uint64_t(t) * tiles * nh * R, tiles};
}

// R <= 512: one tile of 32 positions (`tile`) of row s for the HB heads from hb0 (< nh), by the
// block's kPartialThreads threads (every one calls it, once PdlWait() has returned). Dynamic
// shared memory (TilesSmemFloats): the tile's 32 padded cache rows, the heads' queries [HB][R], then
// their scores [HB][32], overwritten by exp(s - m).
//
// The block is bound by its shared-memory wavefronts, not its FMAs: a 16-byte shared load costs
// four wavefronts a warp whether its lanes read 32 addresses or 4, and an SM serves one a cycle
// while it issues four warp FMAs (Nsight Compute on the tile kernel at position 1023: every
// LDS.128 four wavefronts, the kernel's 1.4 M of them about 5.5 us an SM, more than all else).
// So each phase keeps a loaded value in registers for as many FMAs as fit:
//   scores  warp w: heads w * HA .. + HA, lane (pq, g): positions 4 pq .. 4 pq + 3 over r group g;
//           a step loads HA + 4 float4 for 16 HA FMAs (one head and four positions a lane were
//           5 for 16, the most of these wavefronts);
//   o       lane (r group qd, head group): QO r groups of HO heads; four positions load 4 QO
//           float4 of their rows and HO of the heads' exps for 16 HO QO FMAs (one head a lane: 16
//           rows and 4 shuffles for 64).
// Each sum is the one cu/model_attention.cu's header gives, step for step, so which heads a block
// holds changes no bit (the test holds the tiles to the one-kernel form's bits).
template <unsigned HB>
struct TileHeadsShape {
  // Four warps score: at 32 heads, eight warps of four heads each were slower (the chain probe:
  // position 4000 4.506-4.515 -> 4.523-4.529 ms, t = 8 at 1023 13.258-13.290 -> 13.330-13.336).
  static constexpr unsigned kScoreHeads = HB == 8 ? 2 : HB == 16 ? 4 : 8;  // HA
  static constexpr unsigned kScoreWarps = HB / kScoreHeads;
  static constexpr unsigned kOHeads = HB / 2 < 8 ? HB / 2 : 8;  // HO
  static constexpr unsigned kOQuads = HB / kOHeads / 2;          // QO: r groups a lane, 64 apart
  static constexpr unsigned kOLanes = 128 / kOQuads;             // lanes of a head group
  static constexpr unsigned kSoftmaxHeads = HB / kPartialWarps;  // heads a warp
  static_assert(kScoreWarps <= kPartialWarps && HB / kOHeads * kOLanes == kPartialThreads, "the phases' lanes");
};

// The item's softmax over its tile: heads warp + 8 k (k < HS) a warp, a lane a position. sS holds
// the heads' scores (row stride `row`) and is left with their exps, 0 past nv; each head's max m and
// butterfly sum l go to the workspace, the HS heads' butterflies interleaved (in series they were a
// round trip each).
template <unsigned HS>
__device__ __forceinline__ void TileSoftmax(float* sS, uint32_t row, uint32_t nv, uint32_t nhB, const Workspace& ws,
                                            uint32_t s, uint32_t tile, uint32_t hb0, uint32_t nh) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float sj[HS], mx[HS], e[HS], l[HS];
#pragma unroll
  for (unsigned k = 0; k < HS; ++k) {
    sj[k] = lane < nv ? sS[(warp + kPartialWarps * k) * row + lane] : -INFINITY;
    mx[k] = sj[k];
  }
  WarpMax(mx);
#pragma unroll
  for (unsigned k = 0; k < HS; ++k) {
    e[k] = lane < nv ? expf(__fsub_rn(sj[k], mx[k])) : 0.0f;
    l[k] = e[k];
  }
  WarpSum(l);
#pragma unroll
  for (unsigned k = 0; k < HS; ++k) {
    const uint32_t h = warp + kPartialWarps * k;
    sS[h * row + lane] = e[k];
    if (lane == 0 && h < nhB) {
      const uint64_t at = ws.Index(s, tile, hb0 + h, nh);
      ws.ml[2 * at] = mx[k];
      ws.ml[2 * at + 1] = l[k];
    }
  }
}

template <unsigned HB, bool kVec>
__device__ __forceinline__ void TileHeads(const MemraMlaArgs& a, const Workspace& ws, uint32_t tile, uint32_t s,
                                          uint32_t hb0, uint32_t np, uint32_t staged) {
  using Shape = TileHeadsShape<HB>;
  constexpr unsigned HA = Shape::kScoreHeads, HO = Shape::kOHeads, QO = Shape::kOQuads, HS = Shape::kSoftmaxHeads;
  extern __shared__ float4 smem4[];
  const uint32_t R = a.R, quads = R / 4, rowF = R + kRowPad;
  float* sc = reinterpret_cast<float*>(smem4);
  float* sq = sc + 32 * rowF;
  float* sS = sq + HB * R;
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const uint32_t j0 = tile * 32, nv = np - j0 < 32 ? np - j0 : 32;
  const uint32_t nhB = a.nh - hb0 < HB ? a.nh - hb0 : HB;

  // The tile's first `staged` rows are in shared memory already (mla_tiles, before its wait: all
  // but the newest, latent_query's).
  const float* kv = a.cache + uint64_t(s) * a.slotStride + uint64_t(j0 + staged) * R;
  Stage<kVec>(sc + staged * rowF, rowF, kv, nv - staged, R);
  Stage<kVec>(sq, R, a.q + uint64_t(s) * a.ldq + uint64_t(hb0) * R, nhB, R);
  if (kVec) memra_cu::WaitCopiesToShared();
  // Heads past nh read zeros, never what an earlier item left in shared memory. Rows past nv are
  // stale: their scores are made and never read, and no o reads them.
  for (uint32_t i = nhB * R + tid; i < HB * R; i += kPartialThreads) sq[i] = 0.0f;
  __syncthreads();
  MEMRA_TRACE_MARK(0);

  // Scores: lane (pq, g) chains r group g (float4 g + 4m, increasing m) of its 4 positions and the
  // warp's HA heads, then the four groups by a xor butterfly (lanes g = 0..3 are adjacent).
  const float sqrtR = __fsqrt_rn(static_cast<float>(R));
  if (warp < Shape::kScoreWarps) {
    const unsigned g = lane % 4, pq = lane / 4, h0 = warp * HA;
    float acc[HA][4];
#pragma unroll
    for (unsigned h = 0; h < HA; ++h) {
#pragma unroll
      for (unsigned i = 0; i < 4; ++i) acc[h][i] = 0.0f;
    }
    const float* crow = sc + 4 * pq * rowF;
    const float* qrow = sq + h0 * R;
#pragma unroll 2
    for (uint32_t m = 0; m < R / 16; ++m) {
      const uint32_t at = 4 * (g + 4 * m);
      float4 c[4], q[HA];
#pragma unroll
      for (unsigned i = 0; i < 4; ++i) c[i] = *reinterpret_cast<const float4*>(crow + i * rowF + at);
#pragma unroll
      for (unsigned h = 0; h < HA; ++h) q[h] = *reinterpret_cast<const float4*>(qrow + h * R + at);
#pragma unroll
      for (unsigned h = 0; h < HA; ++h) {
#pragma unroll
        for (unsigned i = 0; i < 4; ++i) acc[h][i] = Dot4(q[h], c[i], acc[h][i]);
      }
    }
#pragma unroll
    for (unsigned o = 1; o < 4; o <<= 1) {
#pragma unroll
      for (unsigned h = 0; h < HA; ++h) {
#pragma unroll
        for (unsigned i = 0; i < 4; ++i) acc[h][i] = __fadd_rn(acc[h][i], __shfl_xor_sync(0xffffffffu, acc[h][i], o));
      }
    }
    // Lane g stores position 4 pq + g. docs/model.md: s_j = (q . c_j) / sqrt(R), a true division.
#pragma unroll
    for (unsigned h = 0; h < HA; ++h) {
      const float v = g == 0 ? acc[h][0] : g == 1 ? acc[h][1] : g == 2 ? acc[h][2] : acc[h][3];
      sS[(h0 + h) * 32 + 4 * pq + g] = __fdiv_rn(v, sqrtR);
    }
  }
  __syncthreads();
  MEMRA_TRACE_MARK(1);

  TileSoftmax<HS>(sS, 32, nv, nhB, ws, s, tile, hb0, a.nh);
  __syncthreads();
  MEMRA_TRACE_MARK(2);

  // o over the tile's positions in increasing j, four rows loaded at a time (past nv, the last
  // again: none is applied). Lane (qd, group): r groups qd + kOLanes k of heads group * HO + i.
  const uint32_t qd = tid % Shape::kOLanes, hf = tid / Shape::kOLanes * HO;
  const float4* c4 = reinterpret_cast<const float4*>(sc) + qd;
  const uint32_t row4 = rowF / 4;
  if (hf < nhB && qd < quads) {
    float4 acc[HO][QO];
#pragma unroll
    for (unsigned h = 0; h < HO; ++h) {
#pragma unroll
      for (unsigned k = 0; k < QO; ++k) acc[h][k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    // At 32 heads a lane's second r group is qd + 64, past R / 4 for some lanes where R < 512:
    // those load their first again and store nothing.
    const uint32_t k1 = qd + Shape::kOLanes < quads ? Shape::kOLanes : 0;
    for (uint32_t jb = 0; jb < nv; jb += 4) {
      float4 c[4][QO];
#pragma unroll
      for (unsigned u = 0; u < 4; ++u) {
        const uint32_t row = (jb + u < nv ? jb + u : nv - 1) * row4;
#pragma unroll
        for (unsigned k = 0; k < QO; ++k) c[u][k] = c4[row + k * k1];
      }
#pragma unroll
      for (unsigned h = 0; h < HO; ++h) {
        const float4 ev = *reinterpret_cast<const float4*>(sS + (hf + h) * 32 + jb);
#pragma unroll
        for (unsigned k = 0; k < QO; ++k) {
          Axpy4(ev.x, c[0][k], acc[h][k]);
          if (jb + 1 < nv) Axpy4(ev.y, c[1][k], acc[h][k]);
          if (jb + 2 < nv) Axpy4(ev.z, c[2][k], acc[h][k]);
          if (jb + 3 < nv) Axpy4(ev.w, c[3][k], acc[h][k]);
        }
      }
    }
#pragma unroll
    for (unsigned h = 0; h < HO; ++h) {
      if (hf + h < nhB) {
        float4* out = reinterpret_cast<float4*>(ws.o + ws.Index(s, tile, hb0 + hf + h, a.nh) * R);
#pragma unroll
        for (unsigned k = 0; k < QO; ++k) {
          if (k == 0 || k1 != 0) out[qd + k * Shape::kOLanes] = acc[h][k];
        }
      }
    }
  }
  MEMRA_TRACE_MARK(3);
}

// Floats of TileHeads' dynamic shared memory at HB heads.
__host__ __device__ constexpr size_t TilesSmemFloats(uint32_t R, unsigned HB) {
  return size_t(32) * (R + kRowPad) + size_t(HB) * R + size_t(HB) * 32;
}

// Heads an item of a row with `tiles` tiles takes: the fewest of 8, 16 and 32 whose items fit
// `blocks` (a block an SM), else the fewest with the fewest items (bench at position 1023, 32
// tiles: 8 heads, 128 items; at 3999, 125 tiles: 32, 125 items). A block's time grows with its
// heads, so more than the items need leaves SMs idle; fewer make a second round of items.
__device__ __forceinline__ unsigned TileHeadsFor(uint32_t tiles, uint32_t nh, uint32_t blocks) {
  unsigned best = 8;
  uint64_t fewest = uint64_t(tiles) * ((nh + 7) / 8);
  for (unsigned hb = 16; hb <= 32 && fewest > blocks; hb *= 2) {
    const uint64_t items = uint64_t(tiles) * ((nh + hb - 1) / hb);
    if (items < fewest) best = hb, fewest = items;
  }
  return best;
}

// A row's items at position p (< P): tiles x head groups of HB heads, tile-major.
struct TileItems {
  uint32_t np, groups;
  unsigned hb;
  uint64_t items;
  __device__ TileItems(uint32_t p, uint32_t nh, uint32_t blocks) : np(p + 1) {
    const uint32_t tiles = (np + 31) / 32;
    hb = TileHeadsFor(tiles, nh, blocks);
    groups = (nh + hb - 1) / hb;
    items = uint64_t(tiles) * groups;
  }
};

// The item on the tensor cores (mla_mma::TileHeadsMma), which the tile kernel's kMma form takes
// for a row of at least mla_mma::kFrom positions (a build with -DMEMRA_MLA_MMA_FROM).
#include "cu/mla_tile_mma.cuh"

// R <= 512: grid (blocks, t); block x of row s takes the row's items x, x + blocks, ... (TileItems).
// The grid is fixed (one block an SM, split over the rows); the items follow the row's position,
// so a short context leaves blocks idle rather than a long one waiting for a second wave (the
// tile-by-head grid at position 3999: its second wave of blocks released 13 us after the first,
// half of the kernel's 23 us).
//
// Before its wait a block stages its first item's cache rows but the newest (pdl.cuh: rows the
// step does not write), at the position read before the wait. That position was set at the step's
// start, behind at least one kernel that waits first (the norm ahead of latent_query), so it is
// final here; a caller whose kernel ahead set it is caught after the wait, and the rows staged
// for the old position are staged again.
//
// kMma (R = 512): a row of at least mla_mma::kFrom positions takes the item on the tensor cores.
// The choice is the row's own position count, so a row's bits depend on it alone, as the slice
// rule asks; shared memory is sized for the larger item.
template <bool kVec, bool kMma = false>
__global__ void __launch_bounds__(kPartialThreads) mla_tiles(MemraMlaArgs a, Workspace ws) {
  MEMRA_TRACE_KERNEL(kTraceMlaTiles);
  extern __shared__ float4 smem4[];
  __shared__ int32_t early;
  const uint32_t s = blockIdx.y, R = a.R;
  const float* kv = a.cache + uint64_t(s) * a.slotStride;
  // One read for the block, so that every thread takes the same branches below.
  if (threadIdx.x == 0) early = __ldcg(a.pos + s);
  __syncthreads();
  const int32_t pe = early;
  // Rows of the first item's tile below pe (the tile's first `staged`).
  uint32_t staged = 0;
  if (pe >= 0 && uint32_t(pe) < a.P) {
    const TileItems it(uint32_t(pe), a.nh, gridDim.x);
    const uint32_t j0 = uint32_t(blockIdx.x / it.groups) * 32;
    if (blockIdx.x < it.items) staged = uint32_t(pe) - j0 < 32 ? uint32_t(pe) - j0 : 32;
    if (kMma && mla_mma::Takes(it.np)) {
      mla_mma::StageTile<kVec>(reinterpret_cast<float*>(smem4), kv + uint64_t(j0) * R, 0, staged);
    } else {
      Stage<kVec>(reinterpret_cast<float*>(smem4), R + kRowPad, kv + uint64_t(j0) * R, staged, R);
    }
  }
  PdlWait();
  PdlLaunchDependents();
  const int32_t p = LoadFresh(a.pos + s);
  if (p != pe && staged != 0) {
    // Every copy for the old position lands before any for the new one is issued.
    if (kVec) memra_cu::WaitCopiesToShared();
    __syncthreads();
    staged = 0;
  }
  if (p < 0 || uint32_t(p) >= a.P) return;  // mla_combine poisons this row's u (nothing staged)
  const TileItems it(uint32_t(p), a.nh, gridDim.x);
  for (uint64_t w = blockIdx.x; w < it.items; w += gridDim.x) {
    // The item before is done with shared memory.
    if (w != blockIdx.x) __syncthreads();
    const uint32_t tile = uint32_t(w / it.groups), hb0 = uint32_t(w % it.groups) * it.hb;
    const uint32_t rows = w == blockIdx.x ? staged : 0;
    // The item at its heads a block, in the row's form.
    const auto item = [&](auto heads) {
      constexpr unsigned HB = decltype(heads)::value;
      if (kMma && mla_mma::Takes(it.np)) {
        mla_mma::TileHeadsMma<HB, kVec>(a, ws, tile, s, hb0, it.np, rows);
      } else {
        TileHeads<HB, kVec>(a, ws, tile, s, hb0, it.np, rows);
      }
    };
    if (it.hb == 8) {
      item(std::integral_constant<unsigned, 8>());
    } else if (it.hb == 16) {
      item(std::integral_constant<unsigned, 16>());
    } else {
      item(std::integral_constant<unsigned, 32>());
    }
  }
}

// R > 512 (TileHeads takes R <= 512): one tile of C < 32 positions (`tile`) of row s for HPW
// heads a warp from head hb0 (< nh), kPartialWarps warps a block; a lane keeps QPL float4 of each
// of its heads' o. Dynamic shared memory: the tile's C padded cache rows, then the block's queries
// [HPW * kPartialWarps][R]. Every thread of the block calls it, once PdlWait() has returned, and
// the kernel ends when it does.
template <unsigned C, unsigned HPW, unsigned QPL, bool kVec>
__device__ __forceinline__ void PartialTile(const MemraMlaArgs& a, const Workspace& ws, uint32_t tile, uint32_t s,
                                            uint32_t hb0) {
  static_assert(C < 32, "a tile of 32 positions is TileHeads'");
  constexpr unsigned RG = 32 / C;  // lanes one position's score is split over
  constexpr unsigned HB = HPW * kPartialWarps;
  extern __shared__ float4 smem4[];
  const uint32_t R = a.R, quads = R / 4, rowF = R + kRowPad;
  float* sc = reinterpret_cast<float*>(smem4);
  float* sq = sc + C * rowF;
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  const int32_t p = LoadFresh(a.pos + s);
  if (p < 0 || uint32_t(p) >= a.P) return;  // mla_combine poisons this row's u
  const uint32_t np = uint32_t(p) + 1, j0 = tile * C;
  if (j0 >= np) return;
  const uint32_t nv = np - j0 < C ? np - j0 : C;
  const uint32_t nhB = a.nh - hb0 < HB ? a.nh - hb0 : HB;

  const float* kv = a.cache + uint64_t(s) * a.slotStride + uint64_t(j0) * R;
  Stage<kVec>(sc, rowF, kv, nv, R);
  Stage<kVec>(sq, R, a.q + uint64_t(s) * a.ldq + uint64_t(hb0) * R, nhB, R);
  if (kVec) memra_cu::WaitCopiesToShared();
  // Heads past nh read zeros, never what an earlier block left in shared memory.
  for (uint32_t i = nhB * R + tid; i < HB * R; i += kPartialThreads) sq[i] = 0.0f;
  __syncthreads();
  const float sqrtR = __fsqrt_rn(static_cast<float>(R));
  // A warp whose heads are all past nh has nothing to do (no block barrier follows).
  const unsigned h0 = warp * HPW;
  if (h0 >= nhB) return;

  // Scores, a lane a position, by the RG lanes of a position over heads h0 .. h0 + HPW of this warp.
  const unsigned j = lane / RG, g = lane % RG;
  float d[HPW];
#pragma unroll
  for (unsigned h = 0; h < HPW; ++h) d[h] = 0.0f;
  if (j < nv) {
    const float* crow = sc + j * rowF;
#pragma unroll 4
    for (uint32_t qd = g; qd < quads; qd += RG) {
      const float4 c = *reinterpret_cast<const float4*>(crow + 4 * qd);
#pragma unroll
      for (unsigned h = 0; h < HPW; ++h) {
        d[h] = Dot4(*reinterpret_cast<const float4*>(sq + (h0 + h) * R + 4 * qd), c, d[h]);
      }
    }
  }
#pragma unroll
  for (unsigned o = 1; o < RG; o <<= 1) {
#pragma unroll
    for (unsigned h = 0; h < HPW; ++h) d[h] = __fadd_rn(d[h], __shfl_xor_sync(0xffffffffu, d[h], o));
  }
  // docs/model.md: s_j = (q . c_j) / sqrt(R), sqrt(R) the f32 square root, and a true division.
  float e[HPW], m[HPW], l[HPW];
#pragma unroll
  for (unsigned h = 0; h < HPW; ++h) {
    const float sj = j >= nv ? -INFINITY : __fdiv_rn(d[h], sqrtR);
    m[h] = WarpMax(sj);
    e[h] = j < nv ? expf(__fsub_rn(sj, m[h])) : 0.0f;
    // The sum over positions: one lane of each position contributes; exact zeros elsewhere.
    l[h] = WarpSum(g == 0 ? e[h] : 0.0f);
  }

  // o over the tile's positions in increasing j; lane = float4 group of r.
  float4 acc[HPW][QPL];
#pragma unroll
  for (unsigned h = 0; h < HPW; ++h) {
#pragma unroll
    for (unsigned k = 0; k < QPL; ++k) acc[h][k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  for (uint32_t jj = 0; jj < nv; ++jj) {
    float ej[HPW];
#pragma unroll
    for (unsigned h = 0; h < HPW; ++h) ej[h] = __shfl_sync(0xffffffffu, e[h], jj * RG);
    const float* crow = sc + jj * rowF;
#pragma unroll
    for (unsigned k = 0; k < QPL; ++k) {
      const uint32_t qd = lane + 32 * k;
      if (qd < quads) {
        const float4 c = *reinterpret_cast<const float4*>(crow + 4 * qd);
#pragma unroll
        for (unsigned h = 0; h < HPW; ++h) Axpy4(ej[h], c, acc[h][k]);
      }
    }
  }
#pragma unroll
  for (unsigned h = 0; h < HPW; ++h) {
    if (h0 + h >= nhB) break;
    const uint64_t at = ws.Index(s, tile, hb0 + h0 + h, a.nh);
    float4* out = reinterpret_cast<float4*>(ws.o + at * R);
#pragma unroll
    for (unsigned k = 0; k < QPL; ++k) {
      const uint32_t qd = lane + 32 * k;
      if (qd < quads) out[qd] = acc[h][k];
    }
    if (lane == 0) {
      ws.ml[2 * at] = m[h];
      ws.ml[2 * at + 1] = l[h];
    }
  }
}

template <unsigned C, unsigned HPW, unsigned QPL, bool kVec>
__global__ void __launch_bounds__(kPartialThreads) mla_partial(MemraMlaArgs a, Workspace ws) {
  // Positions, queries and the cache are all written by the kernels before this one.
  PdlWait();
  PdlLaunchDependents();
  PartialTile<C, HPW, QPL, kVec>(a, ws, blockIdx.x, blockIdx.y, blockIdx.z * HPW * kPartialWarps);
}

// The combine of one head of one row is a cluster of kCombineBlocks blocks: block b sums the
// tiles for its quarter of r (rq of them) and makes its quarter of u's d's (dq). One block a head
// ran each o[r]'s chain over the tiles as a round trip to L2 every 16 tiles, on 32 SMs (bench at
// position 3999: 125 tiles, 11.3 us); here every tile partial of the block's r's is staged first
// (one round trip), and the four blocks share o through distributed shared memory before u.
// Every block computes the same max and l (the same fixed order over kCombineThreads), so where
// a sum lands changes none of the orders above.
//
// A block's Wuv columns (R x dq bf16, 32 KB on bench) are copied into shared memory before the
// wait, where they fit: held in registers instead they took the 128 a thread of one 512-thread
// block an SM, and with one block an SM a grid of 32 clusters of four is two waves (an H200 holds
// 30 such clusters at once; the probe's combine took 15 us at any position).
constexpr unsigned kCombineBlocks = 4;
constexpr uint32_t kCombineStage = 16384;        // floats of staged tile partials a pass (64 KB)
constexpr uint32_t kCombineWuvBytes = 48 * 1024;  // the most of Wuv a block stages

struct CombineShape {
  uint32_t rq, dq;      // r's and d's a block (multiples of 4 and of kUGroup)
  uint32_t stageTiles;  // tiles a pass stages
  uint32_t pass;        // d's a pass through part[]
  uint32_t wuvStaged;   // 1: the block's Wuv columns are in shared memory (16-byte loads only)
};

CombineShape MakeCombineShape(const MemraMlaArgs& a, const Workspace& ws, bool vecW) {
  CombineShape c;
  c.rq = (a.R + 4 * kCombineBlocks - 1) / (4 * kCombineBlocks) * 4;
  c.dq = (a.Dv + kUGroup * kCombineBlocks - 1) / (kUGroup * kCombineBlocks) * kUGroup;
  const uint32_t fit = kCombineStage / c.rq;
  c.stageTiles = ws.tiles < fit ? ws.tiles : (fit > 0 ? fit : 1);
  c.pass = c.dq < kUPass ? c.dq : kUPass;
  c.wuvStaged = vecW && uint64_t(a.R) * c.dq * sizeof(uint16_t) <= kCombineWuvBytes;
  return c;
}

// Floats of dynamic shared memory: the staged Wuv columns [R][dq] bf16 (wuvStaged), the staged
// partials [stageTiles][rq], the whole o [R] (each quarter stored there by its block), u's
// partials [kUParts][pass], then the tiles' weights w[tiles] and their l[tiles], each rounded up
// to 16 floats: the o loop reads the weights unrolled, which the compiler may vectorize (memcheck
// once saw a 16-byte read past the end of a single tile's weight).
__host__ __device__ inline size_t WuvStageFloats(const MemraMlaArgs& a, const CombineShape& c) {
  return c.wuvStaged ? size_t(a.R) * c.dq / 2 : 0;
}

size_t CombineSmemFloats(const MemraMlaArgs& a, const Workspace& ws, const CombineShape& c) {
  return WuvStageFloats(a, c) + size_t(c.stageTiles) * c.rq + ((a.R + 3) & ~3u) + size_t(kUParts) * c.pass +
         2 * size_t((ws.tiles + 15) & ~15u);
}

// Two blocks an SM (64 registers a thread): the grid's clusters in one wave.
template <bool kVec>
__global__ void __launch_bounds__(kCombineThreads, 2)
    mla_combine(MemraMlaArgs a, Workspace ws, CombineShape c) {
  MEMRA_TRACE_KERNEL(kTraceMlaCombine);
  namespace cg = cooperative_groups;
  memra_cu::ClusterArriveStarted();
  extern __shared__ float4 smem4[];
  __shared__ float scratch[kCombineThreads / 32];
  const uint32_t R = a.R, Dv = a.Dv, n = blockIdx.x / kCombineBlocks, s = blockIdx.y;
  const uint32_t b = blockIdx.x % kCombineBlocks;  // the cluster's blocks are consecutive in x
  uint16_t* wsm = reinterpret_cast<uint16_t*>(smem4);
  float* stage = reinterpret_cast<float*>(smem4) + WuvStageFloats(a, c);
  float* osh = stage + size_t(c.stageTiles) * c.rq;
  float* part = osh + ((R + 3) & ~3u);
  float* wsh = part + kUParts * c.pass;
  float* lsh = wsh + ((ws.tiles + 15) & ~15u);
  const unsigned tid = threadIdx.x;
  const uint32_t r0 = b * c.rq < R ? b * c.rq : R, nr = R - r0 < c.rq ? R - r0 : c.rq;
  const uint32_t d0 = b * c.dq < Dv ? b * c.dq : Dv, nd = Dv - d0 < c.dq ? Dv - d0 : c.dq;
  float* un = a.u + uint64_t(s) * a.ldu + uint64_t(n) * Dv + d0;
  const uint16_t* wn = a.wuv + uint64_t(n) * R * Dv + d0;

  // The block's Wuv columns, copied while the tile kernel still runs (weights: pdl.cuh); the first
  // WaitCopiesToShared below lands them with the staged partials (there is always one pass).
  if (c.wuvStaged) {
    const uint32_t rowChunks = nd / kUGroup;
    for (uint32_t i = tid; i < R * rowChunks; i += kCombineThreads) {
      const uint32_t r = i / rowChunks, k = i - r * rowChunks;
      memra_cu::CopyToShared16(wsm + r * c.dq + k * kUGroup, wn + uint64_t(r) * Dv + k * kUGroup);
    }
  }

  // The position before the wait (pdl.cuh): this grid starts only once every block of the tile
  // kernel has returned from its own wait, so every kernel before that one, whichever set the
  // positions, is complete.
  const int32_t p = LoadFresh(a.pos + s);
  PdlWait();
  PdlLaunchDependents();
  if (p < 0 || uint32_t(p) >= a.P) {
    // A position the cache cannot hold: poison this head's output (the host checks positions
    // before a step; this is the device's last guard). Every block of the cluster leaves here,
    // its Wuv copies landed first (they write this block's shared memory).
    for (uint32_t d = tid; d < nd; d += kCombineThreads) un[d] = __int_as_float(0x7fc00000);
    memra_cu::WaitCopiesToShared();
    memra_cu::ClusterWaitStarted();
    return;
  }
  const uint32_t tiles = (uint32_t(p) + PositionTile(R)) / PositionTile(R);
  MEMRA_TRACE_MARK(0);

  // o[r0 + tid] over the tiles in increasing order, stageTiles of them staged at a time: R and
  // r0 are multiples of 4 and the workspace 16-byte aligned, so every row copies as float4s. The
  // first pass is in flight while the max and l are made.
  const float* src = ws.o + ws.Index(s, 0, n, a.nh) * R + r0;
  const uint64_t step = uint64_t(a.nh) * R;
  const uint32_t rowQuads = nr / 4;
  const auto stageFrom = [&](uint32_t t0) {
    const uint32_t nt = tiles - t0 < c.stageTiles ? tiles - t0 : c.stageTiles;
    for (uint32_t i = tid; i < nt * rowQuads; i += kCombineThreads) {
      const uint32_t ti = i / rowQuads, qd = i - ti * rowQuads;
      memra_cu::CopyToShared16(stage + ti * nr + 4 * qd, src + (t0 + ti) * step + 4 * qd);
    }
  };
  // Each tile's (m, l) read once, as a pair: m into wsh (its weight replaces it), l into lsh. A
  // thread's first pair is asked for before the partials' copies, which would otherwise queue
  // ahead of it in L2 (every block's 64 KB at position 4000), and the max and l wait on it (the
  // chain probe at position 4000: the step 0.5% shorter, docs/performance.md).
  const auto mlAt = [&](uint32_t i) {
    return LoadFresh(reinterpret_cast<const float2*>(ws.ml) + ws.Index(s, i, n, a.nh));
  };
  const float2 ml0 = tid < tiles ? mlAt(tid) : make_float2(-INFINITY, 0.0f);
  stageFrom(0);
  float mx = -INFINITY;
  if (tid < tiles) {
    wsh[tid] = ml0.x;
    lsh[tid] = ml0.y;
    mx = fmaxf(mx, ml0.x);
  }
  for (uint32_t i = tid + kCombineThreads; i < tiles; i += kCombineThreads) {
    const float2 ml = mlAt(i);
    wsh[i] = ml.x;
    lsh[i] = ml.y;
    mx = fmaxf(mx, ml.x);
  }
  mx = memra_model::BlockReduceFixed<kCombineThreads>(mx, scratch, MaxF());
  float lsum = 0.0f;
  for (uint32_t i = tid; i < tiles; i += kCombineThreads) {
    const float w = expf(__fsub_rn(wsh[i], mx));
    wsh[i] = w;
    lsum = __fadd_rn(lsum, __fmul_rn(w, lsh[i]));
  }
  // BlockSumFixed's barriers also publish the weights each thread just stored.
  const float L = memra_model::BlockSumFixed<kCombineThreads>(lsum, scratch);
  MEMRA_TRACE_MARK(1);

  float o = 0.0f;
  for (uint32_t t0 = 0; t0 < tiles; t0 += c.stageTiles) {
    const uint32_t nt = tiles - t0 < c.stageTiles ? tiles - t0 : c.stageTiles;
    memra_cu::WaitCopiesToShared();
    __syncthreads();
    if (tid < nr) {
#pragma unroll 8
      for (uint32_t i = 0; i < nt; ++i) o = fmaf(wsh[t0 + i], stage[i * nr + tid], o);
    }
    // The next pass overwrites the stage.
    __syncthreads();
    if (t0 + c.stageTiles < tiles) stageFrom(t0 + c.stageTiles);
  }
  // This block's quarter of o, stored into every block's whole o, then one meeting. Read from
  // the others after a meeting, it took a second meeting so that no block left while another
  // still read it (cu/cluster_started.cuh).
  memra_cu::ClusterWaitStarted();
  if (tid < nr) {
    const float v = __fdiv_rn(o, L);
    memra_cu::StoreToEveryBlock<kCombineBlocks>(osh, r0 + tid, v);
  }
  cg::this_cluster().sync();
  MEMRA_TRACE_MARK(2);

  // u over (group of 8 d, r partial), c.pass d's at a time; the partials go to part.
  const uint32_t stride = nd < c.pass ? nd : c.pass;  // one partial's row in part
  for (uint32_t e0 = 0; e0 < nd; e0 += c.pass) {
    const uint32_t ne = nd - e0 < c.pass ? nd - e0 : c.pass;
    const uint32_t dg = (ne + kUGroup - 1) / kUGroup;
    for (uint32_t i = tid; i < dg * kUParts; i += kCombineThreads) {
      const uint32_t g = i % dg, prt = i / dg, dl = g * kUGroup;
      const uint32_t left = ne - dl;
      float acc[kUGroup] = {};
#pragma unroll 4
      for (uint32_t r = prt; r < R; r += kUParts) {
        uint32_t wv[kUGroup / 2];
        if (c.wuvStaged) {
          const uint4 v = *reinterpret_cast<const uint4*>(wsm + r * c.dq + e0 + dl);
          wv[0] = v.x, wv[1] = v.y, wv[2] = v.z, wv[3] = v.w;
        } else if (kVec && left >= kUGroup) {
          const uint4 v = __ldg(reinterpret_cast<const uint4*>(wn + uint64_t(r) * Dv + e0 + dl));
          wv[0] = v.x, wv[1] = v.y, wv[2] = v.z, wv[3] = v.w;
        } else {
          const uint16_t* w = wn + uint64_t(r) * Dv + e0 + dl;
#pragma unroll
          for (unsigned e = 0; e < kUGroup / 2; ++e) {
            const uint32_t lo = 2 * e < left ? __ldg(w + 2 * e) : 0u;
            const uint32_t hi = 2 * e + 1 < left ? __ldg(w + 2 * e + 1) : 0u;
            wv[e] = lo | (hi << 16);
          }
        }
        Fma8(osh[r], wv, acc);
      }
#pragma unroll
      for (unsigned e = 0; e < kUGroup; ++e) {
        if (e < left) part[prt * stride + dl + e] = acc[e];
      }
    }
    __syncthreads();
    for (uint32_t d = tid; d < ne; d += kCombineThreads) {
      float v = part[d];
#pragma unroll
      for (unsigned k = 1; k < kUParts; ++k) v = __fadd_rn(v, part[k * stride + d]);
      un[e0 + d] = v;
    }
    __syncthreads();
  }
}

// Dynamic shared memory of a tile of C positions for HB heads (PartialTile's layout).
template <unsigned C, unsigned HB>
size_t PartialSmem(uint32_t R) {
  return (size_t(C) * (R + kRowPad) + size_t(HB) * R) * sizeof(float);
}

template <unsigned C, unsigned HPW, unsigned QPL, bool kVec>
cudaError_t LaunchPartial(const MemraMlaArgs& a, const Workspace& ws, cudaStream_t stream) {
  static std::atomic<size_t> granted{0};
  auto kernel = mla_partial<C, HPW, QPL, kVec>;
  constexpr unsigned HB = HPW * kPartialWarps;
  const size_t smem = PartialSmem<C, HB>(a.R);
  const cudaError_t err = AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  const dim3 grid(ws.tiles, a.t, (a.nh + HB - 1) / HB);
  return LaunchModelKernel(kernel, grid, dim3(kPartialThreads), smem, 1, stream, a, ws);
}

// mla_tiles: one block an SM (its shared memory is sized for 32 heads), the SMs split over the
// rows, rounded down so that no block waits for a second wave.
// kMma: rows from mla_mma::kFrom positions on take the item on the tensor cores (R = 512 only).
template <bool kVec, bool kMma = false>
cudaError_t LaunchTiles(const MemraMlaArgs& a, const Workspace& ws, cudaStream_t stream) {
  static std::atomic<size_t> granted{0};
  auto kernel = mla_tiles<kVec, kMma>;
  if (kMma && a.R != mla_mma::kR) return cudaErrorInvalidValue;
  static_assert(mla_mma::kSmemFloats >= TilesSmemFloats(mla_mma::kR, 32), "the kMma form holds either item");
  const size_t smem = (kMma ? mla_mma::kSmemFloats : TilesSmemFloats(a.R, 32)) * sizeof(float);
  cudaError_t err = AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  unsigned sms;
  err = memra_cu::CurrentSms(&sms);
  if (err != cudaSuccess) return err;
  const dim3 grid(sms > a.t ? sms / a.t : 1, a.t);
  return LaunchModelKernel(kernel, grid, dim3(kPartialThreads), smem, 1, stream, a, ws);
}

template <bool kVec>
cudaError_t LaunchCombine(const MemraMlaArgs& a, const Workspace& ws, cudaStream_t stream) {
  static std::atomic<size_t> granted{0};
  auto kernel = mla_combine<kVec>;
  const CombineShape c = MakeCombineShape(a, ws, kVec);
  const size_t smem = CombineSmemFloats(a, ws, c) * sizeof(float);
  const cudaError_t err = AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  // Always dependent on the tile kernel: it waits for it before reading the workspace.
  const int was = memra_model_set_pdl(1);
  const cudaError_t launched = LaunchModelKernel(kernel, dim3(a.nh * kCombineBlocks, a.t), dim3(kCombineThreads),
                                                 smem, kCombineBlocks, stream, a, ws, c);
  memra_model_set_pdl(was);
  return launched;
}

}  // namespace

extern "C" uint32_t memra_mla_position_tile(uint32_t R) { return PositionTile(R); }

extern "C" uint32_t memra_mla_short_positions(uint32_t R) { return memra_mla::ShortPositions(R); }

extern "C" uint64_t memra_mla_workspace_bytes(uint32_t t, uint32_t nh, uint32_t P, uint32_t R) {
  const uint64_t tiles = (uint64_t(P) + PositionTile(R) - 1) / PositionTile(R);
  return uint64_t(t) * tiles * nh * (uint64_t(R) + 2) * sizeof(float);
}

extern "C" cudaError_t memra_cache_write(float* cache, const float* c, const int32_t* pos,
                                         uint32_t t, uint32_t layer, uint32_t L, uint32_t P,
                                         uint32_t R, cudaStream_t stream) {
  if (t == 0 || R == 0) return cudaSuccess;
  if (t > MEMRA_MODEL_MAX_ROWS || layer >= L) return cudaErrorInvalidValue;
  unsigned bx = (R + kCacheWriteThreads - 1) / kCacheWriteThreads;
  if (bx > 1024) bx = 1024;
  return LaunchModelKernel(cache_write, dim3(bx, t), dim3(kCacheWriteThreads), 0, 1, stream, cache,
                           c, pos, layer, L, P, R);
}

// R % 16: a position's score is four lanes' sums of R / 16 float4s each (TileHeads, and the
// short form's scores), so a remainder would go unsummed.
extern "C" cudaError_t memra_mla_attention(const MemraMlaArgs* args, cudaStream_t stream) {
  if (args == nullptr) return cudaErrorInvalidValue;
  const MemraMlaArgs& a = *args;
  if (a.t == 0 || a.nh == 0 || a.Dv == 0) return cudaSuccess;
  if (a.t > MEMRA_MODEL_MAX_ROWS || a.P == 0 || a.P > MEMRA_MODEL_MAX_POSITIONS || a.R == 0 ||
      a.R > MEMRA_MODEL_MAX_LATENT || a.R % 16 != 0 || a.nh > uint32_t(INT32_MAX) / kCombineBlocks ||
      a.slotStride < uint64_t(a.P) * a.R || !memra_cu::Aligned(a.work, 16)) {
    return cudaErrorInvalidValue;
  }
  const Workspace ws = MakeWorkspace(a.work, a.t, a.nh, a.P, a.R);
  // float4 loads only where every row keeps the alignment; shared memory is always aligned.
  const bool vecIn = memra_cu::Aligned(a.cache, 16) && a.slotStride % 4 == 0 &&
                     memra_cu::Aligned(a.q, 16) && a.ldq % 4 == 0;
  const bool vecW = memra_cu::Aligned(a.wuv, 16) && a.Dv % kUGroup == 0;
  // A call the short form covers takes it: one kernel, the same bits (cu/model_attention_short.cu).
  if (a.P <= memra_mla::ShortPositions(a.R) && vecIn && vecW) return memra_mla::LaunchShort(a, stream);
  cudaError_t err;
#if MEMRA_MLA_MMA_FROM
  if (a.R == mla_mma::kR && a.P >= mla_mma::kFrom) {
    // A call whose rows may reach the tensor cores' item: each row takes its form by its own position.
    err = vecIn ? LaunchTiles<true, true>(a, ws, stream) : LaunchTiles<false, true>(a, ws, stream);
  } else
#endif
  if (a.R <= 512) {
    err = vecIn ? LaunchTiles<true>(a, ws, stream) : LaunchTiles<false>(a, ws, stream);
  } else {
    err = vecIn ? LaunchPartial<8, 1, 16, true>(a, ws, stream) : LaunchPartial<8, 1, 16, false>(a, ws, stream);
  }
  if (err != cudaSuccess) return err;
  return vecW ? LaunchCombine<true>(a, ws, stream) : LaunchCombine<false>(a, ws, stream);
}
