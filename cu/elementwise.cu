#include <stdint.h>

#include "cu/kernels.h"
#include "cu/launch.cuh"

namespace {

__global__ void fill_f32(float* __restrict__ ptr, uint64_t n, float value) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    ptr[i] = value;
  }
}

// n4 float4 groups, then the scalar tail; only launched when ptr is 16-byte aligned.
__global__ void fill_f32x4(float4* __restrict__ ptr, uint64_t n4, float* __restrict__ tail,
                           unsigned tailCount, float value) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4 v = make_float4(value, value, value, value);
  for (uint64_t i = tid; i < n4; i += stride) ptr[i] = v;
  if (tid < tailCount) tail[tid] = value;
}

// y and x may live on different devices (x a peer's pointer) and could alias in a caller's
// mistake, so no __restrict__ on them.
__global__ void axpy_f32(float* y, const float* x, uint64_t n, float a) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] += a * x[i];
  }
}

__global__ void axpy_f32x4(float4* y, const float4* x, uint64_t n4, float* yTail,
                           const float* xTail, unsigned tailCount, float a) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t i = tid; i < n4; i += stride) {
    const float4 xv = x[i];
    float4 yv = y[i];
    yv.x += a * xv.x;
    yv.y += a * xv.y;
    yv.z += a * xv.z;
    yv.w += a * xv.w;
    y[i] = yv;
  }
  if (tid < tailCount) yTail[tid] += a * xTail[tid];
}

}  // namespace

extern "C" cudaError_t memra_launch_fill_f32(float* ptr, uint64_t n, float value,
                                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (memra_cu::Aligned(ptr, 16) && n >= 4) {
    const uint64_t n4 = n / 4;
    const unsigned tail = static_cast<unsigned>(n % 4);
    fill_f32x4<<<memra_cu::GridFor(n4), memra_cu::kBlock, 0, stream>>>(
        reinterpret_cast<float4*>(ptr), n4, ptr + n4 * 4, tail, value);
  } else {
    fill_f32<<<memra_cu::GridFor(n), memra_cu::kBlock, 0, stream>>>(ptr, n, value);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t memra_launch_axpy_f32(float* y, const float* x, uint64_t n, float a,
                                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (memra_cu::Aligned(y, 16) && memra_cu::Aligned(x, 16) && n >= 4) {
    const uint64_t n4 = n / 4;
    const unsigned tail = static_cast<unsigned>(n % 4);
    axpy_f32x4<<<memra_cu::GridFor(n4), memra_cu::kBlock, 0, stream>>>(
        reinterpret_cast<float4*>(y), reinterpret_cast<const float4*>(x), n4, y + n4 * 4,
        x + n4 * 4, tail, a);
  } else {
    axpy_f32<<<memra_cu::GridFor(n), memra_cu::kBlock, 0, stream>>>(y, x, n, a);
  }
  return cudaGetLastError();
}
