#include "addon/kernels.h"

#include <string>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "addon/thread_state.h"
#include "cu/kernels.h"

namespace memra {

namespace {

// A spin kernel cannot be interrupted, and a device that never drains hangs the env teardown;
// bound it well above any real use.
constexpr int64_t kMaxSpinMicroseconds = 60 * 1000 * 1000;

Napi::Value LaunchFillF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  auto* ptr = reinterpret_cast<float*>(ReadAlignedAddress(info, 0, "launchFillF32", "ptr", 4, "f32"));
  const uint64_t n = ReadSafeUint(info, 1, "launchFillF32", "n");
  const double value = ReadNumber(info, 2, "launchFillF32", "value");
  const auto s = ReadHandle<cudaStream_t>(info, 3, "launchFillF32", "stream");
  const int device = RequireBoundStream(env, ts, s, "launchFillF32");
  MEMRA_CUDA_CHECK(env, device, memra_launch_fill_f32(ptr, n, static_cast<float>(value), s),
                   "launchFillF32(ptr=" + Hex(ptr) + ", n=" + std::to_string(n) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchAxpyF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  auto* y = reinterpret_cast<float*>(ReadAlignedAddress(info, 0, "launchAxpyF32", "y", 4, "f32"));
  auto* x = reinterpret_cast<const float*>(
      ReadAlignedAddress(info, 1, "launchAxpyF32", "x", 4, "f32"));
  const uint64_t n = ReadSafeUint(info, 2, "launchAxpyF32", "n");
  const double a = ReadNumber(info, 3, "launchAxpyF32", "a");
  const auto s = ReadHandle<cudaStream_t>(info, 4, "launchAxpyF32", "stream");
  const int device = RequireBoundStream(env, ts, s, "launchAxpyF32");
  MEMRA_CUDA_CHECK(env, device, memra_launch_axpy_f32(y, x, n, static_cast<float>(a), s),
                   "launchAxpyF32(y=" + Hex(y) + ", x=" + Hex(x) + ", n=" + std::to_string(n) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchReadFloor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "launchReadFloor";
  const void* p = reinterpret_cast<const void*>(ReadAlignedAddress(info, 0, fn, "ptr", 16, "16-byte loads"));
  const uint64_t bytes = ReadSafeUint(info, 1, fn, "bytes");
  auto* sink = reinterpret_cast<uint32_t*>(ReadAlignedAddress(info, 2, fn, "sink", 4, "a u32 store"));
  const auto s = ReadHandle<cudaStream_t>(info, 3, fn, "stream");
  const int device = RequireBoundStream(env, ts, s, fn);
  MEMRA_CUDA_CHECK(env, device, memra_launch_read_floor(p, bytes, sink, s),
                   std::string(fn) + "(ptr=" + Hex(p) + ", bytes=" + std::to_string(bytes) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchSignal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  auto* counter = reinterpret_cast<unsigned int*>(
      ReadAlignedAddress(info, 0, "launchSignal", "counter", 4, "a u32 store"));
  const uint32_t value = ReadU32(info, 1, "launchSignal", "value");
  const auto s = ReadHandle<cudaStream_t>(info, 2, "launchSignal", "stream");
  const int device = RequireBoundStream(env, ts, s, "launchSignal");
  MEMRA_CUDA_CHECK(env, device, memra_launch_signal(counter, value, s),
                   "launchSignal(counter=" + Hex(counter) + ", value=" + std::to_string(value) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchStampNow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  auto* dst = reinterpret_cast<unsigned long long*>(
      ReadAlignedAddress(info, 0, "launchStampNow", "dst", 8, "a u64 store"));
  const auto s = ReadHandle<cudaStream_t>(info, 1, "launchStampNow", "stream");
  const int device = RequireBoundStream(env, ts, s, "launchStampNow");
  MEMRA_CUDA_CHECK(env, device, memra_launch_stamp_now(dst, s),
                   "launchStampNow(dst=" + Hex(dst) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchProbeWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  auto* dst = reinterpret_cast<unsigned int*>(
      ReadAlignedAddress(info, 0, "launchProbeWrite", "dst", 4, "u32 words"));
  const uint64_t n = ReadSafeUint(info, 1, "launchProbeWrite", "n");
  const uint32_t seed = ReadU32(info, 2, "launchProbeWrite", "seed");
  const auto s = ReadHandle<cudaStream_t>(info, 3, "launchProbeWrite", "stream");
  const int device = RequireBoundStream(env, ts, s, "launchProbeWrite");
  MEMRA_CUDA_CHECK(env, device, memra_launch_probe_write(dst, n, seed, s),
                   "launchProbeWrite(dst=" + Hex(dst) + ", n=" + std::to_string(n) +
                       ", seed=" + std::to_string(seed) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchSpin(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const int64_t us =
      ReadIntInRange(info, 0, "launchSpin", "microseconds", 0, kMaxSpinMicroseconds);
  const auto s = ReadHandle<cudaStream_t>(info, 1, "launchSpin", "stream");
  const int device = RequireBoundStream(env, ts, s, "launchSpin");
  MEMRA_CUDA_CHECK(env, device, memra_launch_spin(static_cast<uint64_t>(us), s),
                   "launchSpin(microseconds=" + std::to_string(us) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

}  // namespace

void RegisterKernels(Napi::Env env, Napi::Object exports) {
  exports.Set("launchFillF32", Napi::Function::New(env, LaunchFillF32, "launchFillF32"));
  exports.Set("launchAxpyF32", Napi::Function::New(env, LaunchAxpyF32, "launchAxpyF32"));
  exports.Set("launchSignal", Napi::Function::New(env, LaunchSignal, "launchSignal"));
  exports.Set("launchStampNow", Napi::Function::New(env, LaunchStampNow, "launchStampNow"));
  exports.Set("launchProbeWrite", Napi::Function::New(env, LaunchProbeWrite, "launchProbeWrite"));
  exports.Set("launchSpin", Napi::Function::New(env, LaunchSpin, "launchSpin"));
  exports.Set("launchReadFloor", Napi::Function::New(env, LaunchReadFloor, "launchReadFloor"));
}

}  // namespace memra
