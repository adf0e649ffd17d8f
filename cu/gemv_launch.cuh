// How a launch lays a column-tile product (cu/gemv_tile.cuh) over the GPU: the blocks that split a
// tile's K rows, the columns a thread owns, and the shared memory it takes.
//
// The launcher picks only how columns are laid over threads (CW columns a thread, wide or 2-byte
// weight loads, x staged in shared memory or read from L2); none of it reaches the order of a sum.
#pragma once

#include <stdint.h>

#include <atomic>

#include "cu/gemv_tile.cuh"
#include "cu/launch.cuh"
#include "cu/smem_limit.cuh"

namespace memra_tile {

using memra_cu::LaunchModelKernel;

// Clusters of up to 8 blocks are portable (no opt-in attribute).
constexpr unsigned kMaxSplit = 8;
// Rows of K per block before another block of the cluster joins. A block's epilogue (its
// partials through shared memory, the cluster's through distributed shared memory) leaves its SM
// streaming nothing, so a wide matrix wants one long-lived block an SM: 2048 rows (K = 4096: two
// blocks a tile) measured best for every wide matrix of `bench` (scripts/probes/gemv-sweep.cu,
// one H200: Wq 43.7 -> 33.0 us, Wo 15.1 -> 11.6, the vocabulary 76 -> 64 against 512 rows).
constexpr unsigned kRowsPerBlock = 2048;
// Narrower tiles (more blocks) until a launch has most of a block an SM (the register budget of
// cu/gemv_tile.cuh leaves room for one 512-thread block an SM): narrowing further, to a second
// partial wave, costs more than the SMs a wave of 96 leaves idle (bench: expert_up 49.1 us at 96
// blocks, 56.3 at 192; Wq's half 18.8 at 128, 22.6 at 256; scripts/probes/gemv-sweep.cu).
constexpr uint64_t kTargetBlocks = 96;

// The number of blocks that split one tile's k range: a function of K and the rows a block takes
// alone (the slice rule), 1 to kMaxSplit.
inline unsigned Split(uint32_t K, uint32_t rowsPerBlock = kRowsPerBlock) {
  const uint32_t s = (K + rowsPerBlock - 1) / rowsPerBlock;
  return s < 1 ? 1 : (s > kMaxSplit ? kMaxSplit : s);
}

// The widest CW the accumulators allow for M matrices of T rows (kMaxAccumulators).
constexpr int CwMax(int T, int M) {
  return kMaxAccumulators / (M * T) >= 8 ? 8 : (kMaxAccumulators / (M * T) >= 4 ? 4 : 2);
}

// Every row of W (stride ldw) starts CW-column aligned for one 2*CW-byte load.
inline bool WideOk(const uint16_t* W, uint64_t ldw, int cw) {
  return memra_cu::Aligned(W, 2 * static_cast<uintptr_t>(cw)) && ldw % static_cast<uint64_t>(cw) == 0;
}

inline uint64_t Tiles(uint32_t cols, int cw) {
  const uint64_t tile = kWarpCols * static_cast<uint64_t>(cw);
  return (cols + tile - 1) / tile;
}

// The widest aligned CW, narrowed while the launch would leave SMs idle (a narrow matrix).
inline int PickCw(int cwMax, bool (*wideOk)(int, const void*), const void* ctx, uint32_t cols,
           uint64_t blocksPerTile) {
  int cw = cwMax;
  while (cw > 2 && !wideOk(cw, ctx)) cw /= 2;
  while (cw > 2 && Tiles(cols, cw) * blocksPerTile < kTargetBlocks) cw /= 2;
  return cw;
}

// The dynamic shared memory a gemv launch may take, part[] and staged x together: under the 227
// KB a block may have, room left for the kernels' static shared memory (FindGroup's lists).
constexpr size_t kSmemBudget = 200 * 1024;

// Dynamic shared memory of a launch of T rows of M matrices at CW: part[] (PartBytes, kDyn as the
// kernel's GemvTile takes it) and, where it fits the budget, staged x (`stage`). At T = 1 x is
// read from L2: one float4 of x a chunk costs less than the staging's wait at the start
// (scripts/probes/gemv-sweep.cu: Wo 12.2 us staged, 11.6 not).
template <int M, int T, int CW, bool kDyn = kDynamicPart<M, T, CW>>
size_t GemvSmem(uint32_t K, unsigned split, bool* stage) {
  const size_t part = PartBytes<M, T, CW, kDyn>();
  const size_t x = size_t(kSplitY) * T * XChunksPerWarp(K, split) * sizeof(float4);
  *stage = T > 1 && part + x <= kSmemBudget;
  return part + (*stage ? x : 0);
}

// grid.x = tiles x split, clustered by split along x (a cluster is one tile's blocks). granted:
// the launcher's record of each of its kernels' shared-memory ceilings (MEMRA_PICK4's order).
template <class Kernel, class... Args>
cudaError_t LaunchTiles(Kernel kernel, uint32_t cols, int cw, unsigned gridY, unsigned split,
                        size_t smem, std::atomic<size_t>& granted, cudaStream_t stream,
                        Args... args) {
  const cudaError_t err = memra_cu::AllowSmem(kernel, smem, granted);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(Tiles(cols, cw) * split), gridY, 1);
  return LaunchModelKernel(kernel, grid, dim3(kGemvThreads), smem, split, stream, args...);
}

}  // namespace memra_tile

// The instance of `kernel<..., wide, stage>` for the runtime flags `wide` and `stage` in scope:
// every product's launcher shares this one dispatch. MEMRA_PICK4_AT: its index among the four.
#define MEMRA_PICK4(kernel, ...)                                              \
  (wide ? (stage ? kernel<__VA_ARGS__, true, true> : kernel<__VA_ARGS__, true, false>) \
        : (stage ? kernel<__VA_ARGS__, false, true> : kernel<__VA_ARGS__, false, false>))
#define MEMRA_PICK4_AT (2 * int(wide) + int(stage))
