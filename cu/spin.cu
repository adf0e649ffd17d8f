#include <stdint.h>

#include "cu/globaltimer.cuh"
#include "cu/kernels.h"

namespace {

// The bound is wall time (cu/globaltimer.cuh). The sleep keeps the spinning warp from hogging
// issue slots.
__global__ void spin_ns(uint64_t ns) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) __nanosleep(256);
}

}  // namespace

extern "C" cudaError_t memra_launch_spin(uint64_t microseconds, cudaStream_t stream) {
  if (microseconds == 0) return cudaSuccess;
  spin_ns<<<1, 1, 0, stream>>>(microseconds * 1000u);
  return cudaGetLastError();
}
