// The card's HBM read floor, which the probes state their figures against: 16 GiB read by
// memra_launch_read_floor (cu/read_floor.cu), `launches` launches a CUDA graph, the median of
// `replays` replays. Prints it and returns GB/s.
#pragma once

#include <cstdio>

#include "cu/kernels.h"
#include "scripts/probes/probe_cuda.h"

static float ReadFloorGBs(cudaStream_t s, int launches, int replays) {
  const size_t bytes = size_t(16) << 30;
  void* p;
  uint32_t* sink;
  CHECK(cudaMalloc(&p, bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemsetAsync(p, 0x3c, bytes, s));
  const auto body = [&] {
    for (int i = 0; i < launches; ++i) CHECK(memra_launch_read_floor(p, bytes, sink, s));
  };
  const double us = GraphReplayUs(s, body, body, replays) / launches;
  const float gbs = float(bytes / (us * 1e3));
  std::printf("read floor: %.0f GB/s (16 GiB, %.0f us)\n", gbs, us);
  CHECK(cudaFree(p));
  CHECK(cudaFree(sink));
  return gbs;
}
