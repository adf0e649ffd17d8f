// Absorbed MLA attention in one kernel, for a call whose positions all fit in a few tiles
// (a.P <= ShortPositions(R), cu/mla_parts.cuh). At a short context the tiled form's two kernels
// are mostly fixed cost (a tile kernel on a handful of SMs, then a combine and the Wuv product on
// 32 blocks), so here one block takes a head's 64 (or 128) columns of u for one row: it computes
// the head's scores, each tile's max, exp-sum and o, their combine and its share of u itself,
// re-reading the few cache rows from L2 where the tiled form shares them through shared memory.
//
// A block of 64 columns holds its Wuv rows in registers from before its wait (64 of its 127), so
// an SM holds two. Past two blocks an SM (`bench`, 32 heads, at t = 5 to 8) the grid ran in two
// waves, each block of the second starting its chain of round trips only as one of the first
// left (scripts/probes/step-timeline-probe.cu at t = 8: 512 blocks released over 10.5 us, a
// span of 18.4 us against 8.4 at t = 1). There a block takes 128 columns, a row's whole head
// where Dv is 128, so the grid is half as many blocks, one wave, and no head's scores are made
// twice. Its first 64 columns' Wuv rows are in registers from before the wait, as above; the
// second 64's come into L2 while it waits and into those registers once the first's are used.
// Both into registers after o, at t = 8: a span of 13.2 us, 5.4 of it from o to u (every row's
// block reading its head's 128 KB of Wuv from L2).
// Each step is the tiled form's, in its order (cu/model_attention.cu's header), so a row's u is
// bit-identical whichever form a call takes: the test holds the two to that.
#include <math.h>
#include <stdint.h>

#include "cu/launch.cuh"
#include "cu/mla_parts.cuh"
#include "cu/model.h"
#include "cu/pdl.cuh"
#include "cu/weight_loads.cuh"

namespace memra_mla {
namespace {

using memra_cu::LoadFresh;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;
constexpr unsigned kMaxR = 512;
constexpr unsigned kTiles = ShortPositions(kMaxR) / PositionTile(kMaxR);
// u's columns a thread group takes: kUParts partials x 8 groups of kUGroup, one (partial, group)
// a thread; a block of 128 columns takes two such spans.
constexpr unsigned kDSpan = kThreads / kUParts * kUGroup;
// A thread's Wuv rows (r = partial + 32k) for one span: all of them at R <= 512.
constexpr unsigned kRowsAThread = kMaxR / kUParts;
constexpr unsigned kFull = 0xffffffffu;

// acc += e_jj * row jj of a tile's cache rows (c4: the first row's quad, rows quads apart) over
// jj < nv, in increasing jj. The N rows' loads are issued at once, those past nv predicated off,
// so that none waits on a branch (unrolled by 8, a full tile's were four round trips to L2 in
// series) and none asks L2 for a row it does not use (re-reading the last row instead made a
// 17-row tile ask for 32 rows); N is the smallest of 8, 16, 32 that holds nv.
template <unsigned N>
__device__ __forceinline__ void TileO(float4& acc, const float4* c4, uint32_t quads, uint32_t nv,
                                      const float* e) {
  float4 c[N];
#pragma unroll
  for (uint32_t jj = 0; jj < N; ++jj) c[jj] = memra_cu::LoadFreshIf(jj < nv, c4 + uint64_t(jj) * quads);
#pragma unroll
  for (uint32_t jj = 0; jj < N; ++jj) {
    if (jj < nv) Axpy4(e[jj], c[jj], acc);
  }
}

// acc += o_r * Wuv[r][the thread's 8 columns] for r = prt + 32k, k < kRowsAThread, in increasing r.
__device__ __forceinline__ void UPartial(const uint4 (&w)[kRowsAThread], const float* osh, uint32_t prt,
                                        uint32_t R, float (&acc)[kUGroup]) {
#pragma unroll
  for (unsigned k = 0; k < kRowsAThread; ++k) {
    const uint32_t r = prt + k * kUParts;
    if (r < R) {
      const uint32_t wv[kUGroup / 2] = {w[k].x, w[k].y, w[k].z, w[k].w};
      Fma8(osh[r], wv, acc);
    }
  }
}

// A thread's Wuv rows of one span (zeros where it has no columns or r >= R).
__device__ __forceinline__ void LoadUSpan(uint4 (&w)[kRowsAThread], const uint16_t* wn, bool live, uint32_t prt,
                                          uint32_t R, uint32_t Dv, uint64_t policy) {
#pragma unroll
  for (unsigned k = 0; k < kRowsAThread; ++k) {
    const uint32_t r = prt + k * kUParts;
    w[k] = live && r < R ? memra_cu::LoadWeights(reinterpret_cast<const uint4*>(wn + uint64_t(r) * Dv), policy)
                         : make_uint4(0, 0, 0, 0);
  }
}

// grid (nh, ceil(Dv / kCols), t): head blockIdx.x's columns [kCols y, kCols y + kCols) of row z's
// u, kCols 64 or 128 (two spans of 64, the second's Wuv rows loaded after o).
template <unsigned kCols>
__global__ void __launch_bounds__(kThreads) mla_short(MemraMlaArgs a) {
  static_assert(kCols == kDSpan || kCols == 2 * kDSpan, "one or two spans a block");
  MEMRA_TRACE_KERNEL(kTraceMlaShort);
  __shared__ float4 sq4[kMaxR / 4];         // the head's query
  __shared__ float sS[kTiles * 32];         // scores, then exp(s - the tile's max)
  __shared__ float sM[kTiles], sL[kTiles], sW[kTiles], sLsum;
  __shared__ float4 so4[kTiles][kMaxR / 4]; // each tile's unnormalized o
  __shared__ float osh[kMaxR];              // o, normalized
  __shared__ float part[kUParts][kCols];    // u's partials
  const uint32_t R = a.R, Dv = a.Dv, n = blockIdx.x, d0 = blockIdx.y * kCols, s = blockIdx.z;
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const unsigned grp = tid % (kDSpan / kUGroup), prt = tid / (kDSpan / kUGroup);
  const uint32_t dl = grp * kUGroup, nd = Dv - d0 < kCols ? Dv - d0 : kCols;
  // Dv % 8 == 0: a group is whole or absent.
  const auto live = [&](unsigned span) { return span * kDSpan + dl < nd; };

  // Weights before the wait (pdl.cuh): this thread's Wuv rows of the first span, 16 bytes each,
  // and the second span's rows into L2. With two spans every row's block reads its head's rows,
  // so they keep L2's normal priority.
  const uint16_t* wn = a.wuv + uint64_t(n) * R * Dv + d0 + dl;
  uint4 w[kRowsAThread];
  constexpr bool kOneSpan = kCols == kDSpan;
  LoadUSpan(w, wn, live(0), prt, R, Dv, kOneSpan ? memra_cu::EvictFirstPolicy() : memra_cu::EvictNormalPolicy());
  if constexpr (!kOneSpan) {
    const uint16_t* rows = a.wuv + uint64_t(n) * R * Dv + d0 + kDSpan;
    if (nd > kDSpan) {
      for (uint32_t r = tid; r < R; r += kThreads) memra_cu::PrefetchL2Bulk(rows + uint64_t(r) * Dv, (nd - kDSpan) * 2);
    }
  }

  PrefetchRows(a, s, blockIdx.x * gridDim.y + blockIdx.y, gridDim.x * gridDim.y);
  PdlLaunchDependents();
  PdlWait();
  float* un = a.u + uint64_t(s) * a.ldu + uint64_t(n) * Dv + d0;
  // The query's quad (R <= 4 kThreads: one a thread) and the position in one round trip: the
  // query's address does not depend on the position.
  const uint32_t quads = R / 4;
  const float4* q4 = reinterpret_cast<const float4*>(a.q + uint64_t(s) * a.ldq + uint64_t(n) * R);
  const float4 qv = tid < quads ? LoadFresh(q4 + tid) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int32_t p = LoadFresh(a.pos + s);
  if (p < 0 || uint32_t(p) >= a.P) {
    // Outside what this call covers: poison, as the tiled form does (the host checks first).
    for (uint32_t d = tid; d < nd; d += kThreads) un[d] = __int_as_float(0x7fc00000);
    return;
  }
  const uint32_t np = uint32_t(p) + 1, tiles = (np + 31) / 32;
  const float* kv = a.cache + uint64_t(s) * a.slotStride;
  if (tid < quads) sq4[tid] = qv;
  __syncthreads();
  MEMRA_TRACE_MARK(0);

  // Scores as the tiled form makes them (TileHeads): lane (j, g) chains r group g (float4 g + 4m,
  // increasing m), then the four groups by a xor butterfly; s_j = that / sqrt(R), a true
  // division. A lane's R / 16 cache loads (R % 16 == 0, checked by memra_mla_attention) are all
  // issued before the chain (unrolled to kMaxR's count, the ones past R re-reading the last, so
  // that none waits on a branch): unrolled by 8 they were four round trips to L2 in series.
  const float sqrtR = __fsqrt_rn(static_cast<float>(R));
  for (uint32_t j0 = warp * 8; j0 < np; j0 += kWarps * 8) {
    const uint32_t j = j0 + lane / 4, g = lane % 4;
    float acc = 0.0f;
    if (j < np) {
      const float4* c4 = reinterpret_cast<const float4*>(kv + uint64_t(j) * R);
      float4 c[kMaxR / 16];
#pragma unroll
      for (uint32_t m = 0; m < kMaxR / 16; ++m) c[m] = LoadFresh(c4 + g + 4 * (m < R / 16 ? m : R / 16 - 1));
#pragma unroll
      for (uint32_t m = 0; m < kMaxR / 16; ++m) {
        if (m < R / 16) acc = Dot4(sq4[g + 4 * m], c[m], acc);
      }
    }
    acc = __fadd_rn(acc, __shfl_xor_sync(kFull, acc, 1));
    acc = __fadd_rn(acc, __shfl_xor_sync(kFull, acc, 2));
    if (g == 0 && j < np) sS[j] = __fdiv_rn(acc, sqrtR);
  }
  __syncthreads();
  MEMRA_TRACE_MARK(1);

  // Warp i takes tile i as TileHeads does: its max, the exps and their butterfly sum l.
  if (warp < tiles) {
    const uint32_t j = warp * 32 + lane;
    const float sj = j < np ? sS[j] : -INFINITY;
    const float mx = WarpMax(sj);
    const float e = j < np ? expf(__fsub_rn(sj, mx)) : 0.0f;
    const float l = WarpSum(e);
    if (j < np) sS[j] = e;
    if (lane == 0) sM[warp] = mx, sL[warp] = l;
  }
  __syncthreads();
  MEMRA_TRACE_MARK(2);

  // Each tile's o over its positions in increasing j, and, in warp 0, mla_combine's weights
  // exp(m_i - M) and L: with at most 32 tiles its block sum is warp 0's butterfly.
  for (uint32_t it = tid; it < tiles * quads; it += kThreads) {
    const uint32_t i = it / quads, qd = it - i * quads, j0 = i * 32;
    const uint32_t nv = np - j0 < 32 ? np - j0 : 32;
    const float4* c4 = reinterpret_cast<const float4*>(kv + uint64_t(j0) * R) + qd;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (nv > 16) {
      TileO<32>(acc, c4, quads, nv, sS + j0);
    } else if (nv > 8) {
      TileO<16>(acc, c4, quads, nv, sS + j0);
    } else {
      TileO<8>(acc, c4, quads, nv, sS + j0);
    }
    so4[i][qd] = acc;
  }
  if (warp == 0) {
    const float mx = WarpMax(lane < tiles ? sM[lane] : -INFINITY);
    const float wt = lane < tiles ? expf(__fsub_rn(sM[lane], mx)) : 0.0f;
    const float lsum = WarpSum(lane < tiles ? __fmul_rn(wt, sL[lane]) : 0.0f);
    if (lane < tiles) sW[lane] = wt;
    if (lane == 0) sLsum = lsum;
  }
  __syncthreads();
  MEMRA_TRACE_MARK(3);
  const float* so = reinterpret_cast<const float*>(so4);
  for (uint32_t r = tid; r < R; r += kThreads) {
    float o = 0.0f;
    for (uint32_t i = 0; i < tiles; ++i) o = fmaf(sW[i], so[i * kMaxR + r], o);
    osh[r] = __fdiv_rn(o, sLsum);
  }
  __syncthreads();
  MEMRA_TRACE_MARK(4);

  // u: partial prt over r = prt (mod 32) in increasing r, then the partials in order.
#pragma unroll
  for (unsigned span = 0; span < kCols / kDSpan; ++span) {
    if (span > 0) LoadUSpan(w, wn + span * kDSpan, live(span), prt, R, Dv, memra_cu::EvictNormalPolicy());
    if (live(span)) {
      float acc[kUGroup] = {};
      UPartial(w, osh, prt, R, acc);
#pragma unroll
      for (unsigned e = 0; e < kUGroup; ++e) part[prt][span * kDSpan + dl + e] = acc[e];
    }
  }
  __syncthreads();
  MEMRA_TRACE_MARK(5);
  for (uint32_t d = tid; d < nd; d += kThreads) {
    float v = part[0][d];
#pragma unroll
    for (unsigned k = 1; k < kUParts; ++k) v = __fadd_rn(v, part[k][d]);
    un[d] = v;
  }
}

static_assert(kTiles <= kWarps && kTiles <= 32, "a warp a tile; the tiles' weights in one warp");
static_assert(kMaxR / 4 <= kThreads, "the query's quads, one a thread");

}  // namespace

// 64 columns a block while its grid fits the SMs in one wave, 128 past that.
cudaError_t LaunchShort(const MemraMlaArgs& a, cudaStream_t stream) {
  unsigned sms;
  int resident = 0;
  cudaError_t err = memra_cu::CurrentSms(&sms);
  if (err == cudaSuccess) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, mla_short<kDSpan>, kThreads, 0);
  }
  if (err != cudaSuccess) return err;
  const uint64_t early = uint64_t(a.nh) * ((a.Dv + kDSpan - 1) / kDSpan) * a.t;
  if (early <= uint64_t(resident) * sms) {
    const dim3 grid(a.nh, (a.Dv + kDSpan - 1) / kDSpan, a.t);
    return memra_cu::LaunchModelKernel(mla_short<kDSpan>, grid, dim3(kThreads), 0, 1, stream, a);
  }
  const dim3 grid(a.nh, (a.Dv + 2 * kDSpan - 1) / (2 * kDSpan), a.t);
  return memra_cu::LaunchModelKernel(mla_short<2 * kDSpan>, grid, dim3(kThreads), 0, 1, stream, a);
}

}  // namespace memra_mla
