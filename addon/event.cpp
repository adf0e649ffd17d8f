#include "addon/event.h"

#include <string>

#include <cuda_runtime_api.h>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "addon/thread_state.h"

namespace memra {

namespace {

void RequireOwnedEvent(Napi::Env env, const ThreadState& ts, cudaEvent_t e, const char* fn) {
  RequireOwned(env, ts.events, e, fn, "event");
}

Napi::Value EventCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const bool timing = ReadBool(info, 0, "eventCreate", "timing");
  const int device = ts.RequireBound(env, "eventCreate");
  const unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  cudaEvent_t e = nullptr;
  MEMRA_CUDA_CHECK(env, device, cudaEventCreateWithFlags(&e, flags),
                   std::string("cudaEventCreateWithFlags(") +
                       (timing ? "cudaEventDefault" : "cudaEventDisableTiming") + ")");
  return AdoptHandle(env, ts.events, e, cudaEventDestroy);
}

Napi::Value EventDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto e = ReadHandle<cudaEvent_t>(info, 0, "eventDestroy", "event");
  const int device = ts.RequireBound(env, "eventDestroy");
  RequireOwnedEvent(env, ts, e, "eventDestroy");
  ts.events.erase(e);
  MEMRA_CUDA_CHECK(env, device, cudaEventDestroy(e), "cudaEventDestroy(event=" + Hex(e) + ")");
  return env.Undefined();
}

// (event, stream) of a record call, both this thread's, on its bound device.
struct RecordArgs {
  cudaEvent_t event;
  cudaStream_t stream;
  int device;
};

RecordArgs ReadRecordArgs(const Napi::CallbackInfo& info, ThreadState& ts, const char* fn) {
  Napi::Env env = info.Env();
  const auto e = ReadHandle<cudaEvent_t>(info, 0, fn, "event");
  const auto s = ReadHandle<cudaStream_t>(info, 1, fn, "stream");
  const int device = ts.RequireBound(env, fn);
  RequireOwnedEvent(env, ts, e, fn);
  RequireOwnedStream(env, ts, s, fn);
  return {e, s, device};
}

Napi::Value EventRecord(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const RecordArgs a = ReadRecordArgs(info, ThreadState::Of(env), "eventRecord");
  MEMRA_CUDA_CHECK(env, a.device, cudaEventRecord(a.event, a.stream),
                   "cudaEventRecord(event=" + Hex(a.event) + ", stream=" + Hex(a.stream) + ")");
  return env.Undefined();
}

// A profiler's mark: an ordinary record, or, while the stream is being captured (the step graph),
// an event record NODE, so every replay records it. A plain record during capture only marks a
// capture dependency and records nothing; cudaEventRecordExternal is refused outside a capture.
// The stream may be capturing without this thread having begun it (it joined a multi-device
// capture by waiting on an event), so the stream is asked, not this thread's own bookkeeping.
Napi::Value EventRecordMark(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const RecordArgs a = ReadRecordArgs(info, ThreadState::Of(env), "eventRecordMark");
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MEMRA_CUDA_CHECK(env, a.device, cudaStreamIsCapturing(a.stream, &status),
                   "cudaStreamIsCapturing(stream=" + Hex(a.stream) + ")");
  const bool capturing = status == cudaStreamCaptureStatusActive;
  MEMRA_CUDA_CHECK(env, a.device,
                   cudaEventRecordWithFlags(a.event, a.stream,
                                            capturing ? cudaEventRecordExternal : cudaEventRecordDefault),
                   "cudaEventRecordWithFlags(event=" + Hex(a.event) + ", stream=" + Hex(a.stream) + ", " +
                       (capturing ? "cudaEventRecordExternal" : "cudaEventRecordDefault") + ")");
  return env.Undefined();
}

Napi::Value StreamWaitEvent(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto s = ReadHandle<cudaStream_t>(info, 0, "streamWaitEvent", "stream");
  const auto e = ReadHandle<cudaEvent_t>(info, 1, "streamWaitEvent", "event");
  const int device = RequireBoundStream(env, ts, s, "streamWaitEvent");
  MEMRA_CUDA_CHECK(env, device, cudaStreamWaitEvent(s, e, 0),
                   "cudaStreamWaitEvent(stream=" + Hex(s) + ", event=" + Hex(e) + ")");
  return env.Undefined();
}

Napi::Value EventQuery(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto e = ReadHandle<cudaEvent_t>(info, 0, "eventQuery", "event");
  const int device = ts.RequireBound(env, "eventQuery");
  const cudaError_t err = cudaEventQuery(e);
  if (ConsumeNotReady(err)) return Napi::Boolean::New(env, false);
  MEMRA_CUDA_CHECK(env, device, err, "cudaEventQuery(event=" + Hex(e) + ")");
  return Napi::Boolean::New(env, true);
}

Napi::Value EventElapsedMs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto start = ReadHandle<cudaEvent_t>(info, 0, "eventElapsedMs", "start");
  const auto end = ReadHandle<cudaEvent_t>(info, 1, "eventElapsedMs", "end");
  const int device = ts.RequireBound(env, "eventElapsedMs");
  float ms = 0;
  MEMRA_CUDA_CHECK(env, device, cudaEventElapsedTime(&ms, start, end),
                   "cudaEventElapsedTime(start=" + Hex(start) + ", end=" + Hex(end) + ")");
  return Napi::Number::New(env, ms);
}

}  // namespace

void RegisterEvent(Napi::Env env, Napi::Object exports) {
  exports.Set("eventCreate", Napi::Function::New(env, EventCreate, "eventCreate"));
  exports.Set("eventDestroy", Napi::Function::New(env, EventDestroy, "eventDestroy"));
  exports.Set("eventRecord", Napi::Function::New(env, EventRecord, "eventRecord"));
  exports.Set("eventRecordMark", Napi::Function::New(env, EventRecordMark, "eventRecordMark"));
  exports.Set("streamWaitEvent", Napi::Function::New(env, StreamWaitEvent, "streamWaitEvent"));
  exports.Set("eventQuery", Napi::Function::New(env, EventQuery, "eventQuery"));
  exports.Set("eventElapsedMs", Napi::Function::New(env, EventElapsedMs, "eventElapsedMs"));
}

}  // namespace memra
