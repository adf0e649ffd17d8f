// What a per-join device timestamp can cost and resolve on this GPU (docs/performance.md, "Profiling's cost"):
//   1. %globaltimer's resolution: the smallest nonzero step one thread sees in a tight loop.
//   2. What a timing event costs between kernels: a chain of short kernels replayed from a graph,
//      with and without an event-record node (cudaEventRecordExternal) between every second pair,
//      and the same eagerly on a stream (device time, CUDA events around the whole chain).
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o timing-probe scripts/probes/timing-probe.cu
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "cu/globaltimer.cuh"
#include "scripts/probes/probe_cuda.h"


// Smallest nonzero step and the number of distinct values over `iters` reads.
__global__ void TimerSteps(unsigned long long* out, int iters) {
  unsigned long long prev = GlobalTimerNs(), minStep = ~0ull, changes = 0;
  for (int i = 0; i < iters; i++) {
    const unsigned long long t = GlobalTimerNs();
    if (t != prev) { changes++; if (t - prev < minStep) minStep = t - prev; prev = t; }
  }
  out[0] = minStep;
  out[1] = changes;
}

// A short kernel, like a small join: a few hundred nanoseconds of work on one block.
__global__ void Short(float* p) {
  float v = p[threadIdx.x];
  for (int i = 0; i < 64; i++) v = v * 0.999f + 0.001f;
  p[threadIdx.x] = v;
}

static float Chain(cudaStream_t s, float* buf, int kernels, cudaEvent_t* marks, int nMarks, bool capture, int replays) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  float ms = 0;
  if (capture) {
    cudaGraph_t g;
    cudaGraphExec_t x;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0, m = 0; k < kernels; k++) {
      Short<<<1, 128, 0, s>>>(buf);
      if (m < nMarks && k % 2 == 0) CHECK(cudaEventRecordWithFlags(marks[m++], s, cudaEventRecordExternal));
    }
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));  // warm-up
    CHECK(cudaEventRecord(a, s));
    for (int r = 0; r < replays; r++) CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
  } else {
    // Eagerly: the host enqueues far ahead (kernels are queued before the first finishes), so
    // the device time is the device's, not the launches'.
    CHECK(cudaEventRecord(a, s));
    for (int r = 0; r < replays; r++) {
      for (int k = 0, m = 0; k < kernels; k++) {
        Short<<<1, 128, 0, s>>>(buf);
        if (m < nMarks && k % 2 == 0) CHECK(cudaEventRecord(marks[m++], s));
      }
    }
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms * 1000.f / replays;  // us per chain
}

int main() {
  unsigned long long* d;
  unsigned long long h[2];
  CHECK(cudaMalloc(&d, sizeof h));
  TimerSteps<<<1, 1>>>(d, 1 << 20);
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  std::printf("globaltimer: smallest step %llu ns, %llu changes over 2^20 reads\n", h[0], h[1]);

  const int kernels = 600, marks = 300, replays = 50;
  float* buf;
  CHECK(cudaMalloc(&buf, 128 * sizeof(float)));
  CHECK(cudaMemset(buf, 0x3c, 128 * sizeof(float)));  // 0x3c3c3c3c: a small positive float, not zero
  cudaEvent_t ev[marks];
  for (auto& e : ev) CHECK(cudaEventCreate(&e));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int rep = 0; rep < 2; rep++) {
    const float g0 = Chain(s, buf, kernels, ev, 0, true, replays),
                g1 = Chain(s, buf, kernels, ev, marks, true, replays);
    const float e0 = Chain(s, buf, kernels, ev, 0, false, 10), e1 = Chain(s, buf, kernels, ev, marks, false, 10);
    std::printf("pass %d: %d kernels: graph %.1f us, + %d event nodes %.1f us (%.2f us each); "
                "eager %.1f us, + %d events %.1f us (%.2f us each)\n",
                rep, kernels, g0, marks, g1, (g1 - g0) / marks, e0, marks, e1, (e1 - e0) / marks);
  }
  return 0;
}
