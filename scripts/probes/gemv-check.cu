// memra_gemv of whatever build this links against an f64 product on the host: the largest
// |y - ref| over the sum of |x w| of its output (the gemv suite's measure, bound 2e-6), with
// accumulate over a prefilled out, strided x and out, and a column slice of a wider matrix.
// For a build flag that changes memra_gemv's path (e.g. -DMEMRA_GEMV_MMA) before the GPU suite
// can run it. Each row of a t-row call must equal the row alone, bit for bit.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. [-DMEMRA_GEMV_MMA] scripts/probes/gemv-check.cu cu/model.cu \
//        cu/model_gemv.cu cu/model_weights.cu -o build/probes/gemv-check && build/probes/gemv-check
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cu/model.h"
#include "cu/model_bits.cuh"
#include "scripts/probes/probe_cuda.h"

namespace {

// K x cols from column colStart of a K x ldw matrix, t rows; returns the number of failures.
int Check(uint32_t K, uint32_t ldw, uint32_t colStart, uint32_t cols, uint32_t t, uint32_t split) {
  const uint64_t ldx = K + 4, ldo = cols + 64;
  uint16_t* w;
  CHECK(cudaMalloc(&w, size_t(K) * ldw * 2));
  CHECK(memra_gen_weights(w, 3, 40 + t, 0, K, ldw, 0, ldw, 0, 0.02f, 0));
  float* x = DeviceRandoms(t * ldx, 1.f, 100 + t);
  float* h0 = DeviceRandoms(t * ldo, 0.5f, 200 + t);
  float *out, *one;
  CHECK(cudaMalloc(&out, t * ldo * 4));
  CHECK(cudaMalloc(&one, ldo * 4));
  CHECK(cudaMemcpy(out, h0, t * ldo * 4, cudaMemcpyDeviceToDevice));
  CHECK(memra_gemv(out, ldo, x, ldx, w + colStart, ldw, K, cols, t, 1, split, 0));
  CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> hw(size_t(K) * ldw);
  std::vector<float> hx(t * ldx), hh(t * ldo), got(t * ldo), row(ldo);
  CHECK(cudaMemcpy(hw.data(), w, hw.size() * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hx.data(), x, hx.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hh.data(), h0, hh.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  int fails = 0;
  for (uint32_t s = 0; s < t; ++s) {
    for (uint32_t j = 0; j < cols; ++j) {
      double ref = 0, mag = 0;
      for (uint32_t k = 0; k < K; ++k) {
        const double p = double(hx[s * ldx + k]) * memra_model::Bf16ToF32(hw[size_t(k) * ldw + colStart + j]);
        ref += p;
        mag += std::fabs(p);
      }
      const double e = std::fabs(double(got[s * ldo + j]) - (double(hh[s * ldo + j]) + ref)) / (mag > 0 ? mag : 1);
      if (!(e <= worst)) worst = e;
    }
    // The row alone, accumulated over the same prefill.
    CHECK(cudaMemcpy(one, h0 + s * ldo, ldo * 4, cudaMemcpyDeviceToDevice));
    CHECK(memra_gemv(one, ldo, x + s * ldx, ldx, w + colStart, ldw, K, cols, 1, 1, split, 0));
    CHECK(cudaMemcpy(row.data(), one, ldo * 4, cudaMemcpyDeviceToHost));
    if (std::memcmp(row.data(), got.data() + s * ldo, cols * 4) != 0) {
      std::printf("FAIL K %u cols %u t %u: row %u differs from the row alone\n", K, cols, t, s);
      ++fails;
    }
  }
  const bool ok = worst <= 2e-6;
  std::printf("%s K %u ldw %u cols %u from %u t %u split %u: largest error %.2e of sum |x w|\n", ok ? "ok" : "FAIL", K,
              ldw, cols, colStart, t, split, worst);
  for (void* p : {(void*)w, (void*)x, (void*)h0, (void*)out, (void*)one}) CHECK(cudaFree(p));
  return fails + (ok ? 0 : 1);
}

}  // namespace

int main() {
  int fails = 0;
  for (uint32_t t : {1u, 3u, 8u}) {
    fails += Check(4096, 4096, 0, 4096, t, 2);     // Wo whole
    fails += Check(4096, 4096, 2048, 2048, t, 2);  // a rank's column half
    fails += Check(2048, 1024, 64, 512, t, 1);     // narrow, one block a tile
  }
  std::printf(fails ? "FAIL %d\n" : "done\n", fails);
  return fails ? 1 : 0;
}
