// The host's half of the LL server (the protocol and why: cu/tp_ll_server.h). One per worker
// thread, made on its first eager LL join once `llConfigure` asked for it; it owns the server's
// control block, its mapped job slots and the stream its grid runs on, and releases them only
// after the grid has stopped.
#pragma once

#include <napi.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "cu/kernels.h"
#include "cu/tp_ll_server.h"

namespace memra {

// Throws unless CUDA loads modules eagerly in this process, which a resident grid needs
// (addon/module.cpp). llConfigure asks when a server is requested, so the refusal reaches the
// caller of setLlServe instead of faulting the first served join's ring record.
void RequireEagerModuleLoading(Napi::Env env);

class LlServer {
 public:
  // On the bound `device`; throws a JS error naming the failed call (nothing is left allocated).
  static std::unique_ptr<LlServer> Create(Napi::Env env, int device);
  // Waits (bounded) for the grid to stop, then frees everything; never throws. Call it after the
  // walk streams are drained: a job still issued keeps the grid running.
  ~LlServer();
  LlServer(const LlServer&) = delete;
  LlServer& operator=(const LlServer&) = delete;

  // Hands `job` to the server, ordered on `walk` after everything enqueued there before it.
  // What comes after it on `walk` waits for it once SettleWait runs, which every other call that
  // uses the stream does first (stream.h, RequireOwnedStream). Throws (and leaves nothing issued)
  // on failure.
  void Submit(Napi::Env env, const MemraLlJobArgs& job, cudaStream_t walk);
  // Before anything but another served join is enqueued on `s`, or `s` is queried, synchronized
  // or captured: if `s` is the walk stream and its newest job is not yet waited for, enqueue the
  // wait. Throws if the wait cannot be enqueued.
  void SettleWait(Napi::Env env, cudaStream_t s);

  // True for the stream the server's jobs are ordered on: the first one submitted on. Jobs are
  // released in seq order by stores on that stream; a second stream's stores could release job
  // k + 1 before job k's producer finished, so its joins are launched instead.
  bool Serves(cudaStream_t s) const { return walk_ == nullptr || walk_ == s; }

  // How long an idle grid keeps polling before it stops (a later submit launches it again).
  void set_idle_ns(uint64_t ns) { idleNs_ = ns; }
  uint64_t jobs() const { return jobs_; }
  uint64_t launches() const { return launches_; }
  // The mapped block as the host sees it now: what was issued, what the grid finished, its state.
  uint32_t issued() const { return host_->issued; }
  uint32_t done() const { return host_->done; }
  uint32_t state() const { return host_->state; }
  uint32_t generation() const { return generation_; }
  // For diagnosis only: the control block as the device holds it (a copy on a stream of its own,
  // so it answers while the walk stream or the grid is stuck), and whether a grid is running.
  bool ReadControl(MemraLlServerCtl* out, bool* gridRunning) const;

 private:
  explicit LlServer(int device) : device_(device) {}
  // Makes sure a grid will see job `seq` (already in `issued`): waits out a stop being decided,
  // and launches a new generation if the grid has stopped.
  void EnsureRunning(Napi::Env env, uint32_t seq);
  // Takes `issued` back to the job before `seq` and throws `message`: a job the stream will never
  // release must not keep the grid from stopping.
  [[noreturn]] void Withdraw(Napi::Env env, uint32_t seq, cudaError_t err, const std::string& call);

  int device_;
  uint64_t idleNs_ = 1000000;
  MemraLlServerCtl* ctl_ = nullptr;    // device memory
  MemraLlServerHost* host_ = nullptr;  // mapped pinned host memory, as the host addresses it
  // The same memory as the device addresses it (cudaHostGetDevicePointer: equal to host_ under
  // unified addressing, as the probe shows on the two-H200 machine, but that is CUDA's to say).
  MemraLlServerHost* hostOnDevice_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t walk_ = nullptr;  // the stream jobs are submitted on (Serves)
  uint32_t issued_ = 0;      // the newest job submitted (this thread's copy of host_->issued)
  uint32_t unsettled_ = 0;   // the newest job the walk stream does not yet wait for (0: none)
  uint32_t generation_ = 0;  // the newest grid launched
  uint64_t jobs_ = 0, launches_ = 0;
};

}  // namespace memra
