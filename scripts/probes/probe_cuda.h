// How the probes call CUDA: a failed runtime call ends the probe, naming the call and where it
// was; a driver entry point is resolved through the runtime, as the addon does (it links the
// static runtime only, never libcuda).
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

template <typename F>
static F DriverEntry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || p == nullptr) { std::printf("FAIL no %s\n", name); std::exit(1); }
  return reinterpret_cast<F>(p);
}
