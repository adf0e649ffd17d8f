// Launchers for the kernels in cu/. Each enqueues on `stream` and returns cudaGetLastError(),
// so a bad configuration is reported at the call. A zero count launches nothing and returns
// cudaSuccess (a zero-block grid would be a launch error). Arguments are validated by the
// caller (addon/kernels.cpp): pointers non-null and 4-byte aligned.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t memra_launch_fill_f32(float* ptr, uint64_t n, float value, cudaStream_t stream);
cudaError_t memra_launch_axpy_f32(float* y, const float* x, uint64_t n, float a,
                                  cudaStream_t stream);
// One thread: a system-scope release store of `value` into `counter` (mapped host memory),
// ordered after all earlier work on the stream.
cudaError_t memra_launch_signal(unsigned int* counter, unsigned int value, cudaStream_t stream);
// dst[i] = (uint32)(i * 0x9E3779B1) ^ seed, as probePattern in src/runtime/binding.ts.
cudaError_t memra_launch_probe_write(unsigned int* dst, uint64_t n, unsigned int seed,
                                     cudaStream_t stream);
// One thread spinning on %globaltimer for `microseconds`.
cudaError_t memra_launch_spin(uint64_t microseconds, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
