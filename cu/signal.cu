#include <cuda/atomic>

#include "cu/kernels.h"

namespace {

// Stream order makes every earlier kernel's writes visible to this thread; the system-scope
// fence and release store make them visible to a CPU that observes `value` with an acquire
// load (Atomics.load) — including writes earlier kernels made into peer memory or into other
// mapped host pages.
__global__ void signal_u32(unsigned int* counter, unsigned int value) {
  __threadfence_system();
  cuda::atomic_ref<unsigned int, cuda::thread_scope_system> ref(*counter);
  ref.store(value, cuda::memory_order_release);
}

}  // namespace

extern "C" cudaError_t memra_launch_signal(unsigned int* counter, unsigned int value,
                                           cudaStream_t stream) {
  signal_u32<<<1, 1, 0, stream>>>(counter, value);
  return cudaGetLastError();
}
