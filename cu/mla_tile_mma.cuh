// mla_tiles' item (32 positions by 8, 16 or 32 heads, R = 512) with its two products on the
// tensor cores, which a row takes from kFrom positions on in a build that sets it
// (cu/model_attention.cu, mla_tiles). Included by cu/model_attention.cu after its Workspace, Stage
// and TileSoftmax, inside its unnamed namespace. What it gains and costs: docs/performance.md,
// "The tiled attention's item on the tensor cores".
//
// The f32 item is bound by its FMAs and its shared-memory wavefronts (docs/performance.md, "The
// tiled attention as items of one block an SM": at position 4000 the scores and the o take about
// 4.9 us each, an SM's f32 FMAs about 4 us for both). Here:
//   scores  S = Q C^T by mma.sync m16n8k8 tf32 (heads by positions, k = r): warp w takes r in
//           [64 w, 64 w + 64), every head and position, its k-steps in increasing r; the eight
//           warps' sums added in warp order;
//   softmax the f32 item's own (TileSoftmax), a lane a position;
//   o       O = E C (heads by r, k = the tile's 32 positions in increasing j): warp w takes r in
//           [64 w, 64 w + 64).
// Each f32 operand is split into two tf32, big = rna(x) and small = rna(x - big), and a product
// is small*big + big*small + big*big into one f32 accumulator ("3xTF32"; small*small, below 2^-22
// of the product, is left out). -DMEMRA_MLA_MMA_TERMS=1 keeps big*big alone: a diagnostic of what
// the other two cost, not f32's accuracy.
//
// The sums round in the tensor cores' order, not the f32 item's, so a row's u depends on which side
// of kFrom its position count falls; the choice is the row's own, so it does not depend on the rows
// beside it. A row of a product depends on its own row of A alone, so a head's u does not depend
// on the heads beside it either (the model-kernel suite holds slices, rows alone and misaligned
// inputs to the full launch's bits). The one-kernel short form ends at 128 positions, far below.
#pragma once

#ifndef MEMRA_MLA_MMA_TERMS
#define MEMRA_MLA_MMA_TERMS 3
#endif

namespace mla_mma {

constexpr uint32_t kR = 512;  // the only latent width this item takes
// The position count from which a row takes this item: -DMEMRA_MLA_MMA_FROM=N; 0 (the default)
// never, and memra_mla_attention does not launch the kernel that holds it. Measured and not the default
// (docs/performance.md): from 2048 positions the step was 0.9% shorter at position 4000 on an
// H100, but 1.4% longer at 2047, and 0.5% at 1023, where every row takes the f32 item, compiled
// into one kernel with this one (not its shared memory: measured).
#ifndef MEMRA_MLA_MMA_FROM
#define MEMRA_MLA_MMA_FROM 0
#endif
constexpr uint32_t kFrom = MEMRA_MLA_MMA_FROM == 0 ? UINT32_MAX : MEMRA_MLA_MMA_FROM;

// Whether a row of np positions takes this item (mla_tiles' kMma form asks, item by item).
__device__ __forceinline__ bool Takes(uint32_t np) { return np >= kFrom; }
// Row strides in floats, so that a fragment's loads (lanes g = 0..7, t = 0..3) touch 32 banks:
//   the queries, read as A[g][t]: kQRow = R + 4, rows 4 banks apart (4 g + t);
//   the cache rows, read as B[k t][n g] in the scores (row g, column t) and in the o (row t,
//   column g): kRowF = R + 8, rows 8 banks apart (8 t + g for the o), and for the scores each
//   row's columns swizzled by its bit 2 (TileAt: rows g and g + 4 would share banks at 8 apart,
//   so rows 4..7 of eight take their columns ^ 4: 8 g + t + 4 [g >= 4]);
//   E, read as A: kExpRow = 36 (4 g + t); a score eighth's float2 stores, 16 lanes a wavefront:
//   kRedRow = 40 (8 g + 2 t, 32 banks).
constexpr uint32_t kQRow = kR + 4;
constexpr uint32_t kRowF = kR + 8;
constexpr uint32_t kExpRow = 36;
constexpr uint32_t kRedRow = 40;
constexpr uint32_t kWarpR = kR / kPartialWarps;  // r's a warp takes in both products
constexpr int kTerms = MEMRA_MLA_MMA_TERMS;
static_assert(kTerms == 1 || kTerms == 3, "3xTF32, or big*big alone");

// Floats of the item's dynamic shared memory: the tile's cache rows, 32 heads' queries, eight
// score eighths, the scores then exps.
constexpr size_t kSmemFloats = size_t(32) * kRowF + size_t(32) * kQRow + size_t(kPartialWarps) * 32 * kRedRow +
                               size_t(32) * kExpRow;

// Where column c of the tile's cache row j lives (a swizzle of 16-byte chunks: c ^ 4 keeps c's chunk
// whole, so the rows still copy as 16-byte cp.async).
__device__ __forceinline__ uint32_t TileAt(uint32_t j, uint32_t c) {
  return j * kRowF + (c ^ (j & 4));
}

// Rows first .. first + count of the tile whose row 0 is src into shared memory at TileAt. kVec
// (src 16-byte aligned): every 16-byte copy of the thread in flight, landed by
// memra_cu::WaitCopiesToShared; otherwise Stage's loads of the step's own data, a float at a time.
template <bool kVec>
__device__ __forceinline__ void StageTile(float* tile, const float* src, uint32_t first, uint32_t count) {
  if (kVec) {
    constexpr uint32_t quads = kR / 4;
    for (uint32_t i = threadIdx.x; i < count * quads; i += blockDim.x) {
      const uint32_t j = first + i / quads, c = 4 * (i % quads);
      memra_cu::CopyToShared16(tile + TileAt(j, c), src + uint64_t(j) * kR + c);
    }
  } else {
#pragma unroll 16
    for (uint32_t i = threadIdx.x; i < count * kR; i += blockDim.x) {
      const uint32_t j = first + i / kR, c = i % kR;
      tile[TileAt(j, c)] = memra_cu::LoadFresh(src + uint64_t(j) * kR + c);
    }
  }
}

__device__ __forceinline__ uint32_t Tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// x = big + small, big x's top 11 significant bits (rounded), x - big exact in f32, then rounded.
struct Tf32Pair {
  uint32_t big, small;
};

__device__ __forceinline__ Tf32Pair SplitTf32(float x) {
  const uint32_t big = Tf32(x);
  return {big, Tf32(__fsub_rn(x, __uint_as_float(big)))};
}

__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// An A fragment (16 x 8) split in two. Lane (g, t) = (lane / 4, lane % 4) holds a0 (row g, column
// t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B's b0 (k t, column g), b1 (k t + 4, g);
// D's d0 (row g, column 2 t), d1 (g, 2 t + 1), d2 (g + 8, 2 t), d3 (g + 8, 2 t + 1).
struct FragA {
  uint32_t big[4], small[4];
};

// The fragment of a row-major A whose (g, t) element is at `at` (row stride ld).
__device__ __forceinline__ FragA LoadA(const float* at, uint32_t ld) {
  const float v[4] = {at[0], at[8 * ld], at[4], at[8 * ld + 4]};
  FragA f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const Tf32Pair p = SplitTf32(v[i]);
    f.big[i] = p.big;
    f.small[i] = p.small;
  }
  return f;
}

// d += a b, the small terms first.
__device__ __forceinline__ void Mma3(float (&d)[4], const FragA& a, const Tf32Pair& b0, const Tf32Pair& b1) {
  if (kTerms == 3) {
    Mma(d, a.small, b0.big, b1.big);
    Mma(d, a.big, b0.small, b1.small);
  }
  Mma(d, a.big, b0.big, b1.big);
}

// TileHeads' item (the same arguments, the same workspace) at R = 512, by kPartialThreads threads;
// the tile's first `staged` rows are in shared memory already (StageTile).
template <unsigned HB, bool kVec>
__device__ __forceinline__ void TileHeadsMma(const MemraMlaArgs& a, const Workspace& ws, uint32_t tile, uint32_t s,
                                             uint32_t hb0, uint32_t np, uint32_t staged) {
  constexpr unsigned MT = HB < 16 ? 1 : HB / 16;  // m16 tiles of heads
  constexpr unsigned HS = HB / kPartialWarps;     // heads a warp's softmax takes
  extern __shared__ float4 smem4[];
  float* sc = reinterpret_cast<float*>(smem4);
  float* sq = sc + 32 * kRowF;
  float* red = sq + 32 * kQRow;
  float* sE = red + kPartialWarps * 32 * kRedRow;
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  const uint32_t j0 = tile * 32, nv = np - j0 < 32 ? np - j0 : 32;
  const uint32_t nhB = a.nh - hb0 < HB ? a.nh - hb0 : HB;

  StageTile<kVec>(sc, a.cache + uint64_t(s) * a.slotStride + uint64_t(j0) * kR, staged, nv - staged);
  Stage<kVec>(sq, kQRow, a.q + uint64_t(s) * a.ldq + uint64_t(hb0) * kR, nhB, kR);
  if (kVec) memra_cu::WaitCopiesToShared();
  // Zeros in the query rows past nhB and the cache rows past nv: a product's row or column reads
  // only its own, but O = E C sums over every row of C, and 0 * NaN (a stale row) is NaN.
  for (uint32_t i = tid; i < (16 * MT - nhB) * kR; i += kPartialThreads) sq[(nhB + i / kR) * kQRow + i % kR] = 0.0f;
  for (uint32_t i = tid; i < (32 - nv) * kR; i += kPartialThreads) sc[(nv + i / kR) * kRowF + i % kR] = 0.0f;
  __syncthreads();

  {
    float acc[MT][4][4] = {};
    const uint32_t r0 = warp * kWarpR;
#pragma unroll 2
    for (uint32_t k0 = r0; k0 < r0 + kWarpR; k0 += 8) {
      FragA qa[MT];
#pragma unroll
      for (unsigned mt = 0; mt < MT; ++mt) qa[mt] = LoadA(sq + (16 * mt + g) * kQRow + k0 + t4, kQRow);
#pragma unroll
      for (unsigned nt = 0; nt < 4; ++nt) {
        // B (k = r, n = position): position 8 nt + g at r = k0 + t and k0 + t + 4.
        const uint32_t j = 8 * nt + g;
        const Tf32Pair b0 = SplitTf32(sc[TileAt(j, k0 + t4)]), b1 = SplitTf32(sc[TileAt(j, k0 + t4 + 4)]);
#pragma unroll
        for (unsigned mt = 0; mt < MT; ++mt) Mma3(acc[mt][nt], qa[mt], b0, b1);
      }
    }
    float* mine = red + warp * 32 * kRedRow;
#pragma unroll
    for (unsigned mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (unsigned nt = 0; nt < 4; ++nt) {
        float* at = mine + (16 * mt + g) * kRedRow + 8 * nt + 2 * t4;
        *reinterpret_cast<float2*>(at) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(at + 8 * kRedRow) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
    }
  }
  __syncthreads();
  // docs/model.md: s_j = (q . c_j) / sqrt(R), a true division.
  const float sqrtR = __fsqrt_rn(static_cast<float>(kR));
  for (uint32_t i = tid; i < 16 * MT * 32; i += kPartialThreads) {
    const uint32_t h = i / 32, j = i % 32;
    float v = red[h * kRedRow + j];
#pragma unroll
    for (unsigned w = 1; w < kPartialWarps; ++w) v = __fadd_rn(v, red[w * 32 * kRedRow + h * kRedRow + j]);
    sE[h * kExpRow + j] = __fdiv_rn(v, sqrtR);
  }
  __syncthreads();

  TileSoftmax<HS>(sE, kExpRow, nv, nhB, ws, s, tile, hb0, a.nh);
  __syncthreads();

  {
    FragA ea[MT][4];
#pragma unroll
    for (unsigned mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (unsigned ks = 0; ks < 4; ++ks) ea[mt][ks] = LoadA(sE + (16 * mt + g) * kExpRow + 8 * ks + t4, kExpRow);
    }
    float acc[MT][8][4] = {};
    const uint32_t n0 = warp * kWarpR;
#pragma unroll
    for (unsigned ks = 0; ks < 4; ++ks) {
#pragma unroll
      for (unsigned nt = 0; nt < 8; ++nt) {
        // B (k = position, n = r): r = n0 + 8 nt + g of positions 8 ks + t and 8 ks + t + 4.
        const uint32_t r = n0 + 8 * nt + g;
        const Tf32Pair b0 = SplitTf32(sc[TileAt(8 * ks + t4, r)]), b1 = SplitTf32(sc[TileAt(8 * ks + t4 + 4, r)]);
#pragma unroll
        for (unsigned mt = 0; mt < MT; ++mt) Mma3(acc[mt][nt], ea[mt][ks], b0, b1);
      }
    }
#pragma unroll
    for (unsigned mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (unsigned half = 0; half < 2; ++half) {
        const uint32_t h = 16 * mt + g + 8 * half;
        if (h >= nhB) continue;
        float* out = ws.o + ws.Index(s, tile, hb0 + h, a.nh) * kR + n0 + 2 * t4;
#pragma unroll
        for (unsigned nt = 0; nt < 8; ++nt) {
          *reinterpret_cast<float2*>(out + 8 * nt) = make_float2(acc[mt][nt][2 * half], acc[mt][nt][2 * half + 1]);
        }
      }
    }
  }
}

}  // namespace mla_mma
