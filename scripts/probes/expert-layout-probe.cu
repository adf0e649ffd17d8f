// What holds `expert_up` at one row near 88% of its bytes' floor: its weights' layout or its
// requests in flight. The t = 1 launch's read pattern without its arithmetic: 96 blocks of 512
// threads (8 experts x 12 tiles of 128 columns), each streaming its tile of two [4096 x 1536] bf16
// matrices, lane x 8 bytes of a row, warp y the chunks of four rows y, y + 16, ..., U chunks a
// thread in registers before their sums, the loads evict-first in L2 as the model's are. Two
// layouts of the same bytes:
//   row-major   a tile's rows are 256-byte pieces 3 KB apart (the model's [E, H, F]);
//   tile-major  a tile's 4096 rows are one run of 1 MB (a block streams contiguous bytes).
// And both over every SM, each block a span of the tiles' rows (which would change the model's
// sums; here only the bytes move).
// Each variant runs from a CUDA graph of launches over rotating weights (no launch finds its
// bytes in L2); prints µs a launch and GB/s against the read floor of the same card. No figures
// yet: docs/performance.md ("`expert_up` at one row through a ring") says what they would decide.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. scripts/probes/expert-layout-probe.cu cu/read_floor.cu \
//        -o build/probes/expert-layout-probe && build/probes/expert-layout-probe
#include <cstdio>

#include "cu/weight_loads.cuh"
#include "scripts/probes/probe_cuda.h"
#include "scripts/probes/read_floor.h"

namespace {

constexpr unsigned kExperts = 8, kTiles = 12, kRows = 4096, kCols = 1536, kTileCols = 128;
constexpr unsigned kThreads = 512, kSplitY = 16, kChunk = 4;
constexpr size_t kMatrixElems = size_t(kRows) * kCols;
constexpr size_t kSetBytes = size_t(kExperts) * 2 * kMatrixElems * 2;  // 201 MB a launch
constexpr int kSets = 6, kLaunches = 24, kReplays = 9;

// Element (row, col) of matrix m of expert e in a set, in either layout.
template <bool kTileMajor>
__device__ __forceinline__ size_t At(unsigned e, unsigned m, unsigned row, unsigned col) {
  const size_t base = (size_t(e) * 2 + m) * kMatrixElems;
  if (kTileMajor) return base + (size_t(col / kTileCols) * kRows + row) * kTileCols + col % kTileCols;
  return base + size_t(row) * kCols + col;
}

// Block b of `blocks` takes the b-th of `blocks` equal spans of the 96 tiles' runs of 64 chunks
// (tile after tile): with 96 blocks, exactly tile b's 4096 rows, in expert_up's order.
template <bool kTileMajor, unsigned U>
__global__ void __launch_bounds__(kThreads, 1) stream(const uint16_t* __restrict__ w, float* __restrict__ sink) {
  const uint64_t policy = memra_cu::EvictFirstPolicy();
  const unsigned tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  constexpr unsigned kChunksPerTile = kRows / kChunk;  // 1024
  constexpr unsigned kRuns = kExperts * kTiles * kChunksPerTile / (kSplitY * 4);  // runs of 64 chunks
  float acc = 0.0f;
  const unsigned per = (kRuns + gridDim.x - 1) / gridDim.x, end = (blockIdx.x + 1) * per;
  for (unsigned run = blockIdx.x * per; run < end && run < kRuns; ++run) {
    const unsigned flat = run * 64;  // the run's first chunk in the flat list
    const unsigned tile = flat / kChunksPerTile, c0 = flat % kChunksPerTile;
    const unsigned e = tile / kTiles, col = (tile % kTiles) * kTileCols + 4 * tx;
#pragma unroll 1
    for (unsigned i = 0; i < 4; i += U) {
      uint2 v[U][kChunk][2];
#pragma unroll
      for (unsigned u = 0; u < U; ++u) {
        const unsigned row = (c0 + ty + kSplitY * (i + u)) * kChunk;
#pragma unroll
        for (unsigned r = 0; r < kChunk; ++r) {
#pragma unroll
          for (unsigned m = 0; m < 2; ++m) {
            const uint16_t* p = w + At<kTileMajor>(e, m, row + r, col);
            v[u][r][m] = memra_cu::LoadWeights(reinterpret_cast<const uint2*>(p), policy);
          }
        }
      }
#pragma unroll
      for (unsigned u = 0; u < U; ++u) {
#pragma unroll
        for (unsigned r = 0; r < kChunk; ++r) {
#pragma unroll
          for (unsigned m = 0; m < 2; ++m) acc += __uint_as_float(v[u][r][m].x) + __uint_as_float(v[u][r][m].y);
        }
      }
    }
  }
  if (acc == 1.2345f) sink[threadIdx.x] = acc;  // keeps the loads; never true for these bytes
}

template <bool kTileMajor, unsigned U>
void Time(const char* name, unsigned blocks, uint16_t* const (&sets)[kSets], float* sink, cudaStream_t s,
          float floorGBs) {
  int k = 0;
  const auto body = [&] {
    for (int i = 0; i < kLaunches; ++i) {
      stream<kTileMajor, U><<<blocks, kThreads, 0, s>>>(sets[k++ % kSets], sink);
      CHECK(cudaGetLastError());
    }
  };
  const double us = GraphReplayUs(s, body, body, kReplays) / kLaunches;
  const double gbs = kSetBytes / (us * 1e3);
  std::printf("%-40s blocks %3u  U %u  %7.2f us  %6.0f GB/s  %5.1f%% of the floor\n", name, blocks, U, us, gbs,
              100.0 * gbs / floorGBs);
}

}  // namespace

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const float floorGBs = ReadFloorGBs(s, 4, 5);
  uint16_t* sets[kSets];
  for (auto& p : sets) p = DeviceFilled<uint16_t>(kSetBytes / 2, 0x3c);
  float* sink = DeviceFilled<float>(kThreads, 0);
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const unsigned all = static_cast<unsigned>(sms);
  for (int round = 0; round < 2; ++round) {
    std::printf("round %d\n", round + 1);
    Time<false, 2>("row-major (the model's), as expert_up", 96, sets, sink, s, floorGBs);
    Time<false, 1>("row-major, one chunk a batch", 96, sets, sink, s, floorGBs);
    Time<false, 4>("row-major, four chunks a batch", 96, sets, sink, s, floorGBs);
    Time<true, 2>("tile-major", 96, sets, sink, s, floorGBs);
    Time<true, 4>("tile-major, four chunks a batch", 96, sets, sink, s, floorGBs);
    Time<false, 2>("row-major over every SM", all, sets, sink, s, floorGBs);
    Time<true, 2>("tile-major over every SM", all, sets, sink, s, floorGBs);
  }
  return 0;
}
