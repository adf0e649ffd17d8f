// Where a step's time goes under programmatic dependent launch: `bench`'s 30 layers at t rows as
// the unsharded walk launches them (latent_query, the attention, Wo with the residual, the MoE
// norm with the router's product, route_quant, the two expert halves, the merge with the next
// norm), captured into one CUDA graph with PDL on, as the step graph is, and replayed. Built with
// -DMEMRA_TRACE, every block of those kernels records when it became resident, when its first
// PdlWait returned and when it left (cu/trace.cuh), and the probe prints each kernel's share of
// the chain: `span`, from its wait's release to the next kernel's (what the step pays for it),
// split into `body` (release to its last block's exit) and `gap` (that exit to the next
// release: the completion, the flush and the next grid's release), and `lead`, how long its
// first block was resident before the release. Built without it, the same chain's replay time
// shows what the records cost.
//
// --noop and --leave-out take kernels out of the chain (attention, wo, norm_gemv, route_quant,
// merge; a comma list) to bound what shortening them could give: --noop launches in each one's
// place a block that only waits for the kernel ahead and lets the next one start (its boundary
// kept, its work gone), --leave-out launches nothing (both gone). Timing only: the step is
// captured after one whole step, so what a missing kernel would write is that step's, finite, but
// the digest is another. The trace's grouping expects the whole chain, so take them out untraced.
//
// --prefetch MB asks L2 for MB of the next layer's Wq from row --prefetch-row (default 512, past
// the batch latent_query loads before its wait) while the router runs, the one stretch of a layer
// where no kernel knows which weights come next and HBM idles: a block of one warp on a side
// branch of the graph that starts as Wo ends, 32 KB a lane and --pace NS between a warp's rounds
// (1 MB each), with L2's evict_last priority against the experts' evict-first stream. The same
// values; timing only. --persist MB sets aside MB of L2 for persisting (evict_last) lines
// (cudaLimitPersistingL2CacheSize, 0 by default), where such lines have first claim.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -DMEMRA_TRACE -I. scripts/probes/step-timeline-probe.cu \
//        cu/model.cu cu/model_moe.cu cu/model_gemv.cu cu/model_latent_query.cu cu/model_experts.cu \
//        cu/model_norm_gemv.cu cu/model_weights.cu cu/model_attention.cu cu/model_attention_short.cu \
//        -o build/probes/step-timeline-probe
//   build/probes/step-timeline-probe [--cases T:POS,T:POS,...] [--replays N] [--pdl 0] [--wo-split S]
//                                    [--noop K,K,...] [--leave-out K,K,...]
//                                    [--prefetch MB [--pace NS] [--prefetch-row ROW]] [--persist MB]
//                                    [--eager 1|2]
//   (default 1:16; --wo-split: the split of Wo's K rows, memra_gemv's `split`, 0 for its default)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cu/globaltimer.cuh"
#include "cu/model.h"
#include "cu/pdl.cuh"
#include "cu/trace.cuh"
#include "scripts/probes/probe_cuda.h"

#ifdef MEMRA_TRACE
// Every translation unit's trace symbols (cu/trace.cuh), registered before main.
struct TraceUnit {
  const void *records, *capacity, *count;
  MemraTraceRecord* buffer;
};
std::vector<TraceUnit>& TraceUnits() {
  static std::vector<TraceUnit> units;
  return units;
}
void MemraTraceRegister(const void* records, const void* capacity, const void* count) {
  TraceUnits().push_back({records, capacity, count, nullptr});
}
#endif

namespace {

constexpr uint32_t H = 4096, N = 32, R = 512, Dv = 128, E = 32, K = 8, F = 1536, P = 4096, L = 30;

struct Layer {
  uint16_t *wq, *wuv, *wdkv, *wo, *wr, *w1, *w3, *w2, *g1, *g2;
};

uint16_t* Tensor(uint64_t elems, uint32_t l, uint32_t slot, float fanIn, int kind) {
  uint16_t* w;
  CHECK(cudaMalloc(&w, elems * 2));
  const float scale = fanIn > 0 ? float(1.0 / std::sqrt(double(fanIn))) : 0.f;
  CHECK(memra_gen_weights(w, 0, 16ull * l + slot, 0, 1, elems, 0, elems, kind, scale, 0));
  return w;
}

// n floats in [-scale, scale): a million random ones, repeated (the cache is 2 GB at eight rows).
float* Randoms(size_t n, float scale) {
  return DeviceRandoms(n, scale, 11, size_t(1) << 20);
}

// Every byte 0xff: NaN where nothing writes.
template <class T>
T* Buffer(size_t n) {
  return DeviceFilled<T>(n, 0xff);
}

#ifdef MEMRA_TRACE
const char* TagName(unsigned tag) {
  switch (tag) {
    case kTraceLatentQuery: return "latent_query";
    case kTraceMlaShort: return "mla_short";
    case kTraceMlaTiles: return "mla_tiles";
    case kTraceMlaCombine: return "mla_combine";
    case kTraceGemv: return "gemv Wo";
    case kTraceNormGemv: return "norm_gemv Wr";
    case kTraceRouteQuant: return "route_quant";
    case kTraceExpertUp: return "expert_up";
    case kTraceExpertDown: return "expert_down";
    case kTraceCombineNorm: return "combine_norm";
    case kTraceRmsnorm: return "rmsnorm";
    default: return "?";
  }
}
#endif

struct Instance {
  unsigned tag = 0, blocks = 0, grid = 0;
  uint64_t entry = ~0ull, release = ~0ull, lastRelease = 0, exit = 0;
  uint64_t marks[kTraceMarks] = {};  // the last block to pass each
};

// The kernels --noop and --leave-out name: bit k of their masks is kOutNames[k].
enum Out : unsigned { kOutAttention, kOutWo, kOutNormGemv, kOutRouteQuant, kOutMerge, kOutKernels };
constexpr const char* kOutNames[kOutKernels] = {"attention", "wo", "norm_gemv", "route_quant", "merge"};

// A comma list of kOutNames as a mask; 0, having said why, for an empty list or another name.
unsigned ParseOut(const char* list) {
  const auto refuse = [](const std::string& why) {
    std::printf("%s (the kernels:", why.c_str());
    for (const char* n : kOutNames) std::printf(" %s", n);
    std::printf(")\n");
    return 0u;
  };
  unsigned mask = 0;
  for (const char* c = list; *c;) {
    const char* end = std::strchr(c, ',');
    const std::string name(c, end ? size_t(end - c) : std::strlen(c));
    const auto at = std::find(std::begin(kOutNames), std::end(kOutNames), name);
    if (at == std::end(kOutNames)) return refuse("no kernel " + name + " to take out");
    mask |= 1u << (at - std::begin(kOutNames));
    c = end ? end + 1 : c + name.size();
  }
  return mask ? mask : refuse("name a kernel to take out");
}

// What --noop puts in a kernel's place: the wait for the kernel ahead, and the next one's start.
__global__ void noop_kernel() {
  memra_cu::PdlWait();
  memra_cu::PdlLaunchDependents();
}

// --eager 2's gate: holds the stream until the host sets *open (mapped host memory), by which time
// every launch of the replay is queued behind it. Bounded (a second), should the host ever block
// on a full launch queue behind it; the replay then reads a second and says so.
__global__ void gate_kernel(const volatile int* open, int* timedOut) {
  const uint64_t until = GlobalTimerNs() + 1000000000ull;
  while (*open == 0) {
    if (GlobalTimerNs() > until) { *timedOut = 1; return; }
    __nanosleep(200);
  }
}

// --prefetch's branch: `bytes` from p into L2, a lane 32 KB a round, `paceNs` between rounds.
__global__ void prefetch_next(const char* p, uint64_t bytes, unsigned paceNs) {
  constexpr unsigned kPiece = 32768;
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (uint64_t off = uint64_t(threadIdx.x) * kPiece; off + kPiece <= bytes; off += uint64_t(blockDim.x) * kPiece) {
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + off), "r"(kPiece),
                 "l"(policy)
                 : "memory");
    if (paceNs != 0) __nanosleep(paceNs);
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // Each case: t rows at one position, "T:POS".
  std::vector<std::pair<uint32_t, uint32_t>> cases;
  int replays = 20, pdl = 1, woSplit = 0, eager = 0;
  unsigned noop = 0, leaveOut = 0, prefetchMb = 0, paceNs = 0, prefetchRow = 512, persistMb = 0;
  const std::map<std::string, unsigned*> counts{
      {"--prefetch", &prefetchMb}, {"--pace", &paceNs}, {"--prefetch-row", &prefetchRow}, {"--persist", &persistMb}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (const auto count = counts.find(a); count != counts.end()) {
      *count->second = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (a == "--cases") {
      for (const char* c = argv[i + 1]; *c;) {
        char* end;
        const uint32_t t = std::strtoul(c, &end, 10);
        if (*end != ':') { std::printf("a case is T:POS, not %s\n", c); return 2; }
        const uint32_t pos = std::strtoul(end + 1, &end, 10);
        cases.push_back({t, pos});
        c = *end == ',' ? end + 1 : end;
      }
    } else if (a == "--replays") {
      replays = std::atoi(argv[i + 1]);
    } else if (a == "--pdl") {
      pdl = std::atoi(argv[i + 1]);
    } else if (a == "--eager") {
      eager = std::atoi(argv[i + 1]);
      if (eager < 0 || eager > 2) { std::printf("--eager is 1 (host-paced) or 2 (gated)\n"); return 2; }
    } else if (a == "--wo-split") {
      woSplit = std::atoi(argv[i + 1]);
    } else if (a == "--noop" || a == "--leave-out") {
      const unsigned bits = ParseOut(argv[i + 1]);
      if (bits == 0) return 2;
      (a == "--noop" ? noop : leaveOut) |= bits;
    } else {
      std::printf("unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (cases.empty()) cases.push_back({1, 16});
  for (const auto& [t, pos] : cases) {
    if (t < 1 || t > MEMRA_MODEL_MAX_ROWS || pos >= P || replays < 1) {
      std::printf("want 1 <= t <= %d, pos < %u, replays >= 1\n", MEMRA_MODEL_MAX_ROWS, P);
      return 2;
    }
  }
  constexpr uint32_t kRows = MEMRA_MODEL_MAX_ROWS;
  if (persistMb != 0) {
    int dev = 0, most = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, dev));
    CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, std::min(size_t(persistMb) << 20, size_t(most))));
    size_t granted = 0;
    CHECK(cudaDeviceGetLimit(&granted, cudaLimitPersistingL2CacheSize));
    std::printf("L2 set aside for persisting lines: %.1f MB (at most %.1f)\n", granted / 1048576.0, most / 1048576.0);
  }
  cudaStream_t s, side;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t woDone, sideDone;
  CHECK(cudaEventCreateWithFlags(&woDone, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&sideDone, cudaEventDisableTiming));
  const uint64_t prefetchBytes = uint64_t(prefetchMb) << 20, prefetchAt = uint64_t(prefetchRow) * N * R * 2;
  if (prefetchBytes != 0 && prefetchAt + prefetchBytes > uint64_t(H) * N * R * 2) {
    std::printf("--prefetch: %u MB from row %u passes Wq's end\n", prefetchMb, prefetchRow);
    return 2;
  }
  std::vector<Layer> layers(L);
  for (uint32_t l = 0; l < L; ++l) {
    Layer& w = layers[l];
    w.wq = Tensor(uint64_t(H) * N * R, l, 1, H, 0);
    w.wuv = Tensor(uint64_t(N) * R * Dv, l, 2, R, 0);
    w.wdkv = Tensor(uint64_t(H) * R, l, 3, H, 0);
    w.wo = Tensor(uint64_t(N) * Dv * H, l, 4, N * Dv, 0);
    w.wr = Tensor(uint64_t(H) * E, l, 5, H, 0);
    w.w1 = Tensor(uint64_t(E) * H * F, l, 6, H, 0);
    w.w3 = Tensor(uint64_t(E) * H * F, l, 7, H, 0);
    w.w2 = Tensor(uint64_t(E) * F * H, l, 8, F, 0);
    w.g1 = Tensor(H, l, 9, 0, 1);
    w.g2 = Tensor(H, l, 10, 0, 1);
  }
  const uint64_t slotStride = uint64_t(L) * P * R;
  float* h = Randoms(size_t(kRows) * H, 1.f);
  float* cache = Randoms(size_t(kRows) * slotStride, 0.5f);
  float *hNorm = Buffer<float>(size_t(kRows) * H), *q = Buffer<float>(size_t(kRows) * N * R);
  float *u = Buffer<float>(size_t(kRows) * N * Dv), *logits = Buffer<float>(size_t(kRows) * E);
  int32_t* ids = Buffer<int32_t>(size_t(kRows) * K);
  float *wts = Buffer<float>(size_t(kRows) * K), *xs = Buffer<float>(size_t(kRows) * H / 128);
  uint8_t* xq = Buffer<uint8_t>(size_t(kRows) * H);
  float *xd = Buffer<float>(size_t(kRows) * H), *act = Buffer<float>(size_t(kRows) * K * F);
  float* contrib = Buffer<float>(size_t(kRows) * K * H);
  float* work = Buffer<float>(memra_mla_workspace_bytes(kRows, N, P, R) / 4);
  int32_t* positions = Buffer<int32_t>(kRows);
  // The experts' sync words, zeroed as cu/model.h asks (left 0xff, the first expert_up traps).
  unsigned* expertSync = DeviceFilled<unsigned>(MEMRA_EXPERT_SYNC_BYTES / 4, 0);
  // --eager 2's gate (mapped host memory): [0] open, [1] set where it timed out.
  int* gate = nullptr;
  CHECK(cudaHostAlloc(&gate, 2 * sizeof(int), cudaHostAllocMapped));
  gate[0] = 1, gate[1] = 0;
#ifdef MEMRA_TRACE
  const unsigned cap = 1u << 18;
  for (TraceUnit& u : TraceUnits()) {
    CHECK(cudaMalloc(&u.buffer, size_t(cap) * sizeof(MemraTraceRecord)));
    CHECK(cudaMemcpyToSymbol(u.records, &u.buffer, sizeof(u.buffer)));
    CHECK(cudaMemcpyToSymbol(u.capacity, &cap, sizeof(cap)));
  }
#endif
  for (const auto& c : cases) {
    const uint32_t t = c.first, pos = c.second;
    const std::vector<int32_t> ps(t, int32_t(pos));
    CHECK(cudaMemcpy(positions, ps.data(), t * 4, cudaMemcpyHostToDevice));
    // The walk's attention bound: the one-kernel form while every row is under it.
    const uint32_t attendP = pos < memra_mla_short_positions(R) ? memra_mla_short_positions(R) : P;

    // whole: every kernel, whatever --noop and --leave-out name (the step before the capture).
    const auto step = [&](bool whole) {
      const auto kernel = [&](Out k, auto launch) {
        if (whole || !((noop | leaveOut) >> k & 1)) {
          CHECK(launch());
        } else if (noop >> k & 1) {
          CHECK(memra_cu::LaunchModelKernel(noop_kernel, dim3(1), dim3(32), 0, 1, s));
        }
      };
      memra_model_set_pdl(0);
      CHECK(memra_rmsnorm(hNorm, h, layers[0].g1, t, H, s));
      memra_model_set_pdl(pdl);
      for (uint32_t l = 0; l < L; ++l) {
        const Layer& w = layers[l];
        float* c = cache + uint64_t(l) * P * R;
        CHECK(memra_latent_query(q, hNorm, w.wdkv, w.wq, c, slotStride, positions, H, R, N * R, t, P, s));
        const MemraMlaArgs a{u, N * Dv, q, N * R, c, slotStride, positions, w.wuv, work, t, N, attendP, R, Dv};
        kernel(kOutAttention, [&] { return memra_mla_attention(&a, s); });
        kernel(kOutWo, [&] { return memra_gemv(h, H, u, N * Dv, w.wo, H, N * Dv, H, t, 1, uint32_t(woSplit), s); });
        if (prefetchBytes != 0) {
          CHECK(cudaEventRecord(woDone, s));
          CHECK(cudaStreamWaitEvent(side, woDone));
          const char* nextWq = reinterpret_cast<const char*>(layers[(l + 1) % L].wq) + prefetchAt;
          prefetch_next<<<1, 32, 0, side>>>(nextWq, prefetchBytes, paceNs);
          CHECK(cudaGetLastError());
        }
        kernel(kOutNormGemv, [&] { return memra_norm_gemv(hNorm, logits, E, h, w.g2, w.wr, E, H, E, t, s); });
        kernel(kOutRouteQuant, [&] { return memra_route_quant(ids, wts, logits, xq, xs, xd, hNorm, t, E, K, H, s); });
        CHECK(memra_expert_up(act, xd, ids, w.w1, w.w3, 0, E, t, K, H, F, expertSync, s));
        CHECK(memra_expert_down(contrib, act, ids, w.w2, 0, E, t, K, H, F, expertSync, s));
        const uint16_t* next = layers[(l + 1) % L].g1;
        kernel(kOutMerge,
               [&] { return memra_moe_combine_norm(h, wts, ids, contrib, contrib, E, t, K, H, hNorm, next, s); });
      }
      if (prefetchBytes != 0) {
        CHECK(cudaEventRecord(sideDone, side));
        CHECK(cudaStreamWaitEvent(s, sideDone));
      }
      memra_model_set_pdl(0);
    };
    const cudaGraphExec_t ge = CapturedGraph(s, [&] { step(true); }, [&] { step(false); });
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));

#ifdef MEMRA_TRACE
    // Per chain position (kernel i of a layer), the samples of each measure.
    std::map<unsigned, std::vector<double>> span, body, gap, lead, spread;
    std::map<unsigned, std::vector<double>> marks[kTraceMarks];
    std::map<unsigned, unsigned> tagAt, gridAt;
    unsigned badReplays = 0;
#endif
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<double> ms;
    for (int r = 0; r < replays; ++r) {
#ifdef MEMRA_TRACE
      const unsigned zero = 0;
      for (const TraceUnit& u : TraceUnits()) {
        CHECK(cudaMemcpyToSymbolAsync(u.count, &zero, sizeof(zero), 0, cudaMemcpyHostToDevice, s));
      }
#endif
      if (eager == 0) {
        ms.push_back(TimedReplayMs(s, ge, e0, e1));
      } else {
        if (eager == 2) {
          gate[0] = 0;
          gate_kernel<<<1, 1, 0, s>>>(gate, gate + 1);
          CHECK(cudaGetLastError());
        }
        ms.push_back(TimedMs(s, e0, e1, [&] {
          step(false);
          gate[0] = 1;
        }));
      }
#ifdef MEMRA_TRACE
      std::vector<MemraTraceRecord> recs;
      for (const TraceUnit& u : TraceUnits()) {
        unsigned n;
        CHECK(cudaMemcpyFromSymbol(&n, u.count, sizeof(n)));
        const size_t at = recs.size();
        recs.resize(at + std::min(n, cap));
        CHECK(cudaMemcpy(recs.data() + at, u.buffer, (recs.size() - at) * sizeof(MemraTraceRecord),
                         cudaMemcpyDeviceToHost));
      }
      // A kernel's waits all return after the kernel ahead completes and before its own completion
      // lets the next one's return: in the order of their waits, each kernel's blocks are contiguous.
      std::vector<MemraTraceRecord> waited;
      for (const auto& x : recs) if (x.waited != 0) waited.push_back(x);
      std::sort(waited.begin(), waited.end(), [](auto& a, auto& b) { return a.waited < b.waited; });
      std::vector<Instance> inst;
      for (const auto& x : waited) {
        if (inst.empty() || inst.back().tag != x.tag) inst.push_back(Instance{x.tag, 0, x.blocks});
        Instance& k = inst.back();
        ++k.blocks;
        k.entry = std::min(k.entry, x.entry);
        k.release = std::min(k.release, x.waited);
        k.lastRelease = std::max(k.lastRelease, x.waited);
        k.exit = std::max(k.exit, x.exit);
        for (unsigned m = 0; m < kTraceMarks; ++m) k.marks[m] = std::max(k.marks[m], x.marks[m]);
      }
      // Blocks that never waited (an expert block with no group) still hold their SM until exit.
      for (const auto& x : recs) {
        if (x.waited != 0) continue;
        for (auto& k : inst) {
          if (k.tag == x.tag && x.entry >= k.entry && x.entry <= k.exit) { k.exit = std::max(k.exit, x.exit); break; }
        }
      }
      // 8 launches a layer, 9 where the attention takes its two kernels.
      const size_t perLayer = (inst.size() - 1) / L;
      if (inst.size() != 1 + perLayer * L || perLayer < 8 || perLayer > 9) {
        ++badReplays;
        continue;
      }
      for (size_t i = 1; i + 1 < inst.size(); ++i) {
        const unsigned at = unsigned((i - 1) % perLayer);
        if ((i - 1) / perLayer == 0) continue;  // layer 0 starts from the uncaptured norm
        tagAt[at] = inst[i].tag;
        gridAt[at] = inst[i].grid;
        span[at].push_back((inst[i + 1].release - inst[i].release) / 1e3);
        body[at].push_back((double(inst[i].exit) - double(inst[i].release)) / 1e3);
        gap[at].push_back((double(inst[i + 1].release) - double(inst[i].exit)) / 1e3);
        lead[at].push_back((double(inst[i].release) - double(inst[i].entry)) / 1e3);
        spread[at].push_back((double(inst[i].lastRelease) - double(inst[i].release)) / 1e3);
        for (unsigned m = 0; m < kTraceMarks; ++m) {
          if (inst[i].marks[m] != 0) marks[m][at].push_back((double(inst[i].marks[m]) - double(inst[i].release)) / 1e3);
        }
      }
#endif
    }
    std::printf("bench, t = %u, position %u (attention over %u positions), %u layers: the %s %.3f ms "
                "(median of %d)%s, Wo split %d%s\n",
                t, pos, attendP, L,
                eager == 0   ? "graph replay"
                : eager == 1 ? "eager replay, host-paced,"
                             : "eager replay, gated,",
                Median(ms), replays, pdl ? "" : ", no PDL", woSplit,
#ifdef MEMRA_TRACE
                ", traced"
#else
                ", untraced"
#endif
    );
    if (gate[1]) std::printf("  the gate timed out: some launch waited behind it\n");
    for (unsigned k = 0; k < kOutKernels; ++k) {
      if ((noop | leaveOut) >> k & 1) {
        std::printf("  %s %s\n", kOutNames[k], noop >> k & 1 ? "replaced by a waiting block" : "left out");
      }
    }
#ifdef MEMRA_TRACE
    if (badReplays) std::printf("%u replays whose kernels did not group into the chain were left out\n", badReplays);
    // Weight bytes each kernel must read at t = 1 (the experts: K distinct).
    const auto wbytes = [](unsigned tag) {
      switch (tag) {
        case kTraceLatentQuery: return 2.0 * H * (N * R + R);
        case kTraceMlaShort: case kTraceMlaCombine: return 2.0 * N * R * Dv;
        case kTraceGemv: return 2.0 * N * Dv * H;
        case kTraceNormGemv: return 2.0 * H * E;
        case kTraceExpertUp: return 2.0 * 2 * K * H * F;
        case kTraceExpertDown: return 2.0 * K * F * H;
        default: return 0.0;
      }
    };
    // spread: from the first block's release to the last one's.
    std::printf("%-14s %6s %9s %9s %9s %9s %9s %10s\n", "kernel", "blocks", "span us", "body us", "gap us", "lead us",
                "spread us", "span GB/s");
    double layer = 0;
    for (const auto& [at, tag] : tagAt) {
      const double sp = Median(span[at]), b = wbytes(tag);
      layer += sp;
      std::printf("%-14s %6u %9.2f %9.2f %9.2f %9.2f %9.2f %10.0f\n", TagName(tag), gridAt[at], sp, Median(body[at]),
                  Median(gap[at]), Median(lead[at]), Median(spread[at]), t == 1 && b > 0 ? b / sp / 1e3 : 0.0);
    }
    // Where each kernel's last block passed its marks (cu/trace.cuh), us after the release.
    for (const auto& [at, tag] : tagAt) {
      std::printf("%-14s marks:", TagName(tag));
      for (unsigned m = 0; m < kTraceMarks; ++m) {
        if (marks[m].count(at)) std::printf("  %u +%.2f", m, Median(marks[m][at]));
      }
      std::printf("\n");
    }
    std::printf("a layer: %.2f us of spans (x %u = %.3f ms)\n", layer, L, layer * L / 1e3);
#endif
    // The residual after every replay so far, as one FNV-1a digest: two builds of the same sums
    // (the same cases, replays and order) print the same one.
    std::vector<uint8_t> hb(size_t(t) * H * sizeof(float));
    CHECK(cudaMemcpy(hb.data(), h, hb.size(), cudaMemcpyDeviceToHost));
    uint64_t digest = 0xcbf29ce484222325ull;
    for (const uint8_t b : hb) digest = (digest ^ b) * 0x100000001b3ull;
    std::printf("t = %u, position %u: h digest %016llx\n", t, pos, static_cast<unsigned long long>(digest));
    // The last layer's routing: the rows' residuals carry from replay to replay, so the probe's rows
    // need not share experts as a decode's tokens do, and a change to how the experts' groups run
    // is judged by the decode bench's rows instead (docs/performance.md, "Each routed expert read
    // once from five rows on"). Printed so that a run says how far this one's groups are from those.
    std::vector<int32_t> named(size_t(t) * K);
    CHECK(cudaMemcpy(named.data(), ids, named.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    std::map<int32_t, unsigned> slotsOf;
    for (const int32_t e : named) ++slotsOf[e];
    unsigned most = 0, pastFour = 0;
    for (const auto& [e, n] : slotsOf) most = std::max(most, n), pastFour += n > 4;
    std::printf("t = %u, position %u: the last layer names %zu experts, at most %u slots one, %u past four\n", t, pos,
                slotsOf.size(), most, pastFour);
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
  }
  std::printf("done\n");
  return 0;
}
