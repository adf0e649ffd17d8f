#include "addon/parent_graph.h"

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "addon/args.h"
#include "addon/child_graphs.h"
#include "addon/errors.h"
#include "addon/graph.h"
#include "addon/stream.h"
#include "addon/thread_state.h"

namespace memra {

namespace {

constexpr uint32_t kTxCopies = 4;  // owner -> peer: xq, xs, ids, weights
constexpr uint32_t kCopies = kTxCopies + 1;  // then peer -> owner: the contributions

struct CopySpec {
  uintptr_t dst;
  uintptr_t src;
  uint64_t bytes;
};

// Reads copies[i] = { dst, src, bytes }, naming the exact field at fault.
CopySpec ReadCopy(Napi::Env env, const Napi::Array& copies, uint32_t i, const char* fn) {
  const Napi::Value v = copies.Get(i);
  const std::string at = "copies[" + std::to_string(i) + "]";
  if (!v.IsObject()) ThrowArgError(env, fn, at.c_str(), "an object { dst, src, bytes }", v);
  const Napi::Object o = v.As<Napi::Object>();
  auto field = [&](const char* name) -> uint64_t {
    const std::string where = at + "." + name;
    return static_cast<uint64_t>(ReadIntValue(env, o.Get(name), fn, where.c_str(), 1,
                                              kMaxSafeInt, "a positive safe integer"));
  };
  return CopySpec{static_cast<uintptr_t>(field("dst")), static_cast<uintptr_t>(field("src")),
                  field("bytes")};
}

// The device `p` lives on, or -1 when CUDA does not know it as device memory.
int DeviceOfPointer(uintptr_t p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, reinterpret_cast<const void*>(p)) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

// The seed's hazard "peer pointers resolved under the right device": a copy whose ends are not on
// the devices its direction says would still run (unified addressing accepts any pair), moving the
// wrong rank's bytes. Refused before any node exists.
void RequireEnds(Napi::Env env, const CopySpec& c, uint32_t i, int srcDevice, int dstDevice,
                 const char* fn) {
  const int s = DeviceOfPointer(c.src), d = DeviceOfPointer(c.dst);
  if (s == srcDevice && d == dstDevice) return;
  ThrowError(env,
             std::string(fn) + ": copies[" + std::to_string(i) + "] must move device " +
                 std::to_string(srcDevice) + "'s memory to device " + std::to_string(dstDevice) +
                 "'s, but src " + Hex(c.src) + " is " +
                 (s < 0 ? std::string("not device memory") : "on device " + std::to_string(s)) +
                 " and dst " + Hex(c.dst) + " is " +
                 (d < 0 ? std::string("not device memory") : "on device " + std::to_string(d)),
             "MEMRA_BAD_COPY");
}

// The runtime API gives a memcpy node the context current when the node is added (the seed's
// driver-API `graph_ctx`), so the peer -> owner copy is added under the PEER's device, as the
// seed does. Restores this thread's bound device on every path, throws included.
class ScopedDevice {
 public:
  ScopedDevice(int device, int restore) : restore_(restore) { err_ = cudaSetDevice(device); }
  ~ScopedDevice() { (void)cudaSetDevice(restore_); }
  cudaError_t error() const { return err_; }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int restore_;
  cudaError_t err_;
};

// What a parent build has made so far. Any way out of ParentGraphBuild short of Keep(), a throw
// at any step, undoes all of it once: nothing is left half-built or held by a parent that never
// came to be.
class PartialParent {
 public:
  PartialParent() { held.reserve(3); }
  ~PartialParent() {
    if (kept_) return;
    for (cudaGraph_t c : held) child_graphs::Drop(c);
    bool failed = exec != nullptr && cudaGraphExecDestroy(exec) != cudaSuccess;
    failed = (parent != nullptr && cudaGraphDestroy(parent) != cudaSuccess) || failed;
    // This runs after ThrowCudaError cleared the last error: a failed undo must not surface as
    // the next launch's error (the launchers return cudaGetLastError).
    if (failed) (void)cudaGetLastError();
  }
  PartialParent(const PartialParent&) = delete;
  PartialParent& operator=(const PartialParent&) = delete;
  // The thread's graph table owns it all from here.
  void Keep() { kept_ = true; }

  std::vector<cudaGraph_t> held;  // children this build holds (child_graphs::Hold)
  cudaGraph_t parent = nullptr;
  cudaGraphExec_t exec = nullptr;

 private:
  bool kept_ = false;
};

void RequireOwnedChild(Napi::Env env, const ThreadState& ts, cudaGraph_t g, const char* fn) {
  RequireOwned(env, ts.childGraphs, g, fn, "child graph");
}

Napi::Value StreamEndCaptureChild(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "streamEndCaptureChild";
  const auto s = ReadHandle<cudaStream_t>(info, 0, fn, "stream");
  const int device = RequireBoundStream(env, ts, s, fn);
  cudaGraph_t graph = EndCaptureOrThrow(env, ts, s, device, "child graph");
  try {
    ts.childGraphs.insert(graph);
    child_graphs::Add(graph, device);
    return AddressToValue(env, graph);
  } catch (...) {
    child_graphs::Remove(graph, true, nullptr);
    ts.childGraphs.erase(graph);
    (void)cudaGraphDestroy(graph);
    throw;
  }
}

Napi::Value ChildGraphDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "childGraphDestroy";
  const auto g = ReadHandle<cudaGraph_t>(info, 0, fn, "child");
  const int device = ts.RequireBound(env, fn);
  RequireOwnedChild(env, ts, g, fn);
  std::string why;
  if (!child_graphs::Remove(g, false, &why)) {
    ThrowError(env, std::string(fn) + ": child graph " + Hex(g) + ": " + why, "MEMRA_GRAPH_HELD");
  }
  ts.childGraphs.erase(g);
  MEMRA_CUDA_CHECK(env, device, cudaGraphDestroy(g), "cudaGraphDestroy(child=" + Hex(g) + ")");
  return env.Undefined();
}

// parentGraphBuild(ownerChild, peerChild, postChild, peerDevice, copies[5], stream) -> graph.
// The seed's shape (003, add_parent):
//
//   ownerChild ─────────────────────────────────────────────┐
//   tx0..tx3 (owner -> peer) ── peerChild ── rx (peer -> owner) ── postChild
//
// The owner's half runs beside the chain that feeds the peer; the post child (merge and FFN tail)
// waits for both. The executable graph goes into this thread's graph table (graphLaunch,
// graphDestroy) and holds its three children until it is destroyed.
Napi::Value ParentGraphBuild(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "parentGraphBuild";
  const auto ownerChild = ReadHandle<cudaGraph_t>(info, 0, fn, "ownerChild");
  const auto peerChild = ReadHandle<cudaGraph_t>(info, 1, fn, "peerChild");
  const auto postChild = ReadHandle<cudaGraph_t>(info, 2, fn, "postChild");
  const int peerDevice = ReadOrdinal(info, 3, fn, "peerDevice");
  if (!info[4].IsArray() || info[4].As<Napi::Array>().Length() != kCopies) {
    ThrowArgError(env, fn, "copies", "an array of 5 { dst, src, bytes } (4 owner->peer, then peer->owner)", info[4]);
  }
  const Napi::Array copyArray = info[4].As<Napi::Array>();
  const auto s = ReadHandle<cudaStream_t>(info, 5, fn, "stream");
  const int device = RequireBoundStream(env, ts, s, fn);
  RequireOwnedChild(env, ts, ownerChild, fn);
  RequireOwnedChild(env, ts, postChild, fn);
  // In loopback both ranks' threads bound this device (bindDevice says why that is safe): the
  // owner -> peer copies are then copies within one device's memory, and the peer child's nodes
  // run on the same device as the owner's.
  if (peerDevice == device && !ts.loopback) {
    ThrowError(env,
               std::string(fn) + ": peerDevice " + std::to_string(peerDevice) +
                   " is this thread's own device (two ranks share a device only when both bound it in loopback)",
               "MEMRA_BAD_PEER");
  }
  CopySpec copies[kCopies];
  for (uint32_t i = 0; i < kCopies; ++i) {
    copies[i] = ReadCopy(env, copyArray, i, fn);
    if (i < kTxCopies) RequireEnds(env, copies[i], i, device, peerDevice, fn);
    else RequireEnds(env, copies[i], i, peerDevice, device, fn);
  }

  // Hold the children BEFORE touching them: the peer's thread could otherwise destroy its child
  // between a check here and its use below. A held child refuses to be destroyed.
  PartialParent build;
  for (cudaGraph_t c : {ownerChild, postChild, peerChild}) {
    if (!child_graphs::Hold(c)) {
      ThrowError(env,
                 std::string(fn) + ": child graph " + Hex(c) +
                     " is not a live child graph (captured and not destroyed)",
                 "MEMRA_BAD_CHILD");
    }
    build.held.push_back(c);
  }
  const int peerOf = child_graphs::DeviceOf(peerChild);
  if (peerOf != peerDevice) {
    ThrowError(env,
               std::string(fn) + ": peerChild " + Hex(peerChild) + " was captured on device " +
                   std::to_string(peerOf) + ", not the peer device " + std::to_string(peerDevice),
               "MEMRA_BAD_CHILD");
  }

  cudaGraph_t parent = nullptr;
  MEMRA_CUDA_CHECK(env, device, cudaGraphCreate(&parent, 0), "cudaGraphCreate (EP parent graph)");
  build.parent = parent;
  auto copyCall = [&](uint32_t i) {
    return "cudaGraphAddMemcpyNode1D(copies[" + std::to_string(i) + "]: " + Hex(copies[i].src) +
           " -> " + Hex(copies[i].dst) + ", " + std::to_string(copies[i].bytes) + " bytes)";
  };
  cudaGraphNode_t ownerNode = nullptr, peerNode = nullptr, rxNode = nullptr, postNode = nullptr;
  cudaGraphNode_t tx[kTxCopies] = {};
  MEMRA_CUDA_CHECK(env, device, cudaGraphAddChildGraphNode(&ownerNode, parent, nullptr, 0, ownerChild),
                   "cudaGraphAddChildGraphNode(ownerChild=" + Hex(ownerChild) + ")");
  for (uint32_t i = 0; i < kTxCopies; ++i) {
    const CopySpec& c = copies[i];
    MEMRA_CUDA_CHECK(env, device,
                     cudaGraphAddMemcpyNode1D(&tx[i], parent, nullptr, 0, reinterpret_cast<void*>(c.dst),
                                              reinterpret_cast<const void*>(c.src), c.bytes, cudaMemcpyDefault),
                     copyCall(i));
  }
  MEMRA_CUDA_CHECK(env, device, cudaGraphAddChildGraphNode(&peerNode, parent, tx, kTxCopies, peerChild),
                   "cudaGraphAddChildGraphNode(peerChild=" + Hex(peerChild) + ")");
  cudaError_t rxErr = cudaSuccess;
  {
    ScopedDevice under(peerDevice, device);
    MEMRA_CUDA_CHECK(env, device, under.error(),
                     "cudaSetDevice(" + std::to_string(peerDevice) + ") to add the peer->owner copy");
    const CopySpec& rx = copies[kTxCopies];
    rxErr = cudaGraphAddMemcpyNode1D(&rxNode, parent, &peerNode, 1, reinterpret_cast<void*>(rx.dst),
                                     reinterpret_cast<const void*>(rx.src), rx.bytes, cudaMemcpyDefault);
  }
  // Checked once the bound device is back: ThrowCudaError's clearing of the last error then
  // covers a failed restore too.
  MEMRA_CUDA_CHECK(env, device, rxErr, copyCall(kTxCopies) + " under device " + std::to_string(peerDevice));
  const cudaGraphNode_t postDeps[2] = {ownerNode, rxNode};
  MEMRA_CUDA_CHECK(env, device, cudaGraphAddChildGraphNode(&postNode, parent, postDeps, 2, postChild),
                   "cudaGraphAddChildGraphNode(postChild=" + Hex(postChild) + ")");

  MEMRA_CUDA_CHECK(env, device, cudaGraphInstantiateWithFlags(&build.exec, parent, 0),
                   "cudaGraphInstantiateWithFlags (EP parent graph)");
  // One-time setup now, not inside the first timed decode step.
  MEMRA_CUDA_CHECK(env, device, cudaGraphUpload(build.exec, s),
                   "cudaGraphUpload(EP parent graph, stream=" + Hex(s) + ")");
  const Napi::Value out = AddressToValue(env, build.exec);
  // A copy of the holds: if the insert throws, the guard still has them to drop.
  ts.graphs.emplace(build.exec, ThreadState::GraphRecord{parent, build.held});
  build.Keep();
  return out;
}

}  // namespace

void RegisterParentGraph(Napi::Env env, Napi::Object exports) {
  exports.Set("streamEndCaptureChild", Napi::Function::New(env, StreamEndCaptureChild, "streamEndCaptureChild"));
  exports.Set("childGraphDestroy", Napi::Function::New(env, ChildGraphDestroy, "childGraphDestroy"));
  exports.Set("parentGraphBuild", Napi::Function::New(env, ParentGraphBuild, "parentGraphBuild"));
}

}  // namespace memra
