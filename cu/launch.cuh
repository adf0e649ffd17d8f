// Grid sizing shared by the grid-stride kernels, and the alignment test that picks a kernel's
// vector width.
#pragma once

#include <cuda_runtime_api.h>
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

// Whether p is a multiple of `bytes` (a power of two): a 16-byte vector access through a pointer
// that is not is a misaligned access, a sticky error for the whole context.
inline bool Aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// The SM count of the calling thread's current device.
inline cudaError_t CurrentSms(unsigned* sms) {
  int dev = 0, n = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  *sms = err == cudaSuccess && n > 0 ? unsigned(n) : 1;
  return err;
}

}  // namespace memra_cu
