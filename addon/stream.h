// Streams: created non-blocking, owned by the thread that created them.
#pragma once

#include <napi.h>

#include <cuda_runtime_api.h>

#include "addon/thread_state.h"

namespace memra {

void RegisterStream(Napi::Env env, Napi::Object exports);

// Requires that this thread created `s` and has not destroyed it: enqueueing on a destroyed
// stream is undefined behaviour, not an error code. Call after RequireBound, so an unbound
// thread hears about the binding first.
//
// Every call that enqueues on a stream, queries, synchronizes or captures it comes here first, so
// this is also where the LL server's deferred wait is settled (addon/ll_server.h): after a served
// join, nothing but another served join may be enqueued on its stream without waiting for it.
// launchLl alone checks ownership without settling, and settles when it launches.
void RequireOwnedStream(Napi::Env env, const ThreadState& ts, cudaStream_t s, const char* fn);

// RequireBound then RequireOwnedStream, for a call whose only handle is its stream; returns the
// bound device.
int RequireBoundStream(Napi::Env env, const ThreadState& ts, cudaStream_t s, const char* fn);

// Argument i as this thread's stream (`stream`), for a launch: reads it into *s, then
// RequireBoundStream; returns the bound device.
int Bound(Napi::Env env, const Napi::CallbackInfo& info, size_t i, const char* fn, cudaStream_t* s);

}  // namespace memra
