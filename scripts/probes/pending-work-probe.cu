// How much work one stream may have pending before another thread's launch on another stream of
// the same device blocks (docs/reliability.md, "Two ranks on one card").
//
// Eagerly each rank's worker enqueues a step's launches ahead of the device. In loopback, rank
// 0's join kernel waits on the device for rank 1's half while rank 0's later launches pile up
// behind it; if pending work is bounded per device rather than per stream, rank 1's launch of
// that half blocks until rank 0's work drains, which it cannot before the join gives up.
// Each test: thread A launches on stream A a kernel that spins until a flag is set, then N empty
// kernels; thread B then launches on stream B the kernel that sets the flag. The host sets the
// flag itself after 500 ms, so nothing hangs: B's kernel "ran" when it set the flag first.
// Measured on one H200 (CUDA 13.0, 8 or 32 connections): a stream takes 1021 pending launches,
// and the launch after that blocks its thread until the stream drains; B's launch, and its
// kernel, went ahead every time. The bound is a stream's, not the device's.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o build/probes/pending-work-probe
//        scripts/probes/pending-work-probe.cu -lpthread
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <cuda_runtime.h>

#include "cu/globaltimer.cuh"
#include "scripts/probes/probe_cuda.h"

namespace {

using Clock = std::chrono::steady_clock;

__global__ void Spin(const volatile unsigned* flag, volatile unsigned* started) {
  *started = 1;
  const unsigned long long t0 = GlobalTimerNs();
  while (*flag == 0 && GlobalTimerNs() - t0 < 3000000000ull) {
  }
}

__global__ void Empty() {}

__global__ void SetFlag(volatile unsigned* flag) {
  if (*flag == 0) *flag = 1;
}

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

int main() {
  if (std::getenv("CUDA_MODULE_LOADING") == nullptr) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  CHECK(cudaSetDevice(0));
  unsigned *h = nullptr, *d = nullptr;  // [0] the flag (1: B's kernel, 2: the rescue), [32] started
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&h), 256, cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), h, 0));
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  Empty<<<1, 1, 0, a>>>();
  SetFlag<<<1, 1, 0, b>>>(d + 64);
  CHECK(cudaDeviceSynchronize());
  std::printf("%8s %10s %14s %16s %14s  %s\n", "N on A", "A queued", "A enqueue ms", "A longest launch", "B launch ms",
              "B's kernel");
  for (int n : {16, 256, 512, 768, 1024, 1536, 2048, 4096, 8192, 16384}) {
    volatile unsigned* f = h;
    f[0] = 0;
    f[32] = 0;
    double aMs = 0, aMax = 0, bMs = 0;
    std::thread rescue([f] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (f[0] == 0) f[0] = 2;
    });
    // B launches once A has enqueued its N kernels, or has been stuck in one launch for 50 ms.
    std::atomic<int> enqueued{0};
    std::thread ta([&] {
      CHECK(cudaSetDevice(0));
      Spin<<<1, 1, 0, a>>>(d, d + 32);
      const auto t0 = Clock::now();
      for (int i = 0; i < n; i++) {
        const auto s = Clock::now();
        Empty<<<1, 32, 0, a>>>();
        aMax = std::max(aMax, Ms(s, Clock::now()));
        enqueued.store(i + 1);
      }
      aMs = Ms(t0, Clock::now());
    });
    int seen = -1;
    auto moved = Clock::now();
    while (enqueued.load() < n) {
      if (enqueued.load() != seen) seen = enqueued.load(), moved = Clock::now();
      if (Ms(moved, Clock::now()) > 50.0) break;
      std::this_thread::yield();
    }
    const int before = enqueued.load();
    std::thread tb([&] {
      CHECK(cudaSetDevice(0));
      const auto t0 = Clock::now();
      SetFlag<<<1, 1, 0, b>>>(d);
      bMs = Ms(t0, Clock::now());
    });
    tb.join();
    ta.join();
    rescue.join();
    CHECK(cudaDeviceSynchronize());
    std::printf("%8d %10d %14.3f %16.3f %14.3f  %s\n", n, before, aMs, aMax, bMs,
                f[0] == 1 ? "ran while A's spinner waited" : "blocked until the rescue");
  }
  return 0;
}
