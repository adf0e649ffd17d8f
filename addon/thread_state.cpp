#include "addon/thread_state.h"

#include "addon/child_graphs.h"
#include "addon/errors.h"
#include "addon/nccl.h"
#include "addon/process_state.h"

namespace memra {

namespace {

// "main thread" or "worker <threadId>", for the claim-conflict message. Asks
// process.getBuiltinModule (Node >= 20.16); any failure just yields a vaguer label.
std::string ThreadLabel(Napi::Env env) {
  try {
    Napi::Value process = env.Global().Get("process");
    if (!process.IsObject()) return "thread";
    Napi::Value getBuiltin = process.As<Napi::Object>().Get("getBuiltinModule");
    if (!getBuiltin.IsFunction()) return "thread";
    Napi::Value wt = getBuiltin.As<Napi::Function>().Call(
        process, {Napi::String::New(env, "node:worker_threads")});
    if (!wt.IsObject()) return "thread";
    Napi::Object o = wt.As<Napi::Object>();
    Napi::Value isMain = o.Get("isMainThread");
    if (isMain.IsBoolean() && isMain.As<Napi::Boolean>().Value()) return "main thread";
    Napi::Value id = o.Get("threadId");
    if (id.IsNumber()) return "worker " + std::to_string(id.As<Napi::Number>().Int64Value());
    return "worker";
  } catch (const Napi::Error&) {
    return "thread";
  }
}

}  // namespace

void ThreadState::Install(Napi::Env env) {
  if (env.GetInstanceData<ThreadState>() != nullptr) return;
  // Default finalizer deletes it at env teardown, which runs ~ThreadState.
  env.SetInstanceData<ThreadState>(new ThreadState(env, ThreadLabel(env)));
}

ThreadState& ThreadState::Of(Napi::Env env) {
  ThreadState* ts = env.GetInstanceData<ThreadState>();
  if (ts == nullptr) ThrowError(env, "memra: addon state missing for this thread", "MEMRA_STATE");
  return *ts;
}

int ThreadState::RequireBound(Napi::Env env, const char* fn) const {
  if (bound < 0) {
    ThrowError(env,
               std::string(fn) + ": no device bound on this thread: call bindDevice(ordinal) first",
               "MEMRA_NO_DEVICE");
  }
  return bound;
}

cudaError_t ThreadState::ReleaseAll(const char** failedCall) noexcept {
  cudaError_t first = cudaSuccess;
  const char* firstCall = nullptr;
  auto note = [&](cudaError_t e, const char* call) {
    if (e != cudaSuccess && first == cudaSuccess) {
      first = e;
      firstCall = call;
    }
  };
  if (bound >= 0) {
    note(cudaSetDevice(bound), "cudaSetDevice");
    // A capture left open would make the drain below an illegal sync on a capturing stream.
    for (cudaStream_t s : capturing) AbandonCapture(s);
    // Everything below may still be in use by queued work: drain first.
    const cudaError_t drained = cudaDeviceSynchronize();
    note(drained, "cudaDeviceSynchronize");
    // The drain waited for the LL server's grid to stop (it stops once idle with nothing issued),
    // so its memory can go now.
    llServer.reset();
    // Graphs before communicators: a graph that captured NCCL calls holds resources NCCL
    // releases when the graph goes, which must not happen after the communicator is gone.
    for (auto& [exec, rec] : graphs) {
      note(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
      note(cudaGraphDestroy(rec.graph), "cudaGraphDestroy");
      for (cudaGraph_t c : rec.heldChildren) child_graphs::Drop(c);
    }
    // Forced: a parent on the peer's thread may still hold one of these if that thread tears
    // down later, but CUDA cloned each child into its parents, so the parents stay valid.
    for (cudaGraph_t c : childGraphs) {
      child_graphs::Remove(c, true, nullptr);
      note(cudaGraphDestroy(c), "cudaGraphDestroy(child)");
    }
    // After the drain no collective of ours is in flight, so a destroy has nothing to wait for.
    // If the drain failed the device is broken and a destroy might wait forever: abort instead.
    for (void* c : ncclComms) ReleaseNcclCommAtTeardown(c, drained != cudaSuccess);
    for (cudaEvent_t e : events) note(cudaEventDestroy(e), "cudaEventDestroy");
    for (cudaStream_t s : streams) note(cudaStreamDestroy(s), "cudaStreamDestroy");
    for (void* p : deviceAllocs) note(cudaFree(p), "cudaFree");
    for (void* p : hostAllocs) note(cudaFreeHost(p), "cudaFreeHost");
    for (auto& [p, rec] : registrations) {
      note(cudaHostUnregister(p), "cudaHostUnregister");
      // Legal in the env finalizer: node finalizes instance data before the env's remaining
      // references, precisely so addons can delete theirs here.
      if (rec.buffer != nullptr) napi_delete_reference(env_, rec.buffer);
    }
    process::Release(bound, this);
  }
  events.clear();
  streams.clear();
  deviceAllocs.clear();
  expertSync = nullptr;
  hostAllocs.clear();
  registrations.clear();
  graphs.clear();
  childGraphs.clear();
  capturing.clear();
  ncclComms.clear();
  bound = -1;
  loopback = false;
  (void)cudaGetLastError();
  if (failedCall != nullptr) *failedCall = firstCall;
  return first;
}

ThreadState::~ThreadState() {
  try {
    ReleaseAll(nullptr);
  } catch (...) {
    // ReleaseAll is noexcept; this guards only against a future edit.
  }
}

void AbandonCapture(cudaStream_t s) noexcept {
  cudaGraph_t g = nullptr;
  (void)cudaStreamEndCapture(s, &g);
  if (g != nullptr) (void)cudaGraphDestroy(g);
}

void ThrowForeignHandle(Napi::Env env, const char* fn, const char* what, const void* handle) {
  ThrowError(env,
             std::string(fn) + ": " + what + " " + Hex(handle) +
                 " was not created by this thread (or was already released)",
             "MEMRA_FOREIGN_HANDLE");
}

}  // namespace memra
