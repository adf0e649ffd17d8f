// How the probes call CUDA: a failed runtime call ends the probe, naming the call and where it
// was; a driver entry point is resolved through the runtime, as the addon does (it links the
// static runtime only, never libcuda).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

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

// n floats on the device, uniform in [-scale, scale) from mt19937(seed): the first `period` of
// them, repeated (a cache of gigabytes needs no host array its size).
static float* DeviceRandoms(size_t n, float scale, uint32_t seed, size_t period = SIZE_MAX) {
  std::vector<float> h(std::min(n, period));
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& v : h) v = u(g);
  float* d;
  CHECK(cudaMalloc(&d, n * 4));
  for (size_t at = 0; at < n; at += h.size()) {
    CHECK(cudaMemcpy(d + at, h.data(), std::min(h.size(), n - at) * 4, cudaMemcpyHostToDevice));
  }
  return d;
}

// n elements of T on the device, every byte of them `byte`.
template <class T>
static T* DeviceFilled(size_t n, int byte) {
  T* p;
  CHECK(cudaMalloc(&p, n * sizeof(T)));
  CHECK(cudaMemset(p, byte, n * sizeof(T)));
  return p;
}

// What `capture()` enqueues on s, as an instantiated CUDA graph; `warm()` runs once first,
// uncaptured, so that an error surfaces before the capture.
template <class Warm, class Capture>
static cudaGraphExec_t CapturedGraph(cudaStream_t s, Warm warm, Capture capture) {
  warm();
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGetLastError());
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  capture();
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaGraphDestroy(g));
  return ge;
}

// What enqueue() puts on s, between the events a and b: its device ms.
template <class Enqueue>
static float TimedMs(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, Enqueue enqueue) {
  CHECK(cudaEventRecord(a, s));
  enqueue();
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// One replay of ge on s between the events a and b: its device ms.
static float TimedReplayMs(cudaStream_t s, cudaGraphExec_t ge, cudaEvent_t a, cudaEvent_t b) {
  return TimedMs(s, a, b, [&] { CHECK(cudaGraphLaunch(ge, s)); });
}

// Median device µs of one replay of a CUDA graph captured from `capture()` on s (CapturedGraph),
// over `replays` replays each between an event pair.
template <class Warm, class Capture>
static double GraphReplayUs(cudaStream_t s, Warm warm, Capture capture, int replays) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  const cudaGraphExec_t ge = CapturedGraph(s, warm, capture);
  CHECK(cudaGraphLaunch(ge, s));
  std::vector<double> us;
  for (int r = 0; r < replays; ++r) us.push_back(TimedReplayMs(s, ge, a, b) * 1000.0);
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Median device µs of one of `launches` back-to-back enqueues of `one()` on s, from a graph of them
// (GraphReplayUs over `replays` replays): what each costs between its neighbours, with no timing
// event between two launches. 30 launches, as many as `bench` has layers.
template <class One>
static double GraphPerLaunchUs(cudaStream_t s, One one, int launches = 30, int replays = 15) {
  const auto all = [&] {
    for (int i = 0; i < launches; ++i) one();
  };
  return GraphReplayUs(s, one, all, replays) / launches;
}
