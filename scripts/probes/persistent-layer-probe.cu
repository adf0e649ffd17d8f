// Can one long-lived kernel keep HBM streaming through a layer's dependent phases? The form
// docs/performance.md left unmeasured ("one long-lived kernel a layer whose producer warps stream
// the weights into shared memory ahead of the chain while its consumer warps do the dependent
// work"), here without the model's arithmetic: only what its barriers, gates and waits cost.
//
// One block an SM. A producer warp streams every phase's weight tiles (16 KB bulk copies, TMA)
// into a ring of `depth` slots, across phase boundaries, except into a gated phase (the experts,
// whose weights are known only once the router has run), where it first waits for the grid
// barrier that opens expert_up. Eight consumer warps take each tile (one FMA a weight against an
// x in registers, t = 1). Between phases every block meets at a grid barrier (a counter, then an
// acquire spin), after which thread 0 sleeps the phase's delay: the latency-bound kernel it stands
// for (the attention, the router's norm, the picks, the merge), `--scale` times the traced chain's.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I. -o build/probes/persistent-layer-probe \
//        scripts/probes/persistent-layer-probe.cu
//   build/probes/persistent-layer-probe [--depth D] [--scale S] [--layers 30] [--reps 10]
//                                       [--claim | --ahead N]
//
// Prints the grid barrier's own cost (every phase empty), then for each ring depth the step's time
// against a plain streaming pass of the same kernel (no barriers): with the barriers alone, with
// the experts gated, and with the delays, gated and not. The ring is fed one of three ways: each
// block its fixed tiles b, b + G, ... of a phase; tiles claimed from a shared count (--claim); or
// the fixed tiles with the next N of the block's sequence also asked into L2 (--ahead N). By
// default: fixed, and 4, 8 and 16 ahead. What it found is in docs/performance.md ("One long-lived
// kernel a layer, probed").
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "cu/prefetch_l2.cuh"
#include "scripts/probes/probe_cuda.h"

namespace {

constexpr int kConsumerWarps = 8;
constexpr int kThreads = 32 * (kConsumerWarps + 1);
constexpr uint32_t kTileBytes = 16384;
constexpr int kMaxDepth = 12;
constexpr int kMaxPhases = 16;

struct Phase {
  uint64_t offset;   // bytes into the layer's weights
  uint64_t bytes;    // 0: no weights (a latency-bound phase)
  uint32_t delayNs;  // thread 0's sleep after the barrier that opens this phase
  int gate;          // >= 0: the producer waits for the barrier opening that phase before loading
};

struct Layer {
  Phase phase[kMaxPhases];
  int phases;
  uint64_t bytes;  // a layer's weights
};

__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(Smem(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void MbarExpect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(Smem(bar)) : "memory");
}

__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}" ::"r"(Smem(bar)),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void BulkLoad(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   Smem(dst)),
               "l"(src), "r"(bytes), "r"(Smem(bar))
               : "memory");
}

__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Until every block has arrived at barrier `id`.
__device__ __forceinline__ void GridWait(const uint32_t* counters, uint32_t id) {
  while (LoadAcquire(counters + id) < gridDim.x) {
  }
}

// Barrier `id` among the grid's blocks: the caller (one thread) arrives, then waits for the rest.
__device__ __forceinline__ void GridMeet(uint32_t* counters, uint32_t id) {
  __threadfence();
  atomicAdd(counters + id, 1u);
  GridWait(counters, id);
}

__device__ __forceinline__ uint32_t TilesIn(const Phase& ph) {
  return uint32_t((ph.bytes + kTileBytes - 1) / kTileBytes);
}

// Tiles of a phase this block takes: b, b + G, ... of TilesIn(ph); the i-th of them is FixedTile(i).
__device__ __forceinline__ uint32_t TilesOf(const Phase& ph) {
  const uint32_t all = TilesIn(ph);
  return all > blockIdx.x ? (all - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
}

__device__ __forceinline__ uint32_t FixedTile(uint32_t i) { return blockIdx.x + i * gridDim.x; }

// Tile `tile` of phase ph: its offset into the layer's weights, and its bytes (the last may be short).
__device__ __forceinline__ uint64_t TileAt(const Phase& ph, uint32_t tile) {
  return ph.offset + uint64_t(tile) * kTileBytes;
}

__device__ __forceinline__ uint32_t TileBytes(const Phase& ph, uint32_t tile) {
  const uint64_t left = ph.bytes - uint64_t(tile) * kTileBytes;
  return left < kTileBytes ? uint32_t(left) : kTileBytes;
}

// counters: two per (layer, phase), zeroed before the launch: the barrier's arrivals, then (at
// layers * kMaxPhases past them) the tiles claimed. barriers == 0: no grid barriers, no delays, no
// gating (the streaming floor of this kernel). claim: each producer takes the phase's next tile
// from the shared count instead of tiles b, b + G, ..., so that an SM that HBM serves faster takes
// more of them, and a phase ends for the grid when its tiles do, not when its slowest SM's share
// does; a slot holding tile -1 tells the consumers that their producer's share of the phase is
// done.
__global__ void __launch_bounds__(kThreads, 1)
    persistent_layers(const uint8_t* __restrict__ weights, Layer layer, int layers, int depth, int barriers,
                      int claim, int ahead, uint32_t* counters, float* out) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ uint64_t full[kMaxDepth], empty[kMaxDepth];
  __shared__ int slotTile[kMaxDepth];  // with claim: the tile in each slot, -1 for the phase's end
  uint32_t* const claims = counters + layers * kMaxPhases;
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int d = 0; d < depth; ++d) {
      MbarInit(&full[d], 1);
      MbarInit(&empty[d], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // The producer: every tile of every phase in order, gated phases after their barrier.
    if (lane != 0) return;
    uint32_t n = 0;  // slots filled so far
    // Slot n % depth, once the consumers are done with its last use.
    const auto freeSlot = [&] {
      const uint32_t d = n % depth, use = n / depth;
      if (use > 0) MbarWait(&empty[d], (use - 1) & 1);
      return d;
    };
    const auto load = [&](uint32_t d, const uint8_t* w, const Phase& ph, uint32_t tile) {
      MbarExpect(&full[d], TileBytes(ph, tile));
      BulkLoad(ring + size_t(d) * kTileBytes, w + TileAt(ph, tile), TileBytes(ph, tile), &full[d]);
    };
    uint32_t tilesOf[kMaxPhases];  // this block's fixed tiles of each phase
    for (int k = 0; k < layer.phases; ++k) tilesOf[k] = TilesOf(layer.phase[k]);
    // With ahead > 0 (fixed tiles): the tiles of this block's sequence up to `ahead` past the one
    // just loaded are asked into L2, so that HBM keeps streaming while the ring is full and the
    // consumers are held by a barrier or a delay; the cursor (layer pl, phase pk, tile pi: place
    // pm in the sequence) stops at a gated phase until this producer has passed that gate. A
    // cursor, because one thread walking the phases with 64-bit divisions for every tile (a first
    // version) cost 1.5 us a tile, and no poll of the gate, since each is a round trip to L2.
    int pl = 0, pk = 0, passed = -1;
    uint32_t pi = 0, pm = 0;
    const auto advance = [&](bool ask) {
      while (pl < layers && pi >= tilesOf[pk]) {
        pi = 0;
        if (++pk == layer.phases) pk = 0, ++pl;
      }
      if (pl >= layers) return false;
      const Phase& ph = layer.phase[pk];
      if (barriers && ph.gate >= 0 && pl * layer.phases + ph.gate > passed) return false;
      if (ask) {
        const uint8_t* w = weights + uint64_t(pl) * layer.bytes;
        memra_cu::PrefetchL2Bulk(w + TileAt(ph, FixedTile(pi)), TileBytes(ph, FixedTile(pi)));
      }
      ++pi, ++pm;
      return true;
    };
    // After tile n's load: the cursor past n without asking, then up to n + ahead asking.
    const auto keepAhead = [&](uint32_t n) {
      while (pm <= n && advance(false)) {
      }
      while (pm <= n + ahead && advance(true)) {
      }
    };
    if (ahead > 0 && !claim) {
      while (pm < uint32_t(ahead) && advance(true)) {
      }
    }
    for (int l = 0; l < layers; ++l) {
      const uint8_t* w = weights + uint64_t(l) * layer.bytes;
      for (int k = 0; k < layer.phases; ++k) {
        const Phase& ph = layer.phase[k];
        if (barriers && ph.gate >= 0) {
          GridWait(counters, uint32_t(l * layer.phases + ph.gate));
          passed = l * layer.phases + ph.gate;
        }
        if (claim) {
          for (;;) {
            const uint32_t tile = atomicAdd(claims + l * layer.phases + k, 1u);
            const uint32_t d = freeSlot();
            ++n;
            if (tile >= TilesIn(ph)) {
              slotTile[d] = -1;
              MbarArrive(&full[d]);  // releases the store above to the consumers' wait
              break;
            }
            slotTile[d] = int(tile);
            load(d, w, ph, tile);
          }
          continue;
        }
        for (uint32_t i = 0; i < tilesOf[k]; ++i, ++n) {
          load(freeSlot(), w, ph, FixedTile(i));
          if (ahead > 0) keepAhead(n);
        }
      }
    }
    return;
  }

  // The consumers: each tile's bf16 pairs times x, one FMA a weight, in registers.
  const float x0 = 1.0f + threadIdx.x * 1e-3f, x1 = 1.0f - threadIdx.x * 1e-3f;
  float acc = 0.0f;
  uint32_t n = 0;  // tiles consumed so far
  for (int l = 0; l < layers; ++l) {
    for (int k = 0; k < layer.phases; ++k) {
      const Phase& ph = layer.phase[k];
      const uint32_t id = uint32_t(l * layer.phases + k);
      if (barriers && (l > 0 || k > 0)) {
        // The barrier that opens phase k: every block's consumers done with the phase before.
        asm volatile("bar.sync 1, %0;" ::"n"(32 * kConsumerWarps));
        if (threadIdx.x == 0) {
          GridMeet(counters, id);
          if (ph.delayNs) __nanosleep(ph.delayNs);
        }
        asm volatile("bar.sync 1, %0;" ::"n"(32 * kConsumerWarps));
      } else if (barriers && threadIdx.x == 0) {
        atomicAdd(counters + id, 1u);  // the first phase opens at once
      }
      const uint32_t tiles = claim ? ~0u : TilesOf(ph);
      for (uint32_t i = 0; i < tiles; ++i, ++n) {
        const uint32_t d = n % depth;
        MbarWait(&full[d], (n / depth) & 1);
        if (claim && slotTile[d] < 0) {
          __syncwarp();
          if (lane == 0) MbarArrive(&empty[d]);
          ++n;
          break;
        }
        const uint32_t* t = reinterpret_cast<const uint32_t*>(ring + size_t(d) * kTileBytes);
#pragma unroll 4
        for (uint32_t j = threadIdx.x; j < kTileBytes / 4; j += 32 * kConsumerWarps) {
          const uint32_t v = t[j];
          acc = fmaf(__uint_as_float(v << 16), x0, acc);
          acc = fmaf(__uint_as_float(v & 0xffff0000u), x1, acc);
        }
        __syncwarp();
        if (lane == 0) MbarArrive(&empty[d]);
      }
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// bench's layer at t = 1 (MODEL.md): latent_query, the attention (Wuv), Wo, the router's norm
// and product, the picks, the eight routed experts' up and down halves, the merge. `scale`
// multiplies every latency-bound phase's delay; `gated`: the experts wait for their barrier;
// `empty`: no phase has weights (the barriers alone).
Layer BenchLayer(double scale, bool gated, bool empty = false) {
  struct Spec {
    double mb;
    double us;
    int gate;
  };
  const Spec specs[] = {
      {138.4, 0.0, -1},  // latent_query: Wq, Wdkv (opened by the merge's barrier below)
      {4.2, 7.0, -1},    // the short attention's Wuv, after its scores (7 us of round trips)
      {33.6, 0.0, -1},   // Wo
      {0.26, 3.0, -1},   // the router's norm and product
      {0.0, 2.0, -1},    // the picks and the fp8 input
      {201.3, 0.0, 5},   // expert_up, 8 experts: known only now
      {100.7, 0.0, 5},   // expert_down: known as soon as expert_up's are
      {0.0, 6.0, -1},    // the merge and the next norm
  };
  Layer L{};
  uint64_t off = 0;
  for (const Spec& s : specs) {
    Phase& p = L.phase[L.phases++];
    p.offset = off;
    p.bytes = empty ? 0 : uint64_t(s.mb * 1e6) / kTileBytes * kTileBytes;
    p.delayNs = uint32_t(s.us * 1e3 * scale);
    p.gate = gated ? s.gate : -1;
    off += p.bytes;
  }
  L.bytes = off;
  return L;
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 30, reps = 10;
  std::vector<int> depths = {4, 8, 12};
  std::vector<double> scales = {0.5, 1.0};
  // Ways of feeding the ring: {claim, tiles asked into L2 ahead}.
  std::vector<std::pair<int, int>> modes = {{0, 0}, {0, 4}, {0, 8}, {0, 16}};
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!std::strcmp(arg, "--claim")) {
      modes = {{1, 0}};
      continue;
    }
    if (value == nullptr) {
      std::printf("%s needs a value\n", arg);
      return 2;
    }
    ++i;
    if (!std::strcmp(arg, "--layers")) layers = std::atoi(value);
    else if (!std::strcmp(arg, "--reps")) reps = std::atoi(value);
    else if (!std::strcmp(arg, "--depth")) depths = {std::atoi(value)};
    else if (!std::strcmp(arg, "--scale")) scales = {std::atof(value)};
    else if (!std::strcmp(arg, "--ahead")) modes = {{0, std::atoi(value)}};
    else {
      std::printf("unknown option %s (--depth D, --scale S, --layers L, --reps R, --claim, --ahead N)\n", arg);
      return 2;
    }
  }
  if (layers < 1 || reps < 1 || depths[0] < 1 || depths[0] > kMaxDepth || modes[0].second < 0) {
    std::printf("--layers and --reps must be at least 1, --depth 1 to %d, --ahead at least 0\n", kMaxDepth);
    return 2;
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const Layer base = BenchLayer(0.0, false);
  const uint64_t total = base.bytes * layers;
  uint8_t* weights;
  CHECK(cudaMalloc(&weights, total));
  CHECK(cudaMemset(weights, 0x3c, total));
  uint32_t* counters;
  const size_t nCounters = 2 * size_t(layers) * kMaxPhases;
  CHECK(cudaMalloc(&counters, nCounters * 4));
  float* out;
  CHECK(cudaMalloc(&out, size_t(sms) * kThreads * 4));
  CHECK(cudaFuncSetAttribute(persistent_layers, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kMaxDepth * kTileBytes));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  // Median of reps runs, each with fresh counters.
  const auto timed = [&](const Layer& L, int depth, int barriers, int claim = 0, int ahead = 0) {
    std::vector<float> ms;
    for (int r = 0; r < reps + 1; ++r) {
      CHECK(cudaMemset(counters, 0, nCounters * 4));
      CHECK(cudaEventRecord(a));
      // At least 8 slots' worth of shared memory, so that no SM takes two blocks (the model's
      // layout: one long-lived block an SM).
      const size_t smem = size_t(std::max(depth, 8)) * kTileBytes;
      persistent_layers<<<sms, kThreads, smem>>>(weights, L, layers, depth, barriers, claim, ahead, counters,
                                                 out);
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaGetLastError());
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, a, b));
      if (r > 0) ms.push_back(t);  // the first run warms up
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  std::printf("%d layers of %.1f MB (%.2f GB), %d blocks of %d threads, tiles of %u bytes\n", layers,
              base.bytes / 1e6, total / 1e9, sms, kThreads, kTileBytes);
  const Layer bare = BenchLayer(0.0, false, true);
  const float alone = timed(bare, 4, 1);
  std::printf("barriers alone (no weights, no delays): %.3f ms, %.2f us a barrier\n", alone,
              alone * 1e3 / (layers * bare.phases));
  const auto line = [&](int depth, const char* what, float stream, float t) {
    std::printf("depth %2d, %-40s %.3f ms, %.1f%% of streaming alone\n", depth, what, t, 100.0 * stream / t);
  };
  for (int depth : depths) {
    const float stream = timed(base, depth, 0);
    std::printf("depth %2d: streaming alone %.3f ms (%.0f GB/s)\n", depth, stream, total / (stream * 1e6));
    for (const auto& [claim, ahead] : modes) {
      char how[32], what[96];
      if (claim) std::snprintf(how, sizeof how, "tiles claimed");
      else if (ahead) std::snprintf(how, sizeof how, "L2 %d ahead", ahead);
      else std::snprintf(how, sizeof how, "tiles fixed");
      std::snprintf(what, sizeof what, "%s, barriers:", how);
      line(depth, what, stream, timed(base, depth, 1, claim, ahead));
      std::snprintf(what, sizeof what, "%s, barriers, experts gated:", how);
      line(depth, what, stream, timed(BenchLayer(0.0, true), depth, 1, claim, ahead));
      for (double scale : scales) {
        std::snprintf(what, sizeof what, "%s, delays x%.1f, not gated:", how, scale);
        line(depth, what, stream, timed(BenchLayer(scale, false), depth, 1, claim, ahead));
        std::snprintf(what, sizeof what, "%s, delays x%.1f, gated:", how, scale);
        line(depth, what, stream, timed(BenchLayer(scale, true), depth, 1, claim, ahead));
      }
    }
  }
  return 0;
}
