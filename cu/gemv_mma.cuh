// A column-tile product on the tensor cores, for the chain probe's A/B against memra_gemv
// (compiled into memra_gemv only with -DMEMRA_GEMV_MMA; scripts/probes/mma-gemv-probe.cu has the
// forms it was picked from and why).
//
// The product stays f32 x times bf16 W accumulated in f32: each f32 of x is split into three bf16
// (hi + mid + lo is the f32 exactly), and all three are multiplied against the same weight
// fragment by mma.sync m16n8k16 (A: 16 columns of W by 16 k, read from shared memory with
// ldmatrix.trans; B: 16 k of x by the t <= 8 rows). bf16 products are exact in f32, so only the
// accumulation rounds, in the tensor cores' own way. That is not memra_gemv's order: a build with
// this path changes the model's bits, though every row's sum still depends on K and S alone.
//
// Sums: the 16 warps of a block take k16 steps round robin, each its steps in increasing k
// (hi, mid, lo each); the warps' totals in warp order; the S blocks of a cluster (the K split) in
// rank order. Each warp streams its own steps through a ring of kMmaDepth slots in shared memory,
// a slot holding 16 rows of the tile's 64 columns and the same 16 k of x.
#pragma once

#include <cooperative_groups.h>
#include <stdint.h>

#include "cu/cp_async.cuh"
#include "cu/launch.cuh"
#include "cu/pdl.cuh"
#include "cu/prefetch_l2.cuh"
#include "cu/trace.cuh"

namespace memra_mma {

namespace cg = cooperative_groups;
using memra_cu::CommitCopyGroup;
using memra_cu::CopyToShared16;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;
using memra_cu::WaitCopiesToShared;
using memra_cu::WaitCopyGroups;

// Warps a block and slots a warp's ring: the chain probe's A/B sets them (-DMEMRA_MMA_WARPS=8,
// -DMEMRA_MMA_DEPTH=2) to trade a block's shared memory against its bytes in flight.
#ifndef MEMRA_MMA_WARPS
#define MEMRA_MMA_WARPS 16
#endif
#ifndef MEMRA_MMA_DEPTH
#define MEMRA_MMA_DEPTH 4
#endif
// Slots a warp fills before the kernel ahead has finished (0 to the depth): their weights stream
// while it runs. Steps past those whose weights a warp asks into L2 then (0: none): the kernel
// ahead, latency-bound, leaves HBM idle, and from L2 this one would be bound by its own ramp.
#ifndef MEMRA_MMA_EARLY
#define MEMRA_MMA_EARLY MEMRA_MMA_DEPTH
#endif
#ifndef MEMRA_MMA_L2AHEAD
#define MEMRA_MMA_L2AHEAD 0
#endif
constexpr int kMmaWarps = MEMRA_MMA_WARPS;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaTiles = 4;             // m16 tiles a block: 64 columns, 128 bytes of a row
constexpr int kMmaCols = 16 * kMmaTiles;
constexpr int kMmaDepth = MEMRA_MMA_DEPTH;
constexpr int kMmaEarly = MEMRA_MMA_EARLY;
constexpr int kMmaL2Ahead = MEMRA_MMA_L2AHEAD;
static_assert(kMmaEarly >= 0 && kMmaEarly <= kMmaDepth, "the early slots are some of the ring's");
constexpr int kMmaRowBytes = kMmaCols * 2 + 16;  // +16: ldmatrix's 8 rows in 8 bank groups
constexpr int kMmaWBytes = 16 * kMmaRowBytes;
constexpr int kMmaXRow = 24;                     // floats a row of x takes in a slot (bank spread)

template <int T>
__host__ __device__ constexpr int SlotBytes() {
  return kMmaWBytes + T * kMmaXRow * 4;
}

// A slot's x, after its weight rows.
__device__ __forceinline__ float* XOf(unsigned char* slot) { return reinterpret_cast<float*>(slot + kMmaWBytes); }

template <int T>
__host__ __device__ constexpr size_t MmaSmem() {
  return size_t(kMmaWarps) * kMmaDepth * SlotBytes<T>();
}
static_assert(size_t(kMmaWarps) * kMmaDepth * kMmaWBytes >= (kMmaWarps + 1) * kMmaTiles * 4 * 32 * 4,
              "the ring holds the reduction");

__device__ __forceinline__ uint32_t Smem32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint32_t PackBf16(float a, float b) {
  uint32_t r;  // a in the low half: the lower k
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}

// v (two adjacent k) as three bf16 pairs whose sums are v exactly.
__device__ __forceinline__ void Split3(float2 v, uint32_t (&p)[3]) {
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    p[i] = PackBf16(v.x, v.y);
    v.x -= __uint_as_float(p[i] << 16);
    v.y -= __uint_as_float(p[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x's 16 k from k of each of the T rows to dst (rows kMmaXRow floats apart), four lanes a row.
template <int T>
__device__ __forceinline__ void CopyX(float* dst, const float* x, uint64_t ldx, uint32_t k, int lane) {
  if (lane < 4 * T) {
    const int s = lane / 4, q = lane % 4;
    CopyToShared16(dst + s * kMmaXRow + 4 * q, x + s * ldx + k + 4 * q);
  }
}

// 16 rows of W from row k, MT m16 tiles (32 MT bytes) from column col0, to dst (rows rowBytes
// apart): 2 MT copies of 16 bytes a row, MT a lane, adjacent lanes on adjacent bytes of a row.
template <int MT>
__device__ __forceinline__ void CopyW(unsigned char* dst, int rowBytes, const uint16_t* W, uint64_t ldw, uint32_t k,
                                      uint32_t col0, int lane) {
#pragma unroll
  for (int p = 0; p < MT; ++p) {
    const int piece = lane + 32 * p, row = piece / (2 * MT), in = piece % (2 * MT);
    CopyToShared16(dst + row * rowBytes + in * 16, W + (uint64_t(k) + row) * ldw + col0 + in * 8);
  }
}

// One slot's copies, one group: the tile's 16 rows from k and x's same 16 k.
template <int T>
__device__ __forceinline__ void IssueSlot(unsigned char* slot, const uint16_t* W, uint64_t ldw, uint32_t k,
                                          uint32_t col0, const float* x, uint64_t ldx, int lane) {
  CopyW<kMmaTiles>(slot, kMmaRowBytes, W, ldw, k, col0, lane);
  CopyX<T>(XOf(slot), x, ldx, k, lane);
  CommitCopyGroup();
}

// One k16 step of a lane: its two pairs of x (row xr, zeros for a lane past the rows) split in
// three, and MT m16 tiles of the 16 weight rows at w (rowBytes apart) read with ldmatrix.trans,
// each multiplied by the first kParts thirds (3; fewer only as a probe's diagnostic).
template <int MT, int kParts = 3>
__device__ __forceinline__ void MmaStep(float (&acc)[MT][4], const unsigned char* w, int rowBytes, const float* xr,
                                        bool hasRow, int lane) {
  const int c = lane % 4, q = lane / 8;
  uint32_t b0[3] = {0, 0, 0}, b1[3] = {0, 0, 0};
  if (hasRow) {
    Split3(*reinterpret_cast<const float2*>(xr + 2 * c), b0);
    Split3(*reinterpret_cast<const float2*>(xr + 8 + 2 * c), b1);
  }
  const unsigned char* at = w + ((q >> 1) * 8 + (lane & 7)) * rowBytes + (q & 1) * 16;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    uint32_t a[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(Smem32(at + mt * 32)));
#pragma unroll
    for (int p = 0; p < kParts; ++p) Mma(acc[mt], a, b0[p], b1[p]);
  }
}

// The column of accumulator e of m16 tile mt in lane ln, where an MMA's row m is column 16 mt + m
// of the tile starting at col0 (e >= 2: rows 8-15).
__device__ __forceinline__ uint32_t TileCol(uint32_t col0, int mt, int e, int ln) {
  return col0 + mt * 16 + ln / 4 + (e >= 2 ? 8 : 0);
}

// A block's MT m16 x n8 accumulators a lane (NW warps) summed in warp order through red (NW x V
// floats, then V more for the cluster), then the cluster's ranks in rank order by rank 0, which
// stores (or adds to) out[row * ldo + col] for rows below T: row 2 (ln % 4) + (e & 1), col
// colOf(mt, e, ln). Every thread of the block calls it, after the last read of the smem it reuses.
template <int T, int MT, int NW, bool kAccumulate, class ColOf>
__device__ __forceinline__ void ReduceStore(const float (&acc)[MT][4], float* red, const cg::cluster_group& cl,
                                            float* out, uint64_t ldo, uint32_t cols, ColOf colOf) {
  constexpr int V = MT * 4 * 32, kThreads = NW * 32, kPer = (V + kThreads - 1) / kThreads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* part = red + NW * V;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp * V + (mt * 4 + e) * 32 + lane] = acc[mt][e];
  }
  __syncthreads();
  float sum[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int idx = threadIdx.x + j * kThreads;
    if (idx >= V) continue;
    sum[j] = red[idx];
    for (int w = 1; w < NW; ++w) sum[j] += red[w * V + idx];
    part[idx] = sum[j];
  }
  const unsigned S = cl.num_blocks();
  if (S > 1) cl.sync();
  if (cl.block_rank() == 0) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int idx = threadIdx.x + j * kThreads;
      if (idx >= V) continue;
      for (unsigned r = 1; r < S; ++r) sum[j] += cl.map_shared_rank(part, r)[idx];
      const int mt = idx / 128, e = (idx / 32) % 4, ln = idx % 32;
      const uint32_t col = colOf(mt, e, ln);
      const int row = 2 * (ln % 4) + (e & 1);
      if (row < T && col < cols) {
        float* o = out + uint64_t(row) * ldo + col;
        *o = kAccumulate ? *o + sum[j] : sum[j];
      }
    }
  }
  if (S > 1) cl.sync();  // no rank leaves while rank 0 reads its part
}

// out[s * ldo + j] (+)= sum_k x[s * ldx + k] W[k * ldw + j], s < T, j < cols. Grid: cols / 64
// tiles x S blocks, clusters of S along K; K / S a multiple of 256, cols of 64, W, ldw, x and ldx
// 16-byte aligned (GemvMmaFits).
template <int T, bool kAccumulate>
__global__ void __launch_bounds__(kMmaThreads, 1)
    gemv_mma(float* __restrict__ out, uint64_t ldo, const float* __restrict__ x, uint64_t ldx,
             const uint16_t* __restrict__ W, uint64_t ldw, uint32_t K, uint32_t cols) {
  extern __shared__ __align__(16) unsigned char smem[];
  MEMRA_TRACE_KERNEL(kTraceGemv);  // the traced chain shows it as the `Wo` product it replaces
  PdlLaunchDependents();  // as memra_gemv: the next kernel's blocks may start as these leave SMs
  const cg::cluster_group cl = cg::this_cluster();
  const unsigned S = cl.num_blocks(), rank = cl.block_rank();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const uint32_t col0 = (blockIdx.x / S) * kMmaCols, slice = K / S, k0 = rank * slice;
  const uint32_t steps = slice / (16 * kMmaWarps);
  unsigned char* ring = smem + warp * kMmaDepth * SlotBytes<T>();
  const auto kOf = [&](uint32_t i) { return k0 + 16 * (warp + kMmaWarps * i); };

  // Weights do not depend on the kernel ahead: the first kMmaEarly slots' weights fly while it
  // finishes, and their x follows the wait, all in one copy group. Empty groups after it keep slot
  // i's group the i-th, so the loop's one wait serves the early slots and the later ones alike.
  for (int i = 0; i < kMmaEarly && uint32_t(i) < steps; ++i) {
    CopyW<kMmaTiles>(ring + i * SlotBytes<T>(), kMmaRowBytes, W, ldw, kOf(i), col0, lane);
  }
  if (kMmaL2Ahead > 0 && lane < 16) {  // a lane a weight row: the tile's 128 bytes of it
    for (uint32_t i = kMmaEarly; i < uint32_t(kMmaEarly + kMmaL2Ahead) && i < steps; ++i) {
      memra_cu::PrefetchL2Bulk(W + (uint64_t(kOf(i)) + lane) * ldw + col0, kMmaCols * 2);
    }
  }
  PdlWait();
  for (int i = 0; i < kMmaEarly && uint32_t(i) < steps; ++i) {
    CopyX<T>(XOf(ring + i * SlotBytes<T>()), x, ldx, kOf(i), lane);
  }
  for (int i = 0; i < kMmaEarly; ++i) CommitCopyGroup();
  for (int i = kMmaEarly; i < kMmaDepth; ++i) {
    if (uint32_t(i) < steps) {
      IssueSlot<T>(ring + i * SlotBytes<T>(), W, ldw, kOf(i), col0, x, ldx, lane);
    } else {
      CommitCopyGroup();
    }
  }

  float acc[kMmaTiles][4] = {};
  for (uint32_t i = 0; i < steps; ++i) {
    WaitCopyGroups<kMmaDepth - 1>();
    __syncwarp();  // the other lanes' copies of this slot have landed too
    unsigned char* slot = ring + (i % kMmaDepth) * SlotBytes<T>();
    MmaStep(acc, slot, kMmaRowBytes, XOf(slot) + g * kMmaXRow, g < T, lane);
    __syncwarp();  // every lane's reads of the slot are done before it is refilled
    if (i + kMmaDepth < steps) {
      IssueSlot<T>(slot, W, ldw, kOf(i + kMmaDepth), col0, x, ldx, lane);
    } else {
      CommitCopyGroup();
    }
  }
  WaitCopiesToShared();
  __syncthreads();

  ReduceStore<T, kMmaTiles, kMmaWarps, kAccumulate>(acc, reinterpret_cast<float*>(smem), cl, out, ldo, cols,
                                                    [&](int mt, int e, int ln) { return TileCol(col0, mt, e, ln); });
}

// The widest product the path takes: at `bench`, `Wo` (4096 columns, a rank's half 2048) and not
// the vocabulary, which it has not been measured on.
constexpr uint32_t kMmaMaxCols = 4096;

// Whether the tensor-core path takes this product: t <= 8 rows, at most kMmaMaxCols columns, every
// load 16 bytes wide, the tiles and the warps' steps whole.
inline bool GemvMmaFits(const void* x, uint64_t ldx, const void* W, uint64_t ldw, uint32_t K, uint32_t cols,
                        uint32_t t, unsigned split) {
  return t >= 1 && t <= 8 && cols <= kMmaMaxCols && cols % kMmaCols == 0 && split >= 1 &&
         K % (split * 16 * kMmaWarps) == 0 && memra_cu::Aligned(x, 16) && ldx % 4 == 0 &&
         memra_cu::Aligned(W, 16) && ldw % 8 == 0;
}

}  // namespace memra_mma
