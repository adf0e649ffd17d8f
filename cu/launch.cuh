// Grid sizing shared by the grid-stride kernels.
#pragma once

#include <stdint.h>

namespace memra_cu {

constexpr unsigned kBlock = 256;
// Enough blocks to fill an H200 (132 SMs x 2048 threads) with room to spare; larger n loops
// inside the kernel instead of growing the grid.
constexpr uint64_t kMaxBlocks = 2048;

inline unsigned GridFor(uint64_t work) {
  uint64_t blocks = (work + kBlock - 1) / kBlock;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  if (blocks == 0) blocks = 1;
  return static_cast<unsigned>(blocks);
}

}  // namespace memra_cu
