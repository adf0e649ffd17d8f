// Can the tensor cores take the products of a decode step at eight rows, where the FMA kernels
// are furthest from their bytes' floor? The products keep f32 activations and bf16 weights
// (docs/model.md), so this probe splits each f32 of x into three bf16 (hi + mid + lo, which is x
// exactly: 8 + 8 + 8 significant bits) and multiplies all three against the same weight fragment
// with mma.sync m16n8k16 (bf16 products are exact in f32; only the accumulation rounds). A
// block owns CT = 16 MT columns and one cluster rank's K slice; its warps (8, or 16) take the
// slice's k16 steps round robin, each through its own cp.async ring of weight tiles in shared memory,
// read with ldmatrix.trans (the A operand is W transposed: 16 columns by 16 k, the B operand x
// transposed: 16 k by 8 rows). Sums: per warp its steps in increasing k (hi, mid, lo each),
// then the warps in order, then the cluster's ranks in order: fixed by K and S alone, so a row's
// result must not depend on t or on MT (checked bit for bit below).
//
// Its variants: the ring's depth, 8 or 16 warps, each step's x carried in its ring slot or the
// block's slice staged up front, and a second form with the weights loaded straight into
// registers (mma_gemv_regs); "hi-only" drops the mid and lo MMAs to show what they cost (its
// sums are wrong by design). Each is checked against an f64 product on the host (the largest
// |y - ref| over the sum of |x w| of its output, the gemv suite's measure) beside the production
// memra_gemv, then timed from a CUDA graph of back-to-back launches over rotating copies of the
// weights, programmatic dependent launch on for both (memra_model_set_pdl for memra_gemv).
// docs/performance.md ("The products on the tensor cores, probed") has its figures. With
// --warm, `Wo` alone, every launch over one copy: what each form takes with its weights in L2 (a
// bound on weights asked into L2 while the kernel ahead runs).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. scripts/probes/mma-gemv-probe.cu cu/model.cu \
//        cu/model_gemv.cu cu/read_floor.cu cu/model_weights.cu -o build/probes/mma-gemv-probe
//   build/probes/mma-gemv-probe [--warm] [out.json]
#include <cooperative_groups.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <type_traits>
#include <string>
#include <vector>

#include "cu/gemv_mma.cuh"
#include "cu/kernels.h"
#include "cu/model_bits.cuh"
#include "cu/model.h"
#include "scripts/probes/probe_cuda.h"
#include "scripts/probes/read_floor.h"

namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kLaunches = 20;
constexpr int kReplays = 15;
constexpr int kXPad = 8;  // floats after each staged x row: rows g and g + 4 land 8 banks apart

template <int MT>
struct Geo {
  static constexpr int CT = 16 * MT;
  // A staged weight row, 16 bytes past CT bf16 so that ldmatrix's eight rows of one matrix fall
  // in eight different 16-byte bank groups.
  static constexpr int RowBytes = CT * 2 + 16;
  static constexpr int StepBytes = 16 * RowBytes;
};

using memra_cu::CommitCopyGroup;
using memra_cu::PdlLaunchDependents;
using memra_cu::PdlWait;
using memra_cu::WaitCopiesToShared;
using memra_cu::WaitCopyGroups;
using memra_mma::kMmaXRow;
using memra_mma::Mma;
using memra_mma::MmaStep;
using memra_mma::ReduceStore;
using memra_mma::Split3;
using memra_mma::TileCol;

// Flags of mma_gemv. kXRing: each step's 16 k of x ride in its ring slot (cp.async, once the kernel
// ahead is done), instead of the block's whole slice staged up front behind a barrier. kHiOnly:
// the hi third alone, a diagnostic of what the other two MMAs cost (its sums are wrong).
constexpr int kXRing = 1, kHiOnly = 2, kWarps16 = 4;
__host__ __device__ constexpr int Warps(int F) { return F & kWarps16 ? 16 : 8; }

// A step's copies into its slot, one group: the 16 weight rows and, with kXRing once x may be
// read, x's 16 k after them.
template <int T, int MT, int F>
__device__ __forceinline__ void IssueStep(unsigned char* slot, const uint16_t* W, uint64_t ldw, uint32_t k,
                                          uint32_t col0, const float* x, uint32_t K, bool withX, int lane) {
  memra_mma::CopyW<MT>(slot, Geo<MT>::RowBytes, W, ldw, k, col0, lane);
  if ((F & kXRing) && withX) memra_mma::CopyX<T>(reinterpret_cast<float*>(slot + Geo<MT>::StepBytes), x, K, k, lane);
  CommitCopyGroup();
}

// out[s * ldo + j] = sum_k x[s * K + k] W[k * ldw + j] for s < T, j < cols. Grid: tiles x S
// blocks, clusters of S along K; K / S a multiple of 16 * kWarps, cols of CT.
template <int T, int MT, int DEPTH, int F = 0>
__global__ void __launch_bounds__(Warps(F) * 32, 1)
    mma_gemv(float* __restrict__ out, uint32_t ldo, const float* __restrict__ x, const uint16_t* __restrict__ W,
             uint32_t ldw, uint32_t K, uint32_t cols) {
  using G = Geo<MT>;
  constexpr int kWarps = Warps(F), kThreads = kWarps * 32;
  extern __shared__ __align__(16) unsigned char smem[];
  const cg::cluster_group cl = cg::this_cluster();
  const unsigned S = cl.num_blocks(), rank = cl.block_rank();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const uint32_t col0 = (blockIdx.x / S) * G::CT, slice = K / S, k0 = rank * slice;
  const uint32_t steps = slice / (16 * kWarps);  // this warp's k16 steps
  const uint32_t XS = slice + kXPad;
  constexpr int SB = G::StepBytes + (F & kXRing ? T * kMmaXRow * 4 : 0);
  unsigned char* ring = smem + warp * DEPTH * SB;
  float* xs = reinterpret_cast<float*>(smem + kWarps * DEPTH * SB);

  // Weights do not depend on the kernel ahead: their first DEPTH steps fly while it finishes.
#pragma unroll
  for (int i = 0; i < DEPTH; ++i) {
    if (uint32_t(i) < steps) {
      IssueStep<T, MT, F>(ring + i * SB, W, ldw, k0 + 16 * (warp + kWarps * i), col0, x, K, false, lane);
    } else {
      CommitCopyGroup();
    }
  }
  PdlWait();
  PdlLaunchDependents();
  if (F & kXRing) {
    for (int i = 0; i < DEPTH && uint32_t(i) < steps; ++i) {
      memra_mma::CopyX<T>(reinterpret_cast<float*>(ring + i * SB + G::StepBytes), x, K, k0 + 16 * (warp + kWarps * i),
                          lane);
    }
    WaitCopiesToShared();
    __syncwarp();
  } else {
    for (uint32_t i = threadIdx.x; i < T * slice / 4; i += kThreads) {
      const uint32_t s = i / (slice / 4), q = i % (slice / 4);
      const float4 v = __ldcg(reinterpret_cast<const float4*>(x + uint64_t(s) * K + k0) + q);
      *reinterpret_cast<float4*>(xs + s * XS + 4 * q) = v;
    }
    __syncthreads();
  }

  float acc[MT][4] = {};
  for (uint32_t i = 0; i < steps; ++i) {
    WaitCopyGroups<DEPTH - 1>();
    __syncwarp();
    const unsigned char* st = ring + (i % DEPTH) * SB;
    const uint32_t kk = 16 * (warp + kWarps * i);
    const float* xr = F & kXRing ? reinterpret_cast<const float*>(st + G::StepBytes) + g * kMmaXRow
                                 : xs + g * XS + kk;
    MmaStep<MT, F & kHiOnly ? 1 : 3>(acc, st, G::RowBytes, xr, g < T, lane);
    __syncwarp();  // every lane's ldmatrix of this stage done before its slot is refilled
    if (i + DEPTH < steps) {
      const uint32_t kn = k0 + 16 * (warp + kWarps * (i + DEPTH));
      IssueStep<T, MT, F>(ring + (i % DEPTH) * SB, W, ldw, kn, col0, x, K, true, lane);
    } else {
      CommitCopyGroup();
    }
  }
  WaitCopiesToShared();
  __syncthreads();

  ReduceStore<T, MT, kWarps, false>(acc, reinterpret_cast<float*>(smem), cl, out, ldo, cols,
                                    [&](int mt, int e, int ln) { return TileCol(col0, mt, e, ln); });
}

// The same sums with no shared memory between HBM and the tensor cores: each lane loads its
// A fragments' weights straight into registers, 16 (MT 8) or 8 (MT 4) bytes of one row at a
// time, rows k + 2c and k + 2c + 1 side by side, and packs the (k, k + 1) pairs with byte
// permutes. An MMA's row m stands for whichever column the lanes' loads give it: MMA j's row g
// is column g MT + j of the tile, row g + 8 column 8 MT + g MT + j, so lanes g = 0..7 of one c
// read 8 MT contiguous bf16 of a row (128 or 256 bytes). U k16 steps of loads are in flight
// while the step before them multiplies (two register sets), like the FMA kernels' batches.
template <int MT>
struct RegStep {
  using V = typename std::conditional<MT == 8, uint4, uint2>::type;
  V w[8];
};

template <int MT>
__device__ __forceinline__ void LoadRegStep(RegStep<MT>& r, const uint16_t* W, uint64_t ldw, uint32_t k,
                                            uint32_t colA, uint32_t colB, int c) {
  using V = typename RegStep<MT>::V;
  const uint32_t rows[4] = {k + 2 * c, k + 2 * c + 1, k + 2 * c + 8, k + 2 * c + 9};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const uint32_t col = q ? colB : colA;
      r.w[4 * h + 2 * q] = __ldcs(reinterpret_cast<const V*>(W + uint64_t(rows[2 * h]) * ldw + col));
      r.w[4 * h + 2 * q + 1] = __ldcs(reinterpret_cast<const V*>(W + uint64_t(rows[2 * h + 1]) * ldw + col));
    }
  }
}

template <class V>
__device__ __forceinline__ uint32_t Word(const V& v, int i) {
  return reinterpret_cast<const uint32_t*>(&v)[i];
}

// The (k, k + 1) pair of column j: the low halves (j even) or the high halves (j odd) of word j / 2.
template <int MT>
__device__ __forceinline__ uint32_t Pair(const RegStep<MT>& r, int lo, int j) {
  return __byte_perm(Word(r.w[lo], j / 2), Word(r.w[lo + 1], j / 2), (j & 1) ? 0x7632 : 0x5410);
}

template <int T, int MT>
__device__ __forceinline__ void MmaRegStep(float (&acc)[MT][4], const RegStep<MT>& r, const float* xr, int g, int c) {
  uint32_t b0[3] = {0, 0, 0}, b1[3] = {0, 0, 0};
  if (g < T) {
    Split3(*reinterpret_cast<const float2*>(xr + 2 * c), b0);
    Split3(*reinterpret_cast<const float2*>(xr + 8 + 2 * c), b1);
  }
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const uint32_t a[4] = {Pair(r, 0, j), Pair(r, 2, j), Pair(r, 4, j), Pair(r, 6, j)};
#pragma unroll
    for (int p = 0; p < 3; ++p) Mma(acc[j], a, b0[p], b1[p]);
  }
}

template <int T, int MT>
size_t RegSmemBytes(uint32_t K, unsigned S) {
  const size_t xs = size_t(T) * (K / S + kXPad) * 4, red = size_t(kWarps + 1) * MT * 4 * 32 * 4;
  return xs > red ? xs : red;
}

template <int T, int MT, int U>
__global__ void __launch_bounds__(kThreads, 1)
    mma_gemv_regs(float* __restrict__ out, uint32_t ldo, const float* __restrict__ x,
                  const uint16_t* __restrict__ W, uint32_t ldw, uint32_t K, uint32_t cols) {
  extern __shared__ __align__(16) unsigned char smem[];
  const cg::cluster_group cl = cg::this_cluster();
  const unsigned S = cl.num_blocks(), rank = cl.block_rank();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const uint32_t col0 = (blockIdx.x / S) * 16 * MT, slice = K / S, k0 = rank * slice;
  const uint32_t colA = col0 + g * MT, colB = col0 + 8 * MT + g * MT;
  const uint32_t steps = slice / (16 * kWarps), XS = slice + kXPad;
  float* xs = reinterpret_cast<float*>(smem);
  auto kOf = [&](uint32_t i) { return k0 + 16 * (warp + kWarps * i); };

  RegStep<MT> cur[U], nxt[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (uint32_t(u) < steps) LoadRegStep<MT>(cur[u], W, ldw, kOf(u), colA, colB, c);
  }
  PdlWait();
  PdlLaunchDependents();
  for (uint32_t i = threadIdx.x; i < T * slice / 4; i += kThreads) {
    const uint32_t s = i / (slice / 4), q = i % (slice / 4);
    *reinterpret_cast<float4*>(xs + s * XS + 4 * q) =
        __ldcg(reinterpret_cast<const float4*>(x + uint64_t(s) * K + k0) + q);
  }
  __syncthreads();

  float acc[MT][4] = {};
  for (uint32_t i = 0; i < steps; i += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i + U + u < steps) LoadRegStep<MT>(nxt[u], W, ldw, kOf(i + U + u), colA, colB, c);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i + u < steps) MmaRegStep<T, MT>(acc, cur[u], xs + g * XS + (kOf(i + u) - k0), g, c);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
  }
  __syncthreads();

  ReduceStore<T, MT, kWarps, false>(acc, reinterpret_cast<float*>(smem), cl, out, ldo, cols, [&](int j, int e, int ln) {
    return col0 + (e >= 2 ? 8 * MT : 0) + (ln / 4) * MT + j;  // MMA j's row g is column g MT + j
  });
}

template <int T, int MT, int DEPTH, int F>
size_t SmemBytes(uint32_t K, unsigned S) {
  return F & kXRing ? size_t(Warps(F)) * DEPTH * (Geo<MT>::StepBytes + T * kMmaXRow * 4)
                    : size_t(Warps(F)) * DEPTH * Geo<MT>::StepBytes + size_t(T) * (K / S + kXPad) * 4;
}

// kRegs: mma_gemv_regs with U = DEPTH; otherwise mma_gemv's ring DEPTH deep.
template <bool kRegs, int T, int MT, int DEPTH, int F>
size_t Smem(uint32_t K, unsigned S) {
  return kRegs ? RegSmemBytes<T, MT>(K, S) : SmemBytes<T, MT, DEPTH, F>(K, S);
}

template <bool kRegs, int T, int MT, int DEPTH, int F = 0>
cudaError_t LaunchMma(float* out, const float* x, const uint16_t* W, uint32_t K, uint32_t cols, unsigned S,
                      bool pdl, cudaStream_t s) {
  const auto kernel = kRegs ? mma_gemv_regs<T, MT, DEPTH> : mma_gemv<T, MT, DEPTH, F>;
  static bool attr = false;
  if (!attr) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
    if (e != cudaSuccess) return e;
    attr = true;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(cols / (16 * MT) * S);
  cfg.blockDim = dim3(kRegs ? kThreads : Warps(F) * 32);
  cfg.dynamicSmemBytes = Smem<kRegs, T, MT, DEPTH, F>(K, S);
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = S;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[1].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cfg.attrs = at;
  cfg.numAttrs = 2;
  return cudaLaunchKernelEx(&cfg, kernel, out, cols, x, W, cols, K, cols);
}

float gReadGBs = 0;
std::string gJson = "[";
int gFailures = 0;

void Record(const std::string& shape, const std::string& variant, double us, double bytes, double err) {
  const double gbs = bytes / (us * 1e3);
  std::printf("%-22s %-30s %8.2f us %6.0f GB/s %5.1f%% of floor  err %.2e\n", shape.c_str(), variant.c_str(), us,
              gbs, 100 * gbs / gReadGBs, err);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s{\"shape\":\"%s\",\"variant\":\"%s\",\"us\":%.3f,\"gbps\":%.1f,\"pctFloor\":%.2f,\"maxErr\":%.3e}",
                gJson.size() > 1 ? ",\n" : "\n", shape.c_str(), variant.c_str(), us, gbs, 100 * gbs / gReadGBs, err);
  gJson += buf;
}

double PerLaunchUs(cudaStream_t s, const std::function<void(int)>& launch) {
  auto body = [&] {
    for (int i = 0; i < kLaunches; ++i) launch(i);
  };
  return GraphReplayUs(s, body, body, kReplays) / kLaunches;
}

std::vector<float> Down(const float* d, size_t n) {
  CHECK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return h;
}

// A [K x cols] matrix in enough copies that no launch of a graph finds its weights in L2 (one
// under --warm), x for 8 rows, and the f64 product with the sum of |x w| of every output.
bool gWarm = false;

struct Shape {
  uint32_t K, cols;
  int copies;
  std::vector<uint16_t*> w;
  float *x, *out, *x1;
  std::vector<double> ref, mag;
  std::string name;

  Shape(const char* n, uint32_t K_, uint32_t cols_) : K(K_), cols(cols_), name(n) {
    const size_t elems = size_t(K) * cols;
    copies = gWarm ? 1 : std::max<int>(2, int((size_t(512) << 20) / (elems * 2)) + 1);
    for (int c = 0; c < copies; ++c) {
      uint16_t* p;
      CHECK(cudaMalloc(&p, elems * 2));
      CHECK(memra_gen_weights(p, 7, 100 + c, 0, 1, elems, 0, elems, 0, 0.02f, 0));
      w.push_back(p);
    }
    x = DeviceRandoms(size_t(8) * K, 1.f, 11);
    CHECK(cudaMalloc(&x1, size_t(K) * 4));
    CHECK(cudaMalloc(&out, size_t(8) * cols * 4));
    std::vector<uint16_t> hw(elems);
    CHECK(cudaMemcpy(hw.data(), w[0], elems * 2, cudaMemcpyDeviceToHost));
    const std::vector<float> hx = Down(x, size_t(8) * K);
    ref.assign(size_t(8) * cols, 0);
    mag.assign(size_t(8) * cols, 0);
    for (uint32_t k = 0; k < K; ++k) {
      for (uint32_t j = 0; j < cols; ++j) {
        const double wv = memra_model::Bf16ToF32(hw[size_t(k) * cols + j]);
        for (int r = 0; r < 8; ++r) {
          const double p = double(hx[size_t(r) * K + k]) * wv;
          ref[size_t(r) * cols + j] += p;
          mag[size_t(r) * cols + j] += std::fabs(p);
        }
      }
    }
  }
  // The largest |y - ref| / sum |x w| over the first t rows of out.
  double Err(int t) const {
    const std::vector<float> y = Down(out, size_t(t) * cols);
    double e = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double d = std::fabs(double(y[i]) - ref[i]) / (mag[i] > 0 ? mag[i] : 1);
      if (!(d <= e)) e = d;
    }
    return e;
  }
  void Poison(cudaStream_t s) const { CHECK(cudaMemsetAsync(out, 0xff, size_t(8) * cols * 4, s)); }
  std::string Tag(int t) const {
    return name + (gWarm ? " warm" : "") + " " + std::to_string(K) + "x" + std::to_string(cols) +
           " t" + std::to_string(t);
  }
  double Bytes() const { return double(K) * cols * 2; }
  ~Shape() {
    for (auto p : w) CHECK(cudaFree(p));
    CHECK(cudaFree(x));
    CHECK(cudaFree(x1));
    CHECK(cudaFree(out));
  }
};

template <int T>
void Production(cudaStream_t s, const Shape& m, uint32_t split, bool pdl) {
  memra_model_set_pdl(0);
  m.Poison(s);
  CHECK(memra_gemv(m.out, m.cols, m.x, m.K, m.w[0], m.cols, m.K, m.cols, T, 0, split, s));
  const double err = m.Err(T);
  memra_model_set_pdl(pdl ? 1 : 0);
  const double us = PerLaunchUs(s, [&](int i) {
    CHECK(memra_gemv(m.out, m.cols, m.x, m.K, m.w[i % m.copies], m.cols, m.K, m.cols, T, 0, split, s));
  });
  memra_model_set_pdl(0);
  Record(m.Tag(T), std::string("production split ") + std::to_string(split) + (pdl ? " pdl" : ""), us, m.Bytes(),
         err);
}

// Row r of a t-row launch against the same kernel on row r alone: the same bits, or a failure line.
template <bool kRegs, int T, int MT, int DEPTH, int F = 0>
void TimeMma(cudaStream_t s, const Shape& m, unsigned S, bool pdl) {
  if (Smem<kRegs, T, MT, DEPTH, F>(m.K, S) > 227 * 1024 || m.cols % (16 * MT) ||
      (m.K / S) % (16 * (kRegs ? kWarps : Warps(F))))
    return;
  const std::string what = std::string(kRegs ? "regs" : "ring") + " ct " + std::to_string(16 * MT) + " S " +
                           std::to_string(S) + (kRegs ? " U " : " depth ") + std::to_string(DEPTH) +
                           (F & kXRing ? " x-ring" : "") + (F & kHiOnly ? " hi-only" : "") +
                           (F & kWarps16 ? " 16 warps" : "");
  m.Poison(s);
  CHECK((LaunchMma<kRegs, T, MT, DEPTH, F>(m.out, m.x, m.w[0], m.K, m.cols, S, false, s)));
  const double err = m.Err(T);
  const std::vector<float> all = Down(m.out, size_t(T) * m.cols);
  for (int r = 0; r < T; r += (T > 1 ? T - 1 : 1)) {
    CHECK(cudaMemcpy(m.x1, m.x + size_t(r) * m.K, size_t(m.K) * 4, cudaMemcpyDeviceToDevice));
    m.Poison(s);
    CHECK((LaunchMma<kRegs, 1, MT, DEPTH, F>(m.out, m.x1, m.w[0], m.K, m.cols, S, false, s)));
    const std::vector<float> one = Down(m.out, m.cols);
    if (std::memcmp(one.data(), all.data() + size_t(r) * m.cols, m.cols * 4) != 0) {
      std::printf("FAIL %s %s: row %d differs from the row alone\n", m.Tag(T).c_str(), what.c_str(), r);
      ++gFailures;
    }
  }
  if (err > 2e-6 && !(F & kHiOnly)) {
    std::printf("FAIL %s %s: error %.2e past 2e-6\n", m.Tag(T).c_str(), what.c_str(), err);
    ++gFailures;
  }
  const double us = PerLaunchUs(s, [&](int i) {
    CHECK((LaunchMma<kRegs, T, MT, DEPTH, F>(m.out, m.x, m.w[i % m.copies], m.K, m.cols, S, pdl, s)));
  });
  Record(m.Tag(T), what + " blocks " + std::to_string(m.cols / (16 * MT) * S) + (pdl ? " pdl" : ""), us,
         m.Bytes(), err);
}

// Every form must give the same bits at one S: a column's sum depends on K and S alone, not on
// the tile's width or whether its weights came through shared memory.
void SameAcrossForms(cudaStream_t s, const Shape& m, unsigned S) {
  std::vector<float> first;
  const auto check = [&](const char* what, auto launch) {
    m.Poison(s);
    CHECK(launch());
    const std::vector<float> got = Down(m.out, size_t(8) * m.cols);
    if (first.empty()) {
      first = got;
      return;
    }
    const bool same = std::memcmp(first.data(), got.data(), got.size() * 4) == 0;
    std::printf("%s %s S %u: %s %s the ring at CT 128\n", same ? "ok" : "FAIL", m.name.c_str(), S, what,
                same ? "bit-identical to" : "differs from");
    if (!same) ++gFailures;
  };
  check("ring ct 128", [&] { return LaunchMma<false, 8, 8, 2>(m.out, m.x, m.w[0], m.K, m.cols, S, false, s); });
  check("ring ct 64", [&] { return LaunchMma<false, 8, 4, 2>(m.out, m.x, m.w[0], m.K, m.cols, S, false, s); });
  check("regs ct 128", [&] { return LaunchMma<true, 8, 8, 1>(m.out, m.x, m.w[0], m.K, m.cols, S, false, s); });
  check("regs ct 64", [&] { return LaunchMma<true, 8, 4, 2>(m.out, m.x, m.w[0], m.K, m.cols, S, false, s); });
  check("ring ct 64 x-ring",
        [&] { return LaunchMma<false, 8, 4, 4, kXRing>(m.out, m.x, m.w[0], m.K, m.cols, S, false, s); });
  // Sixteen warps cut a slice into other warp partials: another order, so not compared.
}

template <int T>
void Sweep(cudaStream_t s, const Shape& m, unsigned S) {
  Production<T>(s, m, 0, true);
  TimeMma<false, T, 8, 4>(s, m, S, true);
  TimeMma<false, T, 4, 4>(s, m, S, true);
  TimeMma<false, T, 8, 4, kXRing>(s, m, S, true);
  TimeMma<false, T, 4, 4, kXRing>(s, m, S, true);
  TimeMma<false, T, 4, 8, kXRing>(s, m, S, true);
  TimeMma<false, T, 8, 4, kHiOnly>(s, m, S, true);
  TimeMma<false, T, 4, 4, kHiOnly>(s, m, S, true);
  TimeMma<false, T, 8, 2, kXRing | kWarps16>(s, m, S, true);
  TimeMma<false, T, 4, 4, kXRing | kWarps16>(s, m, S, true);
  TimeMma<false, T, 4, 2, kXRing | kWarps16>(s, m, S, true);
  TimeMma<true, T, 8, 2>(s, m, S, true);
}

}  // namespace

int main(int argc, char** argv) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const char* outPath = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--warm") == 0) {
      gWarm = true;
    } else {
      outPath = argv[i];
    }
  }
  gReadGBs = ReadFloorGBs(s, kLaunches, kReplays);
  if (!gWarm) {
    const Shape wq("Wq", 4096, 16384);
    SameAcrossForms(s, wq, 1);
    Sweep<1>(s, wq, 1);
    Sweep<4>(s, wq, 1);
    Sweep<8>(s, wq, 1);
  }
  {
    const Shape wo("Wo", 4096, 4096);
    SameAcrossForms(s, wo, 2);
    Sweep<1>(s, wo, 2);
    Sweep<4>(s, wo, 2);
    Sweep<8>(s, wo, 2);
  }
  gJson += "\n]\n";
  if (outPath) {
    FILE* f = std::fopen(outPath, "w");
    if (!f) {
      std::printf("FAIL cannot write %s\n", outPath);
      return 1;
    }
    std::fputs(gJson.c_str(), f);
    std::fclose(f);
  }
  std::printf(gFailures ? "FAIL %d checks\n" : "done\n", gFailures);
  return gFailures ? 1 : 0;
}
