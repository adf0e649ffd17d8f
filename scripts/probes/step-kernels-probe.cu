// The `bench` step's small and attention kernels at t = 1, each alone, timed from a CUDA graph of
// back-to-back launches (no timing event between two launches): what each costs the step, free
// of the decode bench kernel table's per-launch event overhead. The attention is timed at several
// positions, whole and as its two kernels (the tile kernel, mla_tiles, and the combine).
// `--once P` makes one attention call at position P and times nothing, for Nsight Compute
// (ncu --clock-control none -k regex:mla_ build/probes/step-kernels-probe --once 1023).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. scripts/probes/step-kernels-probe.cu cu/model.cu \
//        cu/model_moe.cu cu/model_gemv.cu cu/model_latent_query.cu cu/model_experts.cu \
//        cu/model_norm_gemv.cu cu/model_weights.cu cu/model_attention_short.cu -o build/probes/step-kernels-probe
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cu/model_attention.cu"
#include "scripts/probes/probe_cuda.h"

namespace {

float* Randoms(size_t n, float scale = 1.f) {
  return DeviceRandoms(n, scale, 3);
}

uint16_t* Weights(size_t elems, uint64_t id, float scale) {
  uint16_t* w;
  CHECK(cudaMalloc(&w, elems * 2));
  CHECK(memra_gen_weights(w, 7, id, 0, 1, elems, 0, elems, 0, scale, 0));
  return w;
}

template <class T>
T* Zeros(size_t n) {
  return DeviceFilled<T>(n, 0);
}

}  // namespace

int main(int argc, char** argv) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const uint32_t H = 4096, N = 32, R = 512, Dv = 128, P = 4096, E = 32, K = 8;
  float* cache = Randoms(size_t(P) * R, 0.5f);
  float* q = Randoms(size_t(N) * R);
  uint16_t* wuv = Weights(size_t(N) * R * Dv, 2, 0.044f);
  float* u = Zeros<float>(N * Dv);
  int32_t* pos = Zeros<int32_t>(8);
  float* work = Zeros<float>(memra_mla_workspace_bytes(1, N, P, R) / 4);
  MemraMlaArgs a{u, N * Dv, q, N * R, cache, uint64_t(P) * R, pos, wuv, work, 1, N, P, R, Dv};
  const Workspace ws = MakeWorkspace(work, 1, N, P, R);
  if (argc == 3 && std::string(argv[1]) == "--once") {
    const int p = std::atoi(argv[2]);
    CHECK(cudaMemcpy(pos, &p, 4, cudaMemcpyHostToDevice));
    CHECK(memra_mla_attention(&a, s));
    CHECK(cudaStreamSynchronize(s));
    std::printf("one attention call at position %d\n", p);
    return 0;
  }
  for (int p : {0, 15, 63, 1023, 3999}) {
    CHECK(cudaMemcpy(pos, &p, 4, cudaMemcpyHostToDevice));
    const double whole = GraphPerLaunchUs(s, [&] { CHECK(memra_mla_attention(&a, s)); });
    const double tiles = GraphPerLaunchUs(s, [&] { CHECK(LaunchTiles<true>(a, ws, s)); });
    const double comb = GraphPerLaunchUs(s, [&] { CHECK(LaunchCombine<true>(a, ws, s)); });
    std::printf("mla_attention at position %4d: %7.2f us (tile kernel %6.2f; combine %6.2f)\n", p, whole, tiles,
                comb);
  }
  // The MoE head and the norms.
  float* h = Randoms(H, 2.f);
  float* b = Zeros<float>(H);
  uint16_t* g = Weights(H, 3, 0.1f);
  const double norm = GraphPerLaunchUs(s, [&] { CHECK(memra_rmsnorm(b, h, g, 1, H, s)); });
  float* logits = Randoms(E);
  int32_t* ids = Zeros<int32_t>(K);
  float* wts = Zeros<float>(K);
  uint8_t* xq = Zeros<uint8_t>(H);
  float* xs = Zeros<float>(H / 128);
  float* xd = Zeros<float>(H);
  const double rq =
      GraphPerLaunchUs(s, [&] { CHECK(memra_route_quant(ids, wts, logits, xq, xs, xd, h, 1, E, K, H, s)); });
  const double router = GraphPerLaunchUs(s, [&] { CHECK(memra_router(ids, wts, logits, 1, E, K, s)); });
  const double quant = GraphPerLaunchUs(s, [&] { CHECK(memra_quantize(xq, xs, h, 1, H, s)); });
  uint16_t* wr = Weights(size_t(H) * E, 4, 0.015f);
  const double wr8 = GraphPerLaunchUs(s, [&] { CHECK(memra_gemv(logits, E, h, H, wr, E, H, E, 1, 0, 8, s)); });
  const double normWr = GraphPerLaunchUs(s, [&] { CHECK(memra_norm_gemv(b, logits, E, h, g, wr, E, H, E, 1, s)); });
  float* contrib = Randoms(size_t(K) * H);
  const double comb =
      GraphPerLaunchUs(s, [&] { CHECK(memra_moe_combine(h, wts, ids, contrib, contrib, E, 1, K, H, s)); });
  const int32_t one[1] = {7};
  const double empty = GraphPerLaunchUs(s, [&] { CHECK(memra_set_i32(pos + 4, 1, one, s)); });
  std::printf("rmsnorm %.2f us; route_quant %.2f (router %.2f, quantize %.2f); gemv Wr split 8 %.2f; "
              "rmsnorm and gemv Wr in one launch %.2f; moe_combine %.2f; set_i32 (a launch) %.2f\n",
              norm, rq, router, quant, wr8, normWr, comb, empty);
  std::printf("done\n");
  return 0;
}
