// NCCL, opened at run time: libnccl.so.2 is dlopen'ed on first use, once per process, so the
// addon loads (and everything but the nccl* calls works) where NCCL is not installed. Each
// communicator belongs to the thread that created it, on that thread's bound device.
#pragma once

#include <napi.h>

namespace memra {

void RegisterNccl(Napi::Env env, Napi::Object exports);

// Env teardown, after the device drained: ncclCommDestroy, or ncclCommAbort when `abort` (the
// drain failed, so a destroy could wait on work that never finishes). Failures are dropped: the
// thread is going away and there is nothing left to retry. Never throws.
void ReleaseNcclCommAtTeardown(void* comm, bool abort) noexcept;

}  // namespace memra
