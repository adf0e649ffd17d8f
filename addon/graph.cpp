#include "addon/graph.h"

#include <string>

#include <cuda_runtime_api.h>

#include "addon/args.h"
#include "addon/child_graphs.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "addon/thread_state.h"

namespace memra {

namespace {

void RequireOwnedGraph(Napi::Env env, const ThreadState& ts, cudaGraphExec_t g, const char* fn) {
  RequireOwned(env, ts.graphs, g, fn, "graph");
}

// graphDestroy drains the device; a stream of this thread being captured would make that drain
// an illegal synchronisation and invalidate the capture.
void RequireNoCapture(Napi::Env env, const ThreadState& ts, const char* fn) {
  if (ts.capturing.empty()) return;
  ThrowError(env,
             std::string(fn) + ": stream " + Hex(*ts.capturing.begin()) +
                 " of this thread is being captured, and this call drains the device, which a "
                 "capture forbids: call streamEndCapture first",
             "MEMRA_CAPTURING");
}

Napi::Value StreamBeginCapture(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto s = ReadHandle<cudaStream_t>(info, 0, "streamBeginCapture", "stream");
  const int device = RequireBoundStream(env, ts, s, "streamBeginCapture");
  // Relaxed: the peer's worker thread keeps making CUDA calls (some of them, like cudaMalloc,
  // "unsafe" in the stricter modes) while this thread captures, and a capture that spans both
  // devices' streams (forked and joined by cross-device events) pulls the peer's stream into it.
  // The global and thread-local modes would fail those calls or this capture.
  MEMRA_CUDA_CHECK(env, device, cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed),
                   "cudaStreamBeginCapture(stream=" + Hex(s) + ", cudaStreamCaptureModeRelaxed)");
  try {
    ts.capturing.insert(s);
  } catch (...) {
    ts.capturing.erase(s);
    AbandonCapture(s);
    throw;
  }
  return env.Undefined();
}

}  // namespace

cudaGraph_t EndCaptureOrThrow(Napi::Env env, ThreadState& ts, cudaStream_t s, int device,
                              const char* what) {
  // Whatever happens next the stream is no longer capturing: a failed end still ends it.
  ts.capturing.erase(s);
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(s, &graph);
  if (err != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    std::string call = "cudaStreamEndCapture(stream=" + Hex(s) + ") of a " + what;
    if (err == cudaErrorStreamCaptureInvalidated || err == cudaErrorStreamCaptureUnjoined) {
      call += ": the capture was invalidated (a call in it is not capturable, or a cross-stream "
              "dependency was never joined back)";
    }
    ThrowCudaError(env, err, call, device);
  }
  if (graph == nullptr) {
    ThrowError(env, std::string("cudaStreamEndCapture(stream=") + Hex(s) + ") produced no " + what,
               "MEMRA_EMPTY_CAPTURE");
  }
  return graph;
}

namespace {

Napi::Value StreamEndCapture(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto s = ReadHandle<cudaStream_t>(info, 0, "streamEndCapture", "stream");
  const int device = RequireBoundStream(env, ts, s, "streamEndCapture");
  cudaGraph_t graph = EndCaptureOrThrow(env, ts, s, device, "graph");

  cudaGraphExec_t exec = nullptr;
  const cudaError_t instErr = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  if (instErr != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    ThrowCudaError(env, instErr,
                   "cudaGraphInstantiateWithFlags(flags=0) of the graph captured on stream " +
                       Hex(s),
                   device);
  }
  // Uploading now moves the one-time setup of the executable graph off the first launch, which
  // would otherwise pay it inside the first timed decode step.
  const cudaError_t upErr = cudaGraphUpload(exec, s);
  if (upErr != cudaSuccess) {
    (void)cudaGraphExecDestroy(exec);
    (void)cudaGraphDestroy(graph);
    ThrowCudaError(env, upErr, "cudaGraphUpload(graph=" + Hex(exec) + ", stream=" + Hex(s) + ")",
                   device);
  }
  try {
    ts.graphs.emplace(exec, ThreadState::GraphRecord{graph, {}});
    return AddressToValue(env, exec);
  } catch (...) {
    ts.graphs.erase(exec);
    (void)cudaGraphExecDestroy(exec);
    (void)cudaGraphDestroy(graph);
    throw;
  }
}

Napi::Value GraphLaunch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto g = ReadHandle<cudaGraphExec_t>(info, 0, "graphLaunch", "graph");
  const auto s = ReadHandle<cudaStream_t>(info, 1, "graphLaunch", "stream");
  const int device = ts.RequireBound(env, "graphLaunch");
  RequireOwnedGraph(env, ts, g, "graphLaunch");
  RequireOwnedStream(env, ts, s, "graphLaunch");
  MEMRA_CUDA_CHECK(env, device, cudaGraphLaunch(g, s),
                   "cudaGraphLaunch(graph=" + Hex(g) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value GraphDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto g = ReadHandle<cudaGraphExec_t>(info, 0, "graphDestroy", "graph");
  const int device = ts.RequireBound(env, "graphDestroy");
  RequireOwnedGraph(env, ts, g, "graphDestroy");
  RequireNoCapture(env, ts, "graphDestroy");
  const auto entry = ts.graphs.extract(g);
  const cudaGraph_t graph = entry.mapped().graph;
  // A parent graph (addon/parent_graph.cpp) lets go of its children once it is gone.
  for (cudaGraph_t c : entry.mapped().heldChildren) child_graphs::Drop(c);
  // An executable graph may still be running from an earlier graphLaunch. CUDA itself would
  // defer the free of an in-flight graph, but the caller's next step after destroying one is to
  // free or re-zero what its nodes point at (staging buffers, the one-shot signal blocks and err
  // words), and a replay still in flight would then read freed memory or see its barrier epochs
  // reset under it. Draining makes "destroyed" mean "no replay is running". A graph launch is one
  // operation on its stream of this device that completes only when every node has, including
  // nodes on the peer's device, so this device's drain covers those too.
  const cudaError_t syncErr = cudaDeviceSynchronize();
  const cudaError_t execErr = cudaGraphExecDestroy(g);
  const cudaError_t graphErr = cudaGraphDestroy(graph);
  MEMRA_CUDA_CHECK(env, device, syncErr,
                   "cudaDeviceSynchronize() before cudaGraphExecDestroy(graph=" + Hex(g) + ")");
  MEMRA_CUDA_CHECK(env, device, execErr, "cudaGraphExecDestroy(graph=" + Hex(g) + ")");
  MEMRA_CUDA_CHECK(env, device, graphErr,
                   "cudaGraphDestroy(graph=" + Hex(graph) + ") (of executable graph " + Hex(g) +
                       ")");
  return env.Undefined();
}

}  // namespace

void RegisterGraph(Napi::Env env, Napi::Object exports) {
  exports.Set("streamBeginCapture",
              Napi::Function::New(env, StreamBeginCapture, "streamBeginCapture"));
  exports.Set("streamEndCapture", Napi::Function::New(env, StreamEndCapture, "streamEndCapture"));
  exports.Set("graphLaunch", Napi::Function::New(env, GraphLaunch, "graphLaunch"));
  exports.Set("graphDestroy", Napi::Function::New(env, GraphDestroy, "graphDestroy"));
}

}  // namespace memra
