#include <stdint.h>

#include "cu/kernels.h"
#include "cu/launch.cuh"

namespace {

// Must match probePattern in src/runtime/binding.ts: Math.imul(i, 0x9e3779b1) ^ seed, i.e. the
// low 32 bits of i times the golden-ratio constant. A reader on another device checks it word by
// word to prove a peer store landed.
__global__ void probe_write_u32(unsigned int* dst, uint64_t n, unsigned int seed) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = (static_cast<unsigned int>(i) * 0x9E3779B1u) ^ seed;
  }
}

}  // namespace

extern "C" cudaError_t memra_launch_probe_write(unsigned int* dst, uint64_t n, unsigned int seed,
                                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  probe_write_u32<<<memra_cu::GridFor(n), memra_cu::kBlock, 0, stream>>>(dst, n, seed);
  return cudaGetLastError();
}
