#include "addon/stream.h"

#include <string>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/ll_server.h"

namespace memra {

void RequireOwnedStream(Napi::Env env, const ThreadState& ts, cudaStream_t s, const char* fn) {
  RequireOwned(env, ts.streams, s, fn, "stream");
  if (ts.llServer) ts.llServer->SettleWait(env, s);
}

int RequireBoundStream(Napi::Env env, const ThreadState& ts, cudaStream_t s, const char* fn) {
  const int device = ts.RequireBound(env, fn);
  RequireOwnedStream(env, ts, s, fn);
  return device;
}

int Bound(Napi::Env env, const Napi::CallbackInfo& info, size_t i, const char* fn, cudaStream_t* s) {
  *s = ReadHandle<cudaStream_t>(info, i, fn, "stream");
  return RequireBoundStream(env, ThreadState::Of(env), *s, fn);
}

namespace {

Napi::Value StreamCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const int device = ts.RequireBound(env, "streamCreate");
  cudaStream_t s = nullptr;
  MEMRA_CUDA_CHECK(env, device, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                   std::string("cudaStreamCreateWithFlags(cudaStreamNonBlocking)"));
  return AdoptHandle(env, ts.streams, s, cudaStreamDestroy);
}

Napi::Value StreamDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto s = ReadHandle<cudaStream_t>(info, 0, "streamDestroy", "stream");
  const int device = RequireBoundStream(env, ts, s, "streamDestroy");
  // The capture would outlive its stream, and teardown would then end it on a dead handle.
  if (ts.capturing.count(s) != 0) {
    ThrowError(env,
               "streamDestroy: stream " + Hex(s) +
                   " is being captured: call streamEndCapture first",
               "MEMRA_CAPTURING");
  }
  // Forget it whatever the outcome: a failed destroy leaves nothing usable behind.
  ts.streams.erase(s);
  MEMRA_CUDA_CHECK(env, device, cudaStreamDestroy(s), "cudaStreamDestroy(stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value StreamQuery(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto s = ReadHandle<cudaStream_t>(info, 0, "streamQuery", "stream");
  const int device = RequireBoundStream(env, ts, s, "streamQuery");
  // A stream can be capturing without this thread having begun it (it joined a multi-device
  // capture through an event wait); querying it would invalidate that capture. It counts as busy.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MEMRA_CUDA_CHECK(env, device, cudaStreamIsCapturing(s, &capture),
                   "cudaStreamIsCapturing(stream=" + Hex(s) + ")");
  if (capture != cudaStreamCaptureStatusNone) return Napi::Boolean::New(env, false);
  const cudaError_t err = cudaStreamQuery(s);
  if (ConsumeNotReady(err)) return Napi::Boolean::New(env, false);
  MEMRA_CUDA_CHECK(env, device, err, "cudaStreamQuery(stream=" + Hex(s) + ")");
  return Napi::Boolean::New(env, true);
}

Napi::Value StreamSynchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto s = ReadHandle<cudaStream_t>(info, 0, "streamSynchronize", "stream");
  const int device = RequireBoundStream(env, ts, s, "streamSynchronize");
  MEMRA_CUDA_CHECK(env, device, cudaStreamSynchronize(s),
                   "cudaStreamSynchronize(stream=" + Hex(s) + ")");
  return env.Undefined();
}

}  // namespace

void RegisterStream(Napi::Env env, Napi::Object exports) {
  exports.Set("streamCreate", Napi::Function::New(env, StreamCreate, "streamCreate"));
  exports.Set("streamDestroy", Napi::Function::New(env, StreamDestroy, "streamDestroy"));
  exports.Set("streamQuery", Napi::Function::New(env, StreamQuery, "streamQuery"));
  exports.Set("streamSynchronize",
              Napi::Function::New(env, StreamSynchronize, "streamSynchronize"));
}

}  // namespace memra
