// The tiled attention's item on the tensor cores (cu/mla_tile_mma.cuh), alone, against the
// scalar item: mla_tiles in both forms, over the same grid and items, each finished by the
// production combine. Does the item stop being bound by its FMAs and shared-memory wavefronts?
//
// The mma form rounds in the tensor cores' order, so its u differs from the scalar form's in its
// last bits: the probe prints each form's error against an f64 reference at positions from 0 to
// 4095 and checks that the mma form is deterministic, that a head slice (nh = 16 from head 16) has
// the full call's bits, and that each row of a t = 2 call (where a block takes two items) has the
// bits of that row alone; every output is poisoned first (NaN), and for the mma form every SM's
// shared memory too. Then it times the tile kernel alone and the whole attention (tile kernel and
// combine), programmatic dependent launch on, in graphs of 30 launches. -DMEMRA_MLA_MMA_TERMS=1
// times big*big alone (a diagnostic, not f32's accuracy). `--once P` makes one mma attention call
// at position P and times nothing, for Nsight Compute (ncu --clock-control none -k regex:mla_tiles
// build/probes/mla-mma-probe --once 3999).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. scripts/probes/mla-mma-probe.cu cu/model.cu \
//        cu/model_moe.cu cu/model_gemv.cu cu/model_latent_query.cu cu/model_experts.cu \
//        cu/model_norm_gemv.cu cu/model_weights.cu cu/model_attention_short.cu -o build/probes/mla-mma-probe
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

// mla_tiles<kVec, true> takes the tensor cores' item from this many positions: here every row.
#define MEMRA_MLA_MMA_FROM 1
#include "cu/model_attention.cu"
#include "scripts/probes/probe_cuda.h"

namespace {

using mla_mma::kR;
using mla_mma::kTerms;

// The tiled attention with its f32 item, or with the tensor cores' (memra_mla_attention would take
// the tensor cores' too: this probe's MEMRA_MLA_MMA_FROM is 1).
template <bool kMma>
void Attention(const MemraMlaArgs& a, cudaStream_t stream) {
  const Workspace ws = MakeWorkspace(a.work, a.t, a.nh, a.P, a.R);
  CHECK((LaunchTiles<true, kMma>(a, ws, stream)));
  CHECK(LaunchCombine<true>(a, ws, stream));
}

float Bf16(uint16_t w) {
  const uint32_t bits = uint32_t(w) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// u of every head at position p in f64 (docs/model.md's two-pass softmax), over one slot's cache
// rows and one row's queries (host copies).
std::vector<double> ReferenceU(const float* cache, const float* q, const std::vector<uint16_t>& wuv, uint32_t N,
                               uint32_t Dv, int p) {
  std::vector<double> u(size_t(N) * Dv), sc(p + 1), o(kR);
  for (uint32_t n = 0; n < N; ++n) {
    double mx = -INFINITY;
    for (int j = 0; j <= p; ++j) {
      double d = 0;
      for (uint32_t r = 0; r < kR; ++r) d += double(q[n * kR + r]) * cache[size_t(j) * kR + r];
      sc[j] = d / std::sqrt(double(kR));
      mx = std::max(mx, sc[j]);
    }
    double sum = 0;
    for (int j = 0; j <= p; ++j) sum += sc[j] = std::exp(sc[j] - mx);
    std::fill(o.begin(), o.end(), 0.0);
    for (int j = 0; j <= p; ++j) {
      for (uint32_t r = 0; r < kR; ++r) o[r] += sc[j] / sum * cache[size_t(j) * kR + r];
    }
    for (uint32_t d = 0; d < Dv; ++d) {
      double v = 0;
      for (uint32_t r = 0; r < kR; ++r) v += o[r] * Bf16(wuv[(size_t(n) * kR + r) * Dv + d]);
      u[n * Dv + d] = v;
    }
  }
  return u;
}

// Every SM's shared memory full of NaN before a run, so that an item reading a word it did not
// write is likely to show it (nothing clears shared memory between kernels, nor promises not to).
__global__ void PoisonShared(uint32_t floats) {
  extern __shared__ float sm[];
  for (uint32_t i = threadIdx.x; i < floats; i += blockDim.x) sm[i] = __int_as_float(0x7fffffff);
}

void PoisonAllShared(cudaStream_t s) {
  int dev = 0, optin = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaFuncSetAttribute(PoisonShared, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  PoisonShared<<<2 * sms, 1024, optin, s>>>(uint32_t(optin) / 4);
  CHECK(cudaGetLastError());
}

// max |u - ref| over max |ref|.
double Error(const std::vector<float>& u, const std::vector<double>& ref) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(u[i])) return INFINITY;
    worst = std::max(worst, std::fabs(u[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return worst / scale;
}

}  // namespace

int main(int argc, char** argv) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  memra_model_set_pdl(1);
  const uint32_t N = 32, P = 4096, Dv = 128, half = N / 2;
  // Two slots of cache and two rows of queries, every value drawn.
  float* cache = DeviceRandoms(2 * size_t(P) * kR, 0.5f, 11);
  float* q = DeviceRandoms(2 * size_t(N) * kR, 1.0f, 12);
  uint16_t* wuv;
  CHECK(cudaMalloc(&wuv, size_t(N) * kR * Dv * 2));
  CHECK(memra_gen_weights(wuv, 7, 2, 0, 1, size_t(N) * kR * Dv, 0, size_t(N) * kR * Dv, 0, 0.044f, 0));
  const size_t rowFloats = size_t(N) * Dv, workFloats = memra_mla_workspace_bytes(2, N, P, kR) / 4;
  float* u = DeviceFilled<float>(2 * rowFloats, 0);
  float* work = DeviceFilled<float>(workFloats, 0);
  int32_t* pos = DeviceFilled<int32_t>(2, 0);
  // t rows from `row` (slot and query row alike) for nh heads from head h0, each call its own
  // workspace use (the buffers are sized for two rows of every head).
  const auto args = [&](uint32_t t, uint32_t row, uint32_t h0, uint32_t nh) {
    return MemraMlaArgs{u, rowFloats, q + size_t(row) * N * kR + size_t(h0) * kR, size_t(N) * kR,
                        cache + size_t(row) * P * kR, uint64_t(P) * kR, pos + row, wuv + size_t(h0) * kR * Dv,
                        work, t, nh, P, kR, Dv};
  };
  const MemraMlaArgs a = args(1, 0, 0, N);

  std::vector<float> hc(2 * size_t(P) * kR), hq(2 * size_t(N) * kR);
  std::vector<uint16_t> hw(size_t(N) * kR * Dv);
  CHECK(cudaMemcpy(hc.data(), cache, hc.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hq.data(), q, hq.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hw.data(), wuv, hw.size() * 2, cudaMemcpyDeviceToHost));

  // u of one call's rows, everything it writes poisoned (NaN) first, and for the mma form every
  // SM's shared memory too.
  const auto run = [&](const MemraMlaArgs& x, bool mma) {
    CHECK(cudaMemset(u, 0xff, 2 * rowFloats * 4));
    CHECK(cudaMemset(work, 0xff, workFloats * 4));
    if (mma) {
      PoisonAllShared(s);
      Attention<true>(x, s);
    } else {
      Attention<false>(x, s);
    }
    CHECK(cudaStreamSynchronize(s));
    std::vector<float> out(x.t * rowFloats);
    CHECK(cudaMemcpy(out.data(), u, out.size() * 4, cudaMemcpyDeviceToHost));
    return out;
  };
  const auto setPos = [&](int p0, int p1) {
    const int32_t ps[2] = {p0, p1};
    CHECK(cudaMemcpy(pos, ps, 8, cudaMemcpyHostToDevice));
  };
  if (argc == 3 && std::string(argv[1]) == "--once") {
    setPos(std::atoi(argv[2]), 0);
    Attention<true>(a, s);
    CHECK(cudaStreamSynchronize(s));
    std::printf("one mma attention call at position %s\n", argv[2]);
    return 0;
  }
  const auto same = [](const float* x, const float* y, size_t n) { return std::memcmp(x, y, n * 4) == 0; };
  const auto word = [](bool b) { return b ? "the same bits" : "DIFFERENT"; };
  // The mma form's error bound: f32's own (the scalar form's) four times over, or 1e-6 of u.
  const auto close = [](double em, double eb) {
    return std::isfinite(eb) && (kTerms == 1 || em <= std::max(4 * eb, 1e-6));
  };
  bool ok = true;
  std::printf("terms %d; error: max |u - f64| / max |f64 u|\n", kTerms);
  for (int p : {0, 31, 32, 129, 1000, 1023, 2047, 3999, 4095}) {
    setPos(p, 0);
    const std::vector<double> ref = ReferenceU(hc.data(), hq.data(), hw, N, Dv, p);
    const std::vector<float> base = run(a, false), mma = run(a, true), again = run(a, true);
    const std::vector<float> slice = run(args(1, 0, half, half), true);
    const bool det = same(mma.data(), again.data(), rowFloats);
    const bool sliced = same(mma.data() + half * Dv, slice.data(), half * Dv);
    const double eb = Error(base, ref), em = Error(mma, ref);
    std::printf("position %4d: mla_tiles %.2e, mma %.2e; mma again %s; heads 16-31 alone %s\n", p, eb, em,
                word(det), word(sliced));
    ok = ok && det && sliced && close(em, eb);
  }
  // Two rows: at t = 2 a row's grid is half the SMs, so a block takes two items at position 4095.
  for (const auto& pp : {std::pair<int, int>{4095, 1000}, std::pair<int, int>{3999, 31}}) {
    setPos(pp.first, pp.second);
    for (const bool mma : {false, true}) {
      const std::vector<float> two = run(args(2, 0, 0, N), mma), r0 = run(args(1, 0, 0, N), mma);
      const std::vector<float> r1 = run(args(1, 1, 0, N), mma);
      const bool rows = same(two.data(), r0.data(), rowFloats) && same(two.data() + rowFloats, r1.data(), rowFloats);
      const std::vector<double> ref1 = ReferenceU(hc.data() + size_t(P) * kR, hq.data() + size_t(N) * kR, hw, N, Dv,
                                                  pp.second);
      const double e1 = Error(std::vector<float>(two.begin() + rowFloats, two.end()), ref1);
      std::printf("t = 2 at positions %d and %d, %s: each row against t = 1 %s; row 1's error %.2e\n", pp.first,
                  pp.second, mma ? "mma" : "mla_tiles", word(rows), e1);
      ok = ok && rows && std::isfinite(e1);
    }
  }
  for (int p : {1023, 2047, 3999}) {
    setPos(p, 0);
    const Workspace ws = MakeWorkspace(work, 1, N, P, kR);
    const double tiles = GraphPerLaunchUs(s, [&] { CHECK(LaunchTiles<true>(a, ws, s)); });
    const double tilesMma = GraphPerLaunchUs(s, [&] { CHECK((LaunchTiles<true, true>(a, ws, s))); });
    const double whole = GraphPerLaunchUs(s, [&] { Attention<false>(a, s); });
    const double wholeMma = GraphPerLaunchUs(s, [&] { Attention<true>(a, s); });
    std::printf("position %4d: tile kernel %6.2f us, mma %6.2f; attention %6.2f us, mma %6.2f\n", p, tiles, tilesMma,
                whole, wholeMma);
  }
  std::printf(ok ? "done\n" : "FAIL: see DIFFERENT or the error above\n");
  return ok ? 0 : 1;
}
