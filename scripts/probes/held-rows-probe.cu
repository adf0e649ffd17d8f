// Could the short attention's launcher ask the occupancy calculator for its room? HeldRows
// (cu/model_attention_short.cu) works out the cache rows a block of mla_short holds from four
// device attributes and the kernel's static shared memory. cudaOccupancyAvailableDynamicSMemPerBlock
// gives a dynamic size per block for n blocks an SM in one call, but its documentation does not
// say whether the kernel's MaxDynamicSharedMemorySize attribute caps it, or whether registers
// enter. This prints both rows counts, before and after the attribute is raised, for each form
// and 1 to 4 blocks an SM, with the 64-row cap and P taken out of the way.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. -DMEMRA_SHORT_HELD_MAX=1000000 \
//        scripts/probes/held-rows-probe.cu cu/model.cu -o build/probes/held-rows-probe
#include <cstdio>

#include "cu/model_attention_short.cu"
#include "scripts/probes/probe_cuda.h"

namespace {

template <unsigned kCols>
void Compare(const MemraMlaArgs& a, const char* when) {
  const auto kernel = memra_mla::mla_short<kCols>;
  const size_t rowBytes = size_t(memra_mla::HeldRowQuads(a.R)) * 16;
  std::atomic<int> staticBytes{-1};
  for (unsigned perSm = 1; perSm <= 4; ++perSm) {
    uint32_t ours = 0;
    CHECK(memra_mla::HeldRows(kernel, a, perSm, staticBytes, &ours));
    size_t avail = 0;
    const cudaError_t err =
        cudaOccupancyAvailableDynamicSMemPerBlock(&avail, kernel, int(perSm), int(memra_mla::kThreads));
    if (err != cudaSuccess) {
      std::printf("%-6s cols %3u, %u an SM: HeldRows %u rows; occupancy: %s\n", when, kCols, perSm, ours,
                  cudaGetErrorString(err));
      cudaGetLastError();
      continue;
    }
    std::printf("%-6s cols %3u, %u an SM: HeldRows %u rows; occupancy %zu bytes, %zu rows%s\n", when, kCols, perSm,
                ours, avail, avail / rowBytes, avail / rowBytes == ours ? "" : "  (differs)");
  }
}

// The kernel's ceiling raised to all a block may have.
template <class Kernel>
void Raise(Kernel kernel, int optin) {
  cudaFuncAttributes fa{};
  CHECK(cudaFuncGetAttributes(&fa, kernel));
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - int(fa.sharedSizeBytes)));
}

}  // namespace

int main() {
  MemraMlaArgs a{};
  a.P = 1000000;
  a.R = 512;
  cudaFuncAttributes fa{};
  CHECK(cudaFuncGetAttributes(&fa, memra_mla::mla_short<memra_mla::kDSpan>));
  std::printf("mla_short<64>: %d registers, %zu static bytes\n", fa.numRegs, fa.sharedSizeBytes);
  Compare<memra_mla::kDSpan>(a, "before");
  Compare<2 * memra_mla::kDSpan>(a, "before");
  int optin = 0;
  CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  Raise(memra_mla::mla_short<memra_mla::kDSpan>, optin);
  Raise(memra_mla::mla_short<2 * memra_mla::kDSpan>, optin);
  Compare<memra_mla::kDSpan>(a, "raised");
  Compare<2 * memra_mla::kDSpan>(a, "raised");
  return 0;
}
