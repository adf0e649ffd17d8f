// Which CUDA calls wait for every kernel running on the device (docs/reliability.md, "Two ranks on
// one card").
//
// In loopback both ranks' workers share one device. A rank's join kernel waits on the device for
// the other rank's half; if the other rank's worker is meanwhile inside a call that waits for
// every running kernel to end, it cannot enqueue that half until the first kernel gives up, after
// its spin bound: both ranks refuse. On two devices such a call waits only for its own device.
// Each test here starts a kernel on stream A that spins until the host sets a flag, then makes one
// call from a second thread (as the other rank's worker would) while a timer sets the flag after
// 200 ms. A call that returns only after the flag is set waits for running kernels. Each call is
// also timed alone, with nothing running, for its own cost.
// Measured on one H200 (CUDA 13.0, eager and lazy loading alike): cudaFree, cudaFreeHost,
// cudaHostRegister/Unregister, cudaDeviceSetLimit and the first launch of a kernel whose frame
// passes the stack limit (1 KB a thread at start) wait; cudaMalloc, cudaHostAlloc, copies and
// memsets on the legacy stream, stream and event create/destroy, graphs, cudaFuncSetAttribute and
// cudaMallocAsync do not. memra's kernels' frames are 512 bytes at most (cuobjdump -res-usage).
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o build/probes/implicit-sync-probe
//        scripts/probes/implicit-sync-probe.cu -lpthread
// Run:   build/probes/implicit-sync-probe          (CUDA_MODULE_LOADING=LAZY to see lazy loading)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "cu/globaltimer.cuh"
#include "scripts/probes/probe_cuda.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHold = std::chrono::milliseconds(200);

__global__ void Spin(const volatile unsigned* flag, volatile unsigned* started) {
  *started = 1;
  const unsigned long long t0 = GlobalTimerNs();
  while (*flag == 0 && GlobalTimerNs() - t0 < 2000000000ull) {
  }
}

__global__ void Small(float* p) {
  if (p != nullptr) p[threadIdx.x] += 1.0f;
}

// A frame of 24 KB a thread, indexed by a runtime value so it stays in local memory.
__global__ void BigStack(float* out, int i) {
  volatile float frame[6144];
  for (int k = 0; k < 6144; k += 97) frame[k] = float(k + threadIdx.x);
  if (out != nullptr) out[threadIdx.x] = frame[i % 6144];
}

__global__ void WideShared(float* out) {
  extern __shared__ float s[];
  s[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  if (out != nullptr) out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

__device__ float g_symbol[256];

struct Probe {
  unsigned* flags = nullptr;  // mapped: [0] release, [32] started
  unsigned* dflags = nullptr;
  cudaStream_t a = nullptr, b = nullptr;
};

double Ms(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// How long `call` takes on a second thread, with Spin running on A (or not).
double Time(Probe& p, const std::function<void()>& call, bool spinning) {
  volatile unsigned* f = p.flags;
  f[0] = 0;
  f[32] = 0;
  std::thread timer;
  if (spinning) {
    Spin<<<1, 1, 0, p.a>>>(p.dflags, p.dflags + 32);
    CHECK(cudaGetLastError());
    while (f[32] == 0) std::this_thread::yield();
    timer = std::thread([f] {
      std::this_thread::sleep_for(kHold);
      f[0] = 1;
    });
  }
  double ms = 0;
  std::thread worker([&] {
    CHECK(cudaSetDevice(0));
    const auto t0 = Clock::now();
    call();
    ms = Ms(t0, Clock::now());
  });
  worker.join();
  if (spinning) timer.join();
  CHECK(cudaStreamSynchronize(p.a));
  CHECK(cudaStreamSynchronize(p.b));
  return ms;
}

struct Case {
  std::string name;
  std::function<void()> call;  // run twice: with the spinner, then alone
};

}  // namespace

int main() {
  if (std::getenv("CUDA_MODULE_LOADING") == nullptr) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  std::printf("CUDA_MODULE_LOADING=%s\n", std::getenv("CUDA_MODULE_LOADING"));
  CHECK(cudaSetDevice(0));
  size_t stack = 0;
  CHECK(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
  std::printf("stack limit at start: %zu bytes a thread\n", stack);
  Probe p;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&p.flags), 256, cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&p.dflags), p.flags, 0));
  CHECK(cudaStreamCreateWithFlags(&p.a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&p.b, cudaStreamNonBlocking));
  float* buf = nullptr;
  CHECK(cudaMalloc(&buf, 1 << 20));
  CHECK(cudaMemset(buf, 0, 1 << 20));
  Small<<<1, 32, 0, p.b>>>(buf);  // warm: the context and the spinner's first launch
  Time(p, [] {}, true);

  std::vector<void*> held;
  float host[64];
  const size_t sizes[] = {1 << 20, size_t(256) << 20};
  std::vector<Case> cases = {
      {"nothing", [] {}},
      {"cudaStreamQuery(A)", [&] { (void)cudaStreamQuery(p.a); (void)cudaGetLastError(); }},
      {"launch Small on B", [&] { Small<<<1, 32, 0, p.b>>>(buf); }},
      {"cudaEventCreate+Destroy", [] { cudaEvent_t e; CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
                                       CHECK(cudaEventDestroy(e)); }},
      {"cudaStreamCreate+Destroy", [] { cudaStream_t s; CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
                                        CHECK(cudaStreamDestroy(s)); }},
      {"cudaMalloc 1 MB", [&] { void* q; CHECK(cudaMalloc(&q, sizes[0])); held.push_back(q); }},
      {"cudaMalloc 256 MB", [&] { void* q; CHECK(cudaMalloc(&q, sizes[1])); held.push_back(q); }},
      {"cudaFree (the last cudaMalloc)", [&] { CHECK(cudaFree(held.back())); held.pop_back(); }},
      {"cudaHostAlloc 1 MB mapped + cudaFreeHost", [] { void* q; CHECK(cudaHostAlloc(&q, 1 << 20, cudaHostAllocMapped));
                                                       CHECK(cudaFreeHost(q)); }},
      {"cudaHostAlloc 1 MB mapped", [&] { void* q; CHECK(cudaHostAlloc(&q, 1 << 20, cudaHostAllocMapped));
                                          held.push_back(q); }},
      {"cudaFreeHost", [&] { CHECK(cudaFreeHost(held.back())); held.pop_back(); }},
      {"cudaMemcpyAsync D2H on B + sync B", [&] { CHECK(cudaMemcpyAsync(host, buf, 256, cudaMemcpyDeviceToHost, p.b));
                                                  CHECK(cudaStreamSynchronize(p.b)); }},
      {"cudaMemcpy D2H (legacy stream)", [&] { CHECK(cudaMemcpy(host, buf, 256, cudaMemcpyDeviceToHost)); }},
      {"cudaMemset (legacy stream)", [&] { CHECK(cudaMemset(buf, 0, 256)); }},
      {"cudaMemcpyToSymbol", [&] { CHECK(cudaMemcpyToSymbol(g_symbol, host, 256)); }},
      {"cudaMallocAsync+FreeAsync on B + sync", [&] {
         void* q;
         CHECK(cudaMallocAsync(&q, 1 << 20, p.b));
         CHECK(cudaFreeAsync(q, p.b));
         CHECK(cudaStreamSynchronize(p.b)); }},
      {"cudaMemGetInfo", [] { size_t f, t; CHECK(cudaMemGetInfo(&f, &t)); }},
      {"cudaFuncSetAttribute 100 KB shared", [] { CHECK(cudaFuncSetAttribute(WideShared,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10)); }},
      {"launch WideShared 100 KB on B", [&] {
         WideShared<<<1, 256, 100 << 10, p.b>>>(buf);
         CHECK(cudaGetLastError()); }},
      {"first launch BigStack (24 KB a thread) on B", [&] { BigStack<<<132, 256, 0, p.b>>>(buf, 5);
                                                           CHECK(cudaGetLastError()); }},
      {"cudaDeviceSetLimit stack 32 KB", [] { CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 32 << 10)); }},
      {"graph: capture, instantiate, launch on B", [&] {
         cudaGraph_t g; cudaGraphExec_t x;
         CHECK(cudaStreamBeginCapture(p.b, cudaStreamCaptureModeThreadLocal));
         Small<<<1, 32, 0, p.b>>>(buf);
         CHECK(cudaStreamEndCapture(p.b, &g));
         CHECK(cudaGraphInstantiate(&x, g, 0));
         CHECK(cudaGraphLaunch(x, p.b));
         CHECK(cudaStreamSynchronize(p.b));
         CHECK(cudaGraphExecDestroy(x));
         CHECK(cudaGraphDestroy(g)); }},
      {"cudaHostRegister+Unregister 1 MB", [] {
         static char page[2 << 20];
         void* q = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(page) + 4095) & ~uintptr_t(4095));
         CHECK(cudaHostRegister(q, 1 << 20, cudaHostRegisterDefault));
         CHECK(cudaHostUnregister(q)); }},
  };
  std::printf("%-46s %12s %12s  %s\n", "call (from a second thread)", "spinning ms", "alone ms", "waits for kernels");
  for (auto& c : cases) {
    const double with = Time(p, c.call, true);
    // The alone timing repeats the call: for the ones that come in pairs, redo the pair's first.
    if (c.name == "cudaFree (the last cudaMalloc)") {
      void* q; CHECK(cudaMalloc(&q, sizes[1])); held.push_back(q);
    }
    if (c.name == "cudaFreeHost") {
      void* q; CHECK(cudaHostAlloc(&q, 1 << 20, cudaHostAllocMapped)); held.push_back(q);
    }
    const double alone = Time(p, c.call, false);
    std::printf("%-46s %12.3f %12.3f  %s\n", c.name.c_str(), with, alone, with > 150.0 ? "YES" : "no");
  }
  return 0;
}
