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
// The cache rows below the position, written by earlier steps, are copied into shared memory
// while the block waits (as the tiled form stages its first item's), and the newest row, the
// step's own, comes in the query's round trip after the wait: the scores and o then read shared
// memory, where each had been a round trip to L2 of its own, and those round trips queued behind
// the next product's early weight loads (scripts/probes/step-timeline-probe.cu at t = 1,
// position 16, on an H100: the scores done 3.1 us after the release, o 2.3 us after them). A
// launch holds up to 64 rows an SM (HeldRows); a row past them, or whose position moved after the
// early read, reads L2 as before.
// Each step is the tiled form's, in its order (cu/model_attention.cu's header), so a row's u is
// bit-identical whichever form a call takes, and whichever memory its rows came from: the test
// holds the two to that.
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "cu/cp_async.cuh"
#include "cu/launch.cuh"
#include "cu/mla_parts.cuh"
#include "cu/model.h"
#include "cu/pdl.cuh"
#include "cu/smem_limit.cuh"
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
// The most rows an SM's blocks hold together (a block alone on its SM all of them, two blocks
// half each). Past them a row's rows come from L2 as before. More is slower, not faster: a launch
// reserves its rows' shared memory whatever the position, and the SM's carveout grows with it;
// 100 rows a block at t = 1 gained nothing at position 48 where 64 took 0.6% off the step, and 41
// rows each of two blocks at t = 8 nothing where 32 took 0.3% (the chain probe on an H100,
// docs/performance.md). A probe build may name another count (-DMEMRA_SHORT_HELD_MAX=N).
#ifndef MEMRA_SHORT_HELD_MAX
#define MEMRA_SHORT_HELD_MAX 64
#endif
constexpr int64_t kMaxHeldRows = MEMRA_SHORT_HELD_MAX;

// Floats past R that pad a staged row: the scores' quarter-warps read two rows' same quads at
// once, which 16 floats put on different banks.
constexpr uint32_t kHeldPad = 16;

__host__ __device__ constexpr uint32_t HeldRowQuads(uint32_t R) { return (R + kHeldPad) / 4; }

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
// u, kCols 64 or 128 (two spans of 64, the second's Wuv rows loaded after o). Dynamic shared
// memory: `cap` rows of HeldRowQuads(R) float4s, row j of the slot at quad j * HeldRowQuads(R).
template <unsigned kCols>
__global__ void __launch_bounds__(kThreads) mla_short(MemraMlaArgs a, uint32_t cap) {
  static_assert(kCols == kDSpan || kCols == 2 * kDSpan, "one or two spans a block");
  MEMRA_TRACE_KERNEL(kTraceMlaShort);
  __shared__ float4 sq4[kMaxR / 4];         // the head's query
  __shared__ float sS[kTiles * 32];         // scores, then exp(s - the tile's max)
  __shared__ float sM[kTiles], sL[kTiles], sW[kTiles], sLsum;
  __shared__ float4 so4[kTiles][kMaxR / 4]; // each tile's unnormalized o
  __shared__ float osh[kMaxR];              // o, normalized
  __shared__ float part[kUParts][kCols];    // u's partials
  __shared__ int32_t early;                 // the position, read before the wait
  extern __shared__ float4 held4[];         // the slot's rows 0 .. p
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

  // Rows 0 .. pe - 1 into shared memory before the wait, where row pe fits beside them (pdl.cuh:
  // rows an earlier step wrote; the position is read again after the wait). One read for the
  // block, so that every thread takes the same branches.
  const uint32_t quads = R / 4, hq = HeldRowQuads(R);
  const float* kv = a.cache + uint64_t(s) * a.slotStride;
  if (tid == 0) early = cap != 0 ? __ldcg(a.pos + s) : -1;
  __syncthreads();
  const int32_t pe = early;
  const bool staging = pe >= 0 && uint32_t(pe) < a.P && uint32_t(pe) < cap;
  if (staging) {
    Stage<true>(reinterpret_cast<float*>(held4), 4 * hq, kv, uint32_t(pe), R);
  } else {
    PrefetchRows(a, s, blockIdx.x * gridDim.y + blockIdx.y, gridDim.x * gridDim.y);
  }
  PdlLaunchDependents();
  PdlWait();
  float* un = a.u + uint64_t(s) * a.ldu + uint64_t(n) * Dv + d0;
  // The query's quad (R <= 4 kThreads: one a thread), the position and row pe's quad in one round
  // trip: neither address depends on the position read now.
  const float4* q4 = reinterpret_cast<const float4*>(a.q + uint64_t(s) * a.ldq + uint64_t(n) * R);
  const float4* kv4 = reinterpret_cast<const float4*>(kv);
  const float4 qv = tid < quads ? LoadFresh(q4 + tid) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int32_t p = LoadFresh(a.pos + s);
  const float4 newest = memra_cu::LoadFreshIf(staging && tid < quads, kv4 + uint64_t(staging ? pe : 0) * quads + tid);
  if (p < 0 || uint32_t(p) >= a.P) {
    // Outside what this call covers: poison, as the tiled form does (the host checks first). No
    // copy is left in flight into the shared memory the block gives back.
    memra_cu::WaitCopiesToShared();
    for (uint32_t d = tid; d < nd; d += kThreads) un[d] = __int_as_float(0x7fc00000);
    return;
  }
  const uint32_t np = uint32_t(p) + 1, tiles = (np + 31) / 32;
  // Every row 0 .. p in shared memory; otherwise (a row past cap, or the position moved since the
  // early read) every row comes from L2.
  const bool held = staging && p == pe;
  if (tid < quads) {
    sq4[tid] = qv;
    if (held) held4[uint32_t(p) * hq + tid] = newest;
  }
  memra_cu::WaitCopiesToShared();
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
    if (j < np && held) {
      const float4* c4 = held4 + j * hq;
#pragma unroll 8
      for (uint32_t m = 0; m < R / 16; ++m) acc = Dot4(sq4[g + 4 * m], c4[g + 4 * m], acc);
    } else if (j < np) {
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
    if (held) {
      const float4* h4 = held4 + j0 * hq + qd;
#pragma unroll 4
      for (uint32_t jj = 0; jj < nv; ++jj) Axpy4(sS[j0 + jj], h4[jj * hq], acc);
    } else if (nv > 16) {
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

// The rows a block of kernel k holds (its `cap`) at `perSm` blocks an SM: what the SM's shared
// memory leaves each beside its static arrays, at most its share of kMaxHeldRows and P (a row at
// P or past it is poisoned).
template <class Kernel>
cudaError_t HeldRows(Kernel k, const MemraMlaArgs& a, unsigned perSm, std::atomic<int>& staticBytes,
                     uint32_t* cap) {
  int dev = 0, perSmBytes = 0, perBlock = 0, reserved = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&perSmBytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&perBlock, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev);
  if (err == cudaSuccess && staticBytes.load(std::memory_order_relaxed) < 0) {
    cudaFuncAttributes fa{};
    err = cudaFuncGetAttributes(&fa, k);
    if (err == cudaSuccess) staticBytes.store(int(fa.sharedSizeBytes), std::memory_order_relaxed);
  }
  if (err != cudaSuccess) return err;
  const int64_t own = int64_t(staticBytes.load(std::memory_order_relaxed)) + reserved;
  perSm = perSm > 0 ? perSm : 1;
  int64_t room = int64_t(perSmBytes) / int64_t(perSm) - own;
  if (room > int64_t(perBlock) - own + reserved) room = int64_t(perBlock) - own + reserved;
  int64_t rows = room > 0 ? room / (int64_t(HeldRowQuads(a.R)) * 16) : 0;
  if (rows > kMaxHeldRows / perSm) rows = kMaxHeldRows / perSm;
  *cap = uint32_t(rows < int64_t(a.P) ? rows : a.P);
  return cudaSuccess;
}

template <unsigned kCols>
cudaError_t LaunchHeld(const MemraMlaArgs& a, dim3 grid, unsigned sms, cudaStream_t stream) {
  static std::atomic<size_t> granted{0};
  static std::atomic<int> staticBytes{-1};
  const auto kernel = mla_short<kCols>;
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  uint32_t cap = 0;
  cudaError_t err = HeldRows(kernel, a, unsigned((blocks + sms - 1) / sms), staticBytes, &cap);
  const size_t smem = size_t(cap) * HeldRowQuads(a.R) * 16;
  if (err == cudaSuccess) err = memra_cu::AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  return memra_cu::LaunchModelKernel(kernel, grid, dim3(kThreads), smem, 1, stream, a, cap);
}

}  // namespace

// 64 columns a block while its grid fits the SMs in one wave (by registers), 128 past that.
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
    return LaunchHeld<kDSpan>(a, dim3(a.nh, (a.Dv + kDSpan - 1) / kDSpan, a.t), sms, stream);
  }
  return LaunchHeld<2 * kDSpan>(a, dim3(a.nh, (a.Dv + 2 * kDSpan - 1) / (2 * kDSpan), a.t), sms, stream);
}

}  // namespace memra_mla
