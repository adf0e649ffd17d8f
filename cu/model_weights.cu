// Weight generation on the device, bit-identical to src/decode/weights.ts generateTensor (the
// operations themselves live in cu/model_bits.cuh). A rank generates only its own shard: a dense
// [rows, cols] slice whose element (r, c) is flat element base + r * srcCols + colStart + c of
// the tensor, so the hash input is the tensor's own index, never the slice's.
#include <stdint.h>

#include "cu/launch.cuh"
#include "cu/model.h"
#include "cu/model_bits.cuh"

namespace {

// Grid-stride over the slice in 64-bit indices (a bench tensor holds billions of elements).
// All index arithmetic is mod 2^64, as docs/model.md's hash is.
template <int kKind>
__global__ void gen_weights(uint16_t* __restrict__ dst, uint64_t start, uint64_t base,
                            uint64_t srcCols, uint64_t colStart, uint64_t cols, uint64_t total,
                            float scale) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  // A slice as wide as its source is one contiguous run: no division per element.
  const bool dense = cols == srcCols;
  for (uint64_t n = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < total; n += stride) {
    uint64_t i;
    if (dense) {
      i = base + colStart + n;
    } else {
      const uint64_t r = n / cols;
      i = base + r * srcCols + colStart + (n - r * cols);
    }
    dst[n] = memra_model::WeightBf16(start + i, kKind, scale);
  }
}

}  // namespace

extern "C" cudaError_t memra_gen_weights(uint16_t* dst, uint64_t seed, uint64_t id, uint64_t base,
                                         uint64_t rows, uint64_t srcCols, uint64_t colStart,
                                         uint64_t cols, int kind, float scale,
                                         cudaStream_t stream) {
  if (kind != 0 && kind != 1) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows > UINT64_MAX / cols) return cudaErrorInvalidValue;
  const uint64_t total = rows * cols;
  const uint64_t start = memra_model::HashStart(seed, id);
  const unsigned grid = memra_cu::GridFor(total);
  if (kind == 0) {
    gen_weights<0><<<grid, memra_cu::kBlock, 0, stream>>>(dst, start, base, srcCols, colStart,
                                                          cols, total, scale);
  } else {
    gen_weights<1><<<grid, memra_cu::kBlock, 0, stream>>>(dst, start, base, srcCols, colStart,
                                                          cols, total, scale);
  }
  return cudaGetLastError();
}
