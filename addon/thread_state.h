// Per-environment state (the main thread's, or one worker's), held as the env's instance data:
// the device this thread bound and every CUDA object (and NCCL communicator) it created. The env
// finalizer (thread exit, worker termination, normal process exit) drains the device and releases
// all of it, so a dead worker never strands pinned memory or a device claim.
#pragma once

#include <napi.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "addon/args.h"
#include "addon/ll_server.h"

namespace memra {

struct HostRegistrationRecord {
  size_t bytes;
  // Strong reference to the (Shared)ArrayBuffer: kernels may store into these pages until they
  // are unregistered, so the buffer must not be collected and its memory reused before then.
  napi_ref buffer;
};

class ThreadState {
 public:
  ThreadState(napi_env env, std::string label) : env_(env), label_(std::move(label)) {}
  ~ThreadState();  // env teardown; never throws
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;

  // Creates the env's instance on first use (module init).
  static void Install(Napi::Env env);
  static ThreadState& Of(Napi::Env env);

  // The bound ordinal; throws `<fn>: no device bound on this thread: ...` when none.
  int RequireBound(Napi::Env env, const char* fn) const;

  // Drains the bound device, destroys/frees/unregisters everything this thread created, drops
  // the claim and unbinds. Best effort: keeps going past failures and reports the first (its
  // call name in *failedCall). Never throws.
  cudaError_t ReleaseAll(const char** failedCall) noexcept;

  int bound = -1;
  // Bound with loopback (bindDevice): another rank of this process may share the device, and its
  // child graphs may feed this thread's parent graph on the same device.
  bool loopback = false;
  const std::string& label() const { return label_; }

  std::unordered_set<cudaStream_t> streams;
  std::unordered_set<cudaEvent_t> events;
  std::unordered_set<void*> deviceAllocs;
  std::unordered_set<void*> hostAllocs;
  std::unordered_map<void*, HostRegistrationRecord> registrations;
  // Executable graph -> the graph it was instantiated from, destroyed together, and for a parent
  // graph (addon/parent_graph.cpp) the children it holds, dropped with it: one entry, so no
  // release path can let a graph and its holds part.
  struct GraphRecord {
    cudaGraph_t graph;
    std::vector<cudaGraph_t> heldChildren;
  };
  std::unordered_map<cudaGraphExec_t, GraphRecord> graphs;
  // Child graphs this thread captured and never instantiated (seed 003's per-device children):
  // the one record of which thread owns a child. The process-wide table (addon/child_graphs.h)
  // keeps only each child's device and holders, which the peer's parent graph needs.
  std::unordered_set<cudaGraph_t> childGraphs;
  // Streams this thread began a capture on and has not ended. A device drain is an illegal
  // synchronisation while one of the device's streams is capturing, so teardown ends these first.
  std::unordered_set<cudaStream_t> capturing;
  // The experts' sync words (cu/model.h, MEMRA_EXPERT_SYNC_BYTES), zeroed at bind and also in
  // deviceAllocs: each pair of expert launches leaves them zeroed, and a thread runs its model
  // kernels on one stream at a time, so one set a thread serves every pair it launches.
  unsigned* expertSync = nullptr;
  // ncclComm_t values (opaque pointers; the type lives in addon/nccl_abi.h).
  std::unordered_set<void*> ncclComms;
  // The LL link's buffers as `llConfigure` set them: the same for every join of the link, so a
  // launch reads only the join's own eight arguments (each argument read through N-API costs
  // tens of nanoseconds on the eager join's critical path).
  struct LlLink {
    bool set = false;
    uintptr_t selfRecv = 0, peerRecv = 0, selfState = 0, peerState = 0, err = 0;
    uint64_t cap = 0, spinLimit = 0;
    int rank = 0;
    // 0: every eager join is a launch; else eager joins that fit go to the LL server, whose grid
    // stops after this long idle.
    uint64_t serveIdleNs = 0;
  } ll;
  // The LL server (addon/ll_server.h), made on the first eager join that uses it.
  std::unique_ptr<LlServer> llServer;

 private:
  napi_env env_;
  std::string label_;
};

// Ends a capture on `s` and destroys whatever graph it yields, reporting nothing: for a capture
// that is being given up on (a failed begin, or teardown), usually already invalidated.
void AbandonCapture(cudaStream_t s) noexcept;

// Throws `<fn>: <what> <handle> was not created by this thread (or was already released)`.
[[noreturn]] void ThrowForeignHandle(Napi::Env env, const char* fn, const char* what,
                                     const void* handle);

// Throws ThrowForeignHandle's error unless `handle` is in `owned` (one of ThreadState's sets or
// maps): a handle another thread made, or one already released, is refused before CUDA sees it.
template <typename Owned, typename Handle>
void RequireOwned(Napi::Env env, const Owned& owned, Handle handle, const char* fn,
                  const char* what) {
  if (owned.count(handle) == 0) ThrowForeignHandle(env, fn, what, handle);
}

// Records a handle just created in `owned` and returns it to JS. If either step throws,
// `release` frees the handle before the exception goes on: a handle neither JS nor the env
// teardown knows about would leak for the life of the process.
template <typename Key, typename Handle, typename Release>
Napi::Value AdoptHandle(Napi::Env env, std::unordered_set<Key>& owned, Handle handle,
                        Release release) {
  try {
    owned.insert(handle);
    return AddressToValue(env, handle);
  } catch (...) {
    owned.erase(handle);
    release(handle);
    throw;
  }
}

}  // namespace memra
