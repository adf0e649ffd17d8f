// CUDA graphs by stream capture: begin/end a capture on an owned stream, launch and destroy the
// executable graph. Executable graphs are owned by the thread that instantiated them.
#pragma once

#include <napi.h>

#include <cuda_runtime_api.h>

namespace memra {

class ThreadState;

// Ends the capture on `s` (which is no longer capturing afterwards, whatever happens) and
// returns its graph, owned by the caller. Throws naming `what` (a graph, a child graph) on
// failure, with the likely cause when CUDA says the capture was invalidated.
cudaGraph_t EndCaptureOrThrow(Napi::Env env, ThreadState& ts, cudaStream_t s, int device,
                              const char* what);

void RegisterGraph(Napi::Env env, Napi::Object exports);

}  // namespace memra
