// The matrix products of a `bench` step, each shape timed under every way memra's gemv kernels
// can lay it out: the K split (blocks a column tile's rows are cut over; it fixes the sum order,
// so the production kernels tie it to the matrix) and the columns a thread owns (CW). Each
// variant is checked against the production launch (relative L2 within 1e-5: another split sums
// in another order) and timed from a CUDA graph of back-to-back launches over rotating copies of
// the weights, so no launch finds its matrix in L2. The read floor of the same card is measured
// first. Prints one line a variant and the best a shape; writes them as JSON to argv[1]. With
// `batch` after it, only the production layouts under other batches of loads a thread (U).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. scripts/probes/gemv-sweep.cu cu/model.cu cu/read_floor.cu \
//        cu/model_weights.cu -o build/gemv-sweep && build/gemv-sweep out.json
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cu/model_experts.cu"
#include "cu/model_gemv.cu"
#include "cu/kernels.h"
#include "scripts/probes/probe_cuda.h"
#include "scripts/probes/read_floor.h"

namespace {

constexpr int kLaunches = 20;  // a graph's back-to-back launches
constexpr int kReplays = 15;

float gReadGBs = 0;
std::string gJson = "[";

struct Timer {
  // Median device µs a launch of `body` (which enqueues kLaunches launches on s).
  template <class Body>
  double PerLaunch(cudaStream_t s, Body body) {
    return GraphReplayUs(s, body, body, kReplays) / kLaunches;
  }
};

uint16_t* Weights(size_t elems, uint64_t id) {
  uint16_t* w;
  CHECK(cudaMalloc(&w, elems * 2));
  CHECK(memra_gen_weights(w, 7, id, 0, 1, elems, 0, elems, 0, 0.02f, 0));
  return w;
}

float* Randoms(size_t n, uint32_t seed) {
  return DeviceRandoms(n, 1.f, seed);
}

std::vector<float> Down(const float* d, size_t n) {
  // The launches run on a non-blocking stream, which a plain cudaMemcpy does not wait for.
  CHECK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return h;
}

double RelL2(const std::vector<float>& x, const std::vector<float>& ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += double(x[i] - ref[i]) * (x[i] - ref[i]);
    r += double(ref[i]) * ref[i];
  }
  return std::sqrt(e / (r > 0 ? r : 1));
}

void Record(const std::string& shape, const std::string& variant, double us, double bytes, double err) {
  const double gbs = bytes / (us * 1e3);
  std::printf("%-28s %-22s %9.2f us %7.0f GB/s %5.1f%% of floor  err %.1e\n", shape.c_str(), variant.c_str(),
              us, gbs, 100 * gbs / gReadGBs, err);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s{\"shape\":\"%s\",\"variant\":\"%s\",\"us\":%.3f,\"gbps\":%.1f,\"pctFloor\":%.2f,\"relL2\":%.2e}",
                gJson.size() > 1 ? ",\n" : "\n", shape.c_str(), variant.c_str(), us, gbs, 100 * gbs / gReadGBs, err);
  gJson += buf;
}

// A matrix [K x cols] in enough copies that no launch of a graph finds its weights in L2, x for T
// rows, and the production launch's output as the reference.
struct GemvShape {
  uint32_t K, cols;
  int copies;
  std::vector<uint16_t*> w;
  float *x, *out, *ref;
  std::vector<float> want;
  std::string shape;
  double bytes;

  GemvShape(cudaStream_t s, const char* name, uint32_t K_, uint32_t cols_, uint32_t T) : K(K_), cols(cols_) {
    const size_t elems = size_t(K) * cols;
    copies = std::max<int>(2, int((size_t(512) << 20) / (elems * 2)) + 1);
    for (int c = 0; c < copies; ++c) w.push_back(Weights(elems, 100 + c));
    x = Randoms(size_t(T) * K, 1);
    CHECK(cudaMalloc(&out, size_t(T) * cols * 4));
    CHECK(cudaMalloc(&ref, size_t(T) * cols * 4));
    shape = std::string(name) + " " + std::to_string(K) + "x" + std::to_string(cols) + " t" + std::to_string(T);
    bytes = double(elems) * 2;
    CHECK(memra_gemv(ref, cols, x, K, w[0], cols, K, cols, T, 0, 0, s));
    want = Down(ref, size_t(T) * cols);
  }
  GemvArgs Args(int copy) const { return GemvArgs{out, cols, x, K, w[copy % copies], cols, K, cols}; }
  ~GemvShape() {
    for (auto p : w) CHECK(cudaFree(p));
    CHECK(cudaFree(x));
    CHECK(cudaFree(out));
    CHECK(cudaFree(ref));
  }
};

// One launcher under test on m: checked against the production output, then timed.
template <int T, class Launch>
void TimeGemv(cudaStream_t s, Timer& tm, const GemvShape& m, const std::string& variant, Launch launch) {
  CHECK(launch(m.Args(0)));
  CHECK(cudaStreamSynchronize(s));
  const double err = RelL2(Down(m.out, size_t(T) * m.cols), m.want);
  const double us = tm.PerLaunch(s, [&] {
    for (int i = 0; i < kLaunches; ++i) CHECK(launch(m.Args(i)));
  });
  Record(m.shape, variant, us, m.bytes, err);
}

// One matrix [K x cols] at T rows: the production launch, then every split and CW.
template <int T>
void SweepGemv(cudaStream_t s, Timer& tm, const char* name, uint32_t K, uint32_t cols) {
  const GemvShape m(s, name, K, cols, T);
  const double prod = tm.PerLaunch(s, [&] {
    for (int i = 0; i < kLaunches; ++i) {
      const GemvArgs a = m.Args(i);
      CHECK(memra_gemv(a.out, cols, a.x, K, a.W, cols, K, cols, T, 0, 0, s));
    }
  });
  Record(m.shape, "production (split " + std::to_string(Split(K)) + ")", prod, m.bytes, 0);
  for (unsigned split : {1u, 2u, 3u, 4u, 6u, 8u}) {
    auto run = [&](auto cwTag) {
      constexpr int CW = decltype(cwTag)::value;
      if constexpr (CwMax(T, 1) >= CW) {
        TimeGemv<T>(s, tm, m, "split " + std::to_string(split) + " cw " + std::to_string(CW) + " blocks " +
                                  std::to_string(Tiles(cols, CW) * split),
                    [&](const GemvArgs& a) { return GemvLaunch<T, CW>(a, true, split, s); });
      }
    };
    run(std::integral_constant<int, 8>{});
    run(std::integral_constant<int, 4>{});
    run(std::integral_constant<int, 2>{});
  }
}

// One matrix at T = 1 under one split and CW, with U chunks a thread loaded before their FMAs
// (kBatchChunks in production): how much a thread's weights in flight is worth.
template <int CW, unsigned... Us>
void SweepBatch(cudaStream_t s, Timer& tm, const char* name, uint32_t K, uint32_t cols, unsigned split) {
  const GemvShape m(s, name, K, cols, 1);
  auto run = [&](auto uTag) {
    constexpr unsigned U = decltype(uTag)::value;
    TimeGemv<1>(s, tm, m, "split " + std::to_string(split) + " cw " + std::to_string(CW) + " U " +
                              std::to_string(U) + (U == kBatchChunks<CW, 1, 1> ? " (production U)" : ""),
                [&](const GemvArgs& a) { return GemvLaunch<1, CW, false, U>(a, true, split, s); });
  };
  (run(std::integral_constant<unsigned, Us>{}), ...);
}

// The experts of one layer at t rows of K slots over nE experts: ids drawn as a router would
// (K distinct a row), the buffers, and the production launches' outputs as references.
struct ExpertLayer {
  uint32_t t, nE, K, H, F;
  uint16_t *w1, *w3, *w2;
  int32_t* ip;
  float *xd, *act, *con, *actRef, *conRef;
  unsigned* sync;  // the experts' sync words (cu/model.h)
  std::vector<float> wantA, wantC;
  std::string tag;
  double upBytes, downBytes;
  unsigned slots, groups;

  ExpertLayer(cudaStream_t s, uint32_t t_, uint32_t nE_, uint32_t K_, uint32_t H_, uint32_t F_)
      : t(t_), nE(nE_), K(K_), H(H_), F(F_) {
    w1 = Weights(size_t(nE) * H * F, 200);
    w3 = Weights(size_t(nE) * H * F, 201);
    w2 = Weights(size_t(nE) * F * H, 202);
    std::vector<int32_t> ids(t * K);
    std::mt19937 g(5);
    for (uint32_t r = 0; r < t; ++r) {
      std::vector<int> pool(nE);
      for (uint32_t e = 0; e < nE; ++e) pool[e] = int(e);
      std::shuffle(pool.begin(), pool.end(), g);
      for (uint32_t k = 0; k < K; ++k) ids[r * K + k] = pool[k];
    }
    std::vector<int32_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    const size_t used = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
    CHECK(cudaMalloc(&ip, ids.size() * 4));
    CHECK(cudaMemcpy(ip, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    xd = Randoms(size_t(t) * H, 2);
    CHECK(cudaMalloc(&act, size_t(t) * K * F * 4));
    CHECK(cudaMalloc(&con, size_t(t) * K * H * 4));
    CHECK(cudaMalloc(&actRef, size_t(t) * K * F * 4));
    CHECK(cudaMalloc(&conRef, size_t(t) * K * H * 4));
    CHECK(cudaMalloc(&sync, MEMRA_EXPERT_SYNC_BYTES));
    CHECK(cudaMemset(sync, 0, MEMRA_EXPERT_SYNC_BYTES));
    CHECK(memra_expert_up(actRef, xd, ip, w1, w3, 0, nE, t, K, H, F, sync, s));
    CHECK(memra_expert_down(conRef, actRef, ip, w2, 0, nE, t, K, H, F, sync, s));
    wantA = Down(actRef, size_t(t) * K * F);
    wantC = Down(conRef, size_t(t) * K * H);
    tag = " t" + std::to_string(t) + " nE" + std::to_string(nE) + " (" + std::to_string(used) + " used)";
    upBytes = double(used) * 2 * H * F * 2;
    downBytes = double(used) * F * H * 2;
    slots = t * K;
    groups = std::min<unsigned>(slots, nE);
  }
  ExpertUpArgs UpArgs() const { return ExpertUpArgs{act, xd, ip, w1, w3, 0, nE, K, H, F, sync}; }
  ExpertDownArgs DownArgs() const { return ExpertDownArgs{con, actRef, ip, w2, 0, nE, K, H, F, sync}; }
  // Either half timed alone, launch after launch: expert_down finds every group marked ready, as
  // its expert_up would have left it, and expert_up none (each launch's last block of a group
  // clears or sets the mark). A memset each launch.
  void Ready(cudaStream_t s, bool ready) const {
    CHECK(cudaMemsetAsync(sync + MEMRA_EXPERT_SYNC_GROUPS, ready ? 0xff : 0, MEMRA_EXPERT_SYNC_GROUPS * 4, s));
  }
  ~ExpertLayer() {
    for (void* p : {(void*)w1, (void*)w3, (void*)w2, (void*)ip, (void*)xd, (void*)act, (void*)con, (void*)actRef,
                    (void*)conRef, (void*)sync})
      CHECK(cudaFree(p));
  }
};

// One launcher of either half under test on L: checked against the production output, then timed.
template <class Launch>
void TimeExperts(cudaStream_t s, Timer& tm, const ExpertLayer& L, bool up, const std::string& variant,
                 Launch launch) {
  const auto once = [&] {
    if (L.t > 2) L.Ready(s, !up);
    return launch();
  };
  CHECK(once());
  CHECK(cudaStreamSynchronize(s));
  const double err = up ? RelL2(Down(L.act, size_t(L.t) * L.K * L.F), L.wantA)
                        : RelL2(Down(L.con, size_t(L.t) * L.K * L.H), L.wantC);
  const double us = tm.PerLaunch(s, [&] {
    for (int i = 0; i < kLaunches; ++i) CHECK(once());
  });
  Record((up ? "expert_up" : "expert_down") + L.tag, variant, us, up ? L.upBytes : L.downBytes, err);
}

// The grouped launches of one layer under every split and CW, passes of TR rows.
template <int TR>
void SweepExperts(cudaStream_t s, Timer& tm, uint32_t t, uint32_t nE, uint32_t K, uint32_t H, uint32_t F) {
  const ExpertLayer L(s, t, nE, K, H, F);
  const ExpertUpArgs up = L.UpArgs();
  const ExpertDownArgs down = L.DownArgs();
  TimeExperts(s, tm, L, true, "production", [&] {
    return memra_expert_up(up.act, up.xd, up.ids, up.w1, up.w3, 0, nE, t, K, H, F, L.sync, s);
  });
  TimeExperts(s, tm, L, false, "production", [&] {
    return memra_expert_down(down.contrib, down.act, down.ids, down.w2, 0, nE, t, K, H, F, L.sync, s);
  });
  for (unsigned split : {1u, 2u, 3u, 4u, 6u, 8u}) {
    auto run = [&](auto cwTag) {
      constexpr int CW = decltype(cwTag)::value;
      const std::string variant = "split " + std::to_string(split) + " cw " + std::to_string(CW);
      if constexpr (CwMax(TR, 2) >= CW) {
        TimeExperts(s, tm, L, true, variant,
                    [&] { return ExpertUpLaunch<TR, CW>(up, true, L.slots, L.groups, split, s); });
      }
      if constexpr (CwMax(TR, 1) >= CW) {
        TimeExperts(s, tm, L, false, variant,
                    [&] { return ExpertDownLaunch<TR, CW>(down, true, L.slots, L.groups, split, s); });
      }
    };
    run(std::integral_constant<int, 8>{});
    run(std::integral_constant<int, 4>{});
    run(std::integral_constant<int, 2>{});
  }
}

// Both halves at the production split and CW (CWU, CWD) of passes of TR rows, under U chunks a
// thread loads before their FMAs.
template <int TR, int CWU, int CWD, unsigned... Us>
void SweepExpertBatch(cudaStream_t s, Timer& tm, uint32_t t, uint32_t nE, uint32_t K, uint32_t H, uint32_t F) {
  const ExpertLayer L(s, t, nE, K, H, F);
  const ExpertUpArgs up = L.UpArgs();
  const ExpertDownArgs down = L.DownArgs();
  const unsigned upSplit = Split(H, kExpertUpRows), downSplit = Split(F);
  auto run = [&](auto uTag) {
    constexpr unsigned U = decltype(uTag)::value;
    const std::string u = " U " + std::to_string(U);
    TimeExperts(s, tm, L, true, "cw " + std::to_string(CWU) + u +
                                    (U == kExpertUpBatch<CWU, TR> ? " (production U)" : ""),
                [&] { return ExpertUpLaunch<TR, CWU, U>(up, true, L.slots, L.groups, upSplit, s); });
    TimeExperts(s, tm, L, false, "cw " + std::to_string(CWD) + u +
                                     (U == kBatchChunks<CWD, 1, TR> ? " (production U)" : ""),
                [&] { return ExpertDownLaunch<TR, CWD, U>(down, true, L.slots, L.groups, downSplit, s); });
  };
  (run(std::integral_constant<unsigned, Us>{}), ...);
}

// Every split and CW of bench's products and experts.
void SweepLayouts(cudaStream_t s, Timer& tm) {
  SweepGemv<1>(s, tm, "Wq", 4096, 16384);
  SweepGemv<1>(s, tm, "Wq half", 4096, 8192);
  SweepGemv<1>(s, tm, "Wo", 4096, 4096);
  SweepGemv<1>(s, tm, "Wo half", 4096, 2048);
  SweepGemv<1>(s, tm, "Wdkv", 4096, 512);
  SweepGemv<1>(s, tm, "Wr", 4096, 32);
  SweepGemv<1>(s, tm, "Wvocab", 4096, 32768);
  SweepGemv<8>(s, tm, "Wq", 4096, 16384);
  SweepGemv<8>(s, tm, "Wo", 4096, 4096);
  SweepExperts<1>(s, tm, 1, 32, 8, 4096, 1536);
  SweepExperts<1>(s, tm, 1, 16, 8, 4096, 1536);
  SweepExperts<2>(s, tm, 8, 32, 8, 4096, 1536);
  SweepExperts<4>(s, tm, 8, 32, 8, 4096, 1536);
  SweepExperts<4>(s, tm, 4, 32, 8, 4096, 1536);
}

// The production layouts of bench's products, and Wo's others, under other batches.
void SweepBatches(cudaStream_t s, Timer& tm) {
  SweepBatch<2, 4, 8, 16, 24>(s, tm, "Wo", 4096, 4096, 2);
  SweepBatch<4, 2, 4, 8, 12>(s, tm, "Wo", 4096, 4096, 4);
  SweepBatch<8, 2, 4, 8>(s, tm, "Wo", 4096, 4096, 8);
  SweepBatch<8, 2, 4, 6, 8>(s, tm, "Wq", 4096, 16384, 2);
  SweepBatch<8, 2, 4, 8>(s, tm, "Wvocab", 4096, 32768, 2);
  SweepBatch<2, 4, 8, 16>(s, tm, "Wr", 4096, 32, 8);
  SweepExpertBatch<1, 4, 8, 1, 2, 4, 6>(s, tm, 1, 32, 8, 4096, 1536);
  SweepExpertBatch<4, 4, 8, 1, 2, 3>(s, tm, 8, 32, 8, 4096, 1536);
  SweepExpertBatch<4, 4, 8, 1, 2, 3>(s, tm, 4, 32, 8, 4096, 1536);
  SweepExpertBatch<2, 8, 8, 1, 2>(s, tm, 2, 32, 8, 4096, 1536);
}

}  // namespace

int main(int argc, char** argv) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer tm;
  gReadGBs = ReadFloorGBs(s, kLaunches, kReplays);
  if (argc > 2 && std::string(argv[2]) == "batch") {
    SweepBatches(s, tm);
  } else {
    SweepLayouts(s, tm);
  }
  gJson += "\n]\n";
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (!f) { std::printf("FAIL cannot write %s\n", argv[1]); return 1; }
    std::fputs(gJson.c_str(), f);
    std::fclose(f);
  }
  std::printf("done\n");
  return 0;
}
