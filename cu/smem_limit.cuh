// A kernel's dynamic shared-memory ceiling, raised once per kernel to what its launches ask: by
// default a block's static and dynamic shared memory together may not pass 48 KB, and a launch
// past it fails (cudaErrorInvalidValue) unless the kernel's attribute was set first. So any
// dynamic size is granted explicitly: the kernel's static part is not known here.
#pragma once

#include <atomic>
#include <cstddef>

#include <cuda_runtime_api.h>

namespace memra_cu {

// `granted`: the kernel's own record of the ceiling set so far (one static per kernel instance).
template <class Kernel>
cudaError_t AllowSmem(Kernel kernel, size_t bytes, std::atomic<size_t>& granted) {
  if (bytes == 0 || bytes <= granted.load(std::memory_order_relaxed)) return cudaSuccess;
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (err == cudaSuccess) granted.store(bytes, std::memory_order_relaxed);
  return err;
}

}  // namespace memra_cu
