// The LL server's two blocks as the addon makes them (LlServer::Create, addon/ll_server.cpp), for
// the probes that drive the server without Node: the control block in device memory and the job
// slots in mapped host memory, both zeroed, with the address the device reads the slots at. The
// probes never free them: each lives until its process ends.
#pragma once

#include <cstring>

#include "cu/tp_ll_server.h"
#include "scripts/probes/probe_cuda.h"

struct ServerBlocks {
  MemraLlServerCtl* ctl;
  MemraLlServerHost* host;          // as the host addresses it
  MemraLlServerHost* hostOnDevice;  // as the device does
};

inline ServerBlocks AllocServerBlocks() {
  ServerBlocks b{};
  CHECK(cudaMalloc(&b.ctl, sizeof *b.ctl));
  CHECK(cudaMemset(b.ctl, 0, sizeof *b.ctl));
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&b.host), sizeof *b.host, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(static_cast<void*>(b.host), 0, sizeof *b.host);
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&b.hostOnDevice), b.host, 0));
  return b;
}
