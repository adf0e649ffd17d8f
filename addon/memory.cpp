#include "addon/memory.h"

#include <string>

#include <cuda_runtime_api.h>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "addon/thread_state.h"

namespace memra {

namespace {

Napi::Value Malloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const uint64_t bytes = ReadPositiveSafeUint(info, 0, "malloc", "bytes");
  const int device = ts.RequireBound(env, "malloc");
  void* p = nullptr;
  MEMRA_CUDA_CHECK(env, device, cudaMalloc(&p, bytes),
                   "cudaMalloc(bytes=" + std::to_string(bytes) + ")");
  return AdoptHandle(env, ts.deviceAllocs, p, cudaFree);
}

Napi::Value Free(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* p = ReadHandle<void*>(info, 0, "free", "ptr");
  const int device = ts.RequireBound(env, "free");
  RequireOwned(env, ts.deviceAllocs, p, "free", "device pointer");
  ts.deviceAllocs.erase(p);
  MEMRA_CUDA_CHECK(env, device, cudaFree(p), "cudaFree(ptr=" + Hex(p) + ")");
  return env.Undefined();
}

Napi::Value MemsetAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* p = ReadHandle<void*>(info, 0, "memsetAsync", "ptr");
  const int value = static_cast<int>(ReadIntInRange(info, 1, "memsetAsync", "byteValue", 0, 255));
  const uint64_t bytes = ReadSafeUint(info, 2, "memsetAsync", "bytes");
  const auto s = ReadHandle<cudaStream_t>(info, 3, "memsetAsync", "stream");
  const int device = RequireBoundStream(env, ts, s, "memsetAsync");
  if (bytes == 0) return env.Undefined();
  MEMRA_CUDA_CHECK(env, device, cudaMemsetAsync(p, value, bytes, s),
                   "cudaMemsetAsync(ptr=" + Hex(p) + ", value=" + std::to_string(value) +
                       ", bytes=" + std::to_string(bytes) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value MemcpyAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* dst = ReadHandle<void*>(info, 0, "memcpyAsync", "dst");
  const void* src = ReadHandle<const void*>(info, 1, "memcpyAsync", "src");
  const uint64_t bytes = ReadSafeUint(info, 2, "memcpyAsync", "bytes");
  const auto s = ReadHandle<cudaStream_t>(info, 3, "memcpyAsync", "stream");
  const int device = RequireBoundStream(env, ts, s, "memcpyAsync");
  if (bytes == 0) return env.Undefined();
  // cudaMemcpyDefault: with unified addressing the runtime infers each side's location, so a
  // peer's pointer or a mapped host pointer works on either side.
  MEMRA_CUDA_CHECK(env, device, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s),
                   "cudaMemcpyAsync(dst=" + Hex(dst) + ", src=" + Hex(src) +
                       ", bytes=" + std::to_string(bytes) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value MemcpyPeerAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* dst = ReadHandle<void*>(info, 0, "memcpyPeerAsync", "dst");
  const int dstDevice = ReadOrdinal(info, 1, "memcpyPeerAsync", "dstDevice");
  const void* src = ReadHandle<const void*>(info, 2, "memcpyPeerAsync", "src");
  const int srcDevice = ReadOrdinal(info, 3, "memcpyPeerAsync", "srcDevice");
  const uint64_t bytes = ReadSafeUint(info, 4, "memcpyPeerAsync", "bytes");
  const auto s = ReadHandle<cudaStream_t>(info, 5, "memcpyPeerAsync", "stream");
  const int device = RequireBoundStream(env, ts, s, "memcpyPeerAsync");
  if (bytes == 0) return env.Undefined();
  MEMRA_CUDA_CHECK(env, device, cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, bytes, s),
                   "cudaMemcpyPeerAsync(dst=" + Hex(dst) + ", dstDevice=" +
                       std::to_string(dstDevice) + ", src=" + Hex(src) + ", srcDevice=" +
                       std::to_string(srcDevice) + ", bytes=" + std::to_string(bytes) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// upload/download run on the legacy stream, so they do not order with the caller's
// non-blocking streams: the caller synchronizes the stream that produced or consumes the
// device bytes first (cold paths: tests, weight loading).
Napi::Value Upload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* dst = ReadHandle<void*>(info, 0, "upload", "dst");
  const ViewBytes view = ReadView(info, 1, "upload", "src");
  const int device = ts.RequireBound(env, "upload");
  if (view.byteLength == 0) return env.Undefined();
  MEMRA_CUDA_CHECK(env, device,
                   cudaMemcpy(dst, view.data, view.byteLength, cudaMemcpyHostToDevice),
                   "cudaMemcpy(dst=" + Hex(dst) + ", bytes=" + std::to_string(view.byteLength) +
                       ", HostToDevice) (upload)");
  // A pageable-source cudaMemcpy may return once the bytes are staged, before the DMA lands;
  // a kernel on a non-blocking stream could then read stale bytes. Wait for the legacy stream.
  MEMRA_CUDA_CHECK(env, device, cudaStreamSynchronize(cudaStreamLegacy),
                   std::string("cudaStreamSynchronize(cudaStreamLegacy) (upload)"));
  return env.Undefined();
}

Napi::Value Download(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const ViewBytes view = ReadView(info, 0, "download", "dst");
  const void* src = ReadHandle<const void*>(info, 1, "download", "src");
  const int device = ts.RequireBound(env, "download");
  if (view.byteLength == 0) return env.Undefined();
  MEMRA_CUDA_CHECK(env, device,
                   cudaMemcpy(view.data, src, view.byteLength, cudaMemcpyDeviceToHost),
                   "cudaMemcpy(src=" + Hex(src) + ", bytes=" + std::to_string(view.byteLength) +
                       ", DeviceToHost) (download)");
  return env.Undefined();
}

}  // namespace

void RegisterMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("malloc", Napi::Function::New(env, Malloc, "malloc"));
  exports.Set("free", Napi::Function::New(env, Free, "free"));
  exports.Set("memsetAsync", Napi::Function::New(env, MemsetAsync, "memsetAsync"));
  exports.Set("memcpyAsync", Napi::Function::New(env, MemcpyAsync, "memcpyAsync"));
  exports.Set("memcpyPeerAsync", Napi::Function::New(env, MemcpyPeerAsync, "memcpyPeerAsync"));
  exports.Set("upload", Napi::Function::New(env, Upload, "upload"));
  exports.Set("download", Napi::Function::New(env, Download, "download"));
}

}  // namespace memra
