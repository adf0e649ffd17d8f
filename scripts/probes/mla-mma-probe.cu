// The tiled attention's item on the tensor cores (cu/mla_tile_mma.cuh), alone, against the
// scalar item: mla_tiles in both forms, over the same grid and items, each finished by the
// production combine. Does the item stop being bound by its FMAs and shared-memory wavefronts?
//
// The mma form is not the model's element rule, so its u differs from the scalar form's in its
// last bits: the probe prints each form's error against an f64 reference at positions from 0 to
// 4095, checks that the mma form is deterministic and that a head slice (nh = 16 from head 16) has
// the full call's bits, poisons every output first, and then times the tile kernel alone and the
// whole attention (tile kernel and combine), programmatic dependent launch on, in graphs of 30
// launches. -DMEMRA_MLA_MMA_TERMS=1 times big*big alone (a diagnostic, not f32's accuracy).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. scripts/probes/mla-mma-probe.cu cu/model.cu \
//        cu/model_moe.cu cu/model_gemv.cu cu/model_latent_query.cu cu/model_experts.cu \
//        cu/model_norm_gemv.cu cu/model_weights.cu cu/model_attention_short.cu -o build/probes/mla-mma-probe
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cu/model_attention.cu"
#include "scripts/probes/probe_cuda.h"

namespace {

using mla_mma::kR;
using mla_mma::kTerms;

void AttentionMma(const MemraMlaArgs& a, cudaStream_t stream) {
  const Workspace ws = MakeWorkspace(a.work, a.t, a.nh, a.P, a.R);
  CHECK((LaunchTiles<true, true>(a, ws, stream)));
  CHECK(LaunchCombine<true>(a, ws, stream));
}

constexpr int kLaunches = 30;
constexpr int kReplays = 15;

template <class Body>
double PerLaunch(cudaStream_t s, Body body) {
  return GraphPerLaunchUs(s, body, kLaunches, kReplays);
}

float Bf16(uint16_t w) {
  const uint32_t bits = uint32_t(w) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// u of every head at position p in f64 (docs/model.md's two-pass softmax).
std::vector<double> ReferenceU(const std::vector<float>& cache, const std::vector<float>& q,
                               const std::vector<uint16_t>& wuv, uint32_t N, uint32_t Dv, int p) {
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

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  memra_model_set_pdl(1);
  const uint32_t N = 32, P = 4096, Dv = 128, half = N / 2;
  float* cache = DeviceRandoms(size_t(P) * kR, 0.5f, 11);
  float* q = DeviceRandoms(size_t(N) * kR, 1.0f, 12);
  uint16_t* wuv;
  CHECK(cudaMalloc(&wuv, size_t(N) * kR * Dv * 2));
  CHECK(memra_gen_weights(wuv, 7, 2, 0, 1, size_t(N) * kR * Dv, 0, size_t(N) * kR * Dv, 0, 0.044f, 0));
  const size_t uFloats = size_t(N) * Dv, workFloats = memra_mla_workspace_bytes(1, N, P, kR) / 4;
  float* u = DeviceFilled<float>(uFloats, 0);
  float* uh = DeviceFilled<float>(uFloats, 0);
  float* work = DeviceFilled<float>(workFloats, 0);
  float* workh = DeviceFilled<float>(workFloats, 0);
  int32_t* pos = DeviceFilled<int32_t>(1, 0);
  const MemraMlaArgs a{u, N * Dv, q, N * kR, cache, uint64_t(P) * kR, pos, wuv, work, 1, N, P, kR, Dv};
  // Heads 16..31 alone: a rank's slice, with its own workspace.
  const MemraMlaArgs ah{uh, N * Dv, q + half * kR, N * kR, cache, uint64_t(P) * kR, pos,
                        wuv + size_t(half) * kR * Dv, workh, 1, half, P, kR, Dv};

  std::vector<float> hc(size_t(P) * kR), hq(size_t(N) * kR);
  std::vector<uint16_t> hw(size_t(N) * kR * Dv);
  CHECK(cudaMemcpy(hc.data(), cache, hc.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hq.data(), q, hq.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hw.data(), wuv, hw.size() * 2, cudaMemcpyDeviceToHost));

  // u of one call, everything it writes poisoned (NaN) first.
  const auto run = [&](const MemraMlaArgs& x, size_t wf, bool mma) {
    CHECK(cudaMemset(x.u, 0xff, uFloats * 4));
    CHECK(cudaMemset(x.work, 0xff, wf * 4));
    if (mma) {
      AttentionMma(x, s);
    } else {
      CHECK(memra_mla_attention(&x, s));
    }
    CHECK(cudaStreamSynchronize(s));
    std::vector<float> out(uFloats);
    CHECK(cudaMemcpy(out.data(), x.u, uFloats * 4, cudaMemcpyDeviceToHost));
    return out;
  };
  bool ok = true;
  std::printf("terms %d; error: max |u - f64| / max |f64 u|\n", kTerms);
  for (int p : {0, 31, 32, 129, 1000, 1023, 2047, 3999, 4095}) {
    CHECK(cudaMemcpy(pos, &p, 4, cudaMemcpyHostToDevice));
    const std::vector<double> ref = ReferenceU(hc, hq, hw, N, Dv, p);
    const std::vector<float> base = run(a, workFloats, false), mma = run(a, workFloats, true);
    const std::vector<float> again = run(a, workFloats, true), slice = run(ah, workFloats, true);
    const bool same = std::memcmp(mma.data(), again.data(), uFloats * 4) == 0;
    const bool sliced = std::memcmp(mma.data() + half * Dv, slice.data(), half * Dv * 4) == 0;
    const double eb = Error(base, ref), em = Error(mma, ref);
    std::printf("position %4d: mla_tiles %.2e, mma %.2e; mma again %s; heads 16-31 alone %s\n", p, eb, em,
                same ? "the same bits" : "DIFFERENT", sliced ? "the same bits" : "DIFFERENT");
    ok = ok && same && sliced && (kTerms == 1 || em <= 4 * eb + 1e-7);
  }
  for (int p : {1023, 2047, 3999}) {
    CHECK(cudaMemcpy(pos, &p, 4, cudaMemcpyHostToDevice));
    const Workspace ws = MakeWorkspace(work, 1, N, P, kR);
    const double tiles = PerLaunch(s, [&] { CHECK(LaunchTiles<true>(a, ws, s)); });
    const double tilesMma = PerLaunch(s, [&] { CHECK((LaunchTiles<true, true>(a, ws, s))); });
    const double whole = PerLaunch(s, [&] { CHECK(memra_mla_attention(&a, s)); });
    const double wholeMma = PerLaunch(s, [&] { AttentionMma(a, s); });
    std::printf("position %4d: tile kernel %6.2f us, mma %6.2f; attention %6.2f us, mma %6.2f\n", p, tiles, tilesMma,
                whole, wholeMma);
  }
  std::printf(ok ? "done\n" : "FAIL: see DIFFERENT or the error above\n");
  return ok ? 0 : 1;
}
