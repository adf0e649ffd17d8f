#include "addon/kernels.h"

#include <string>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "cu/kernels.h"

namespace memra {

namespace {

// A spin kernel cannot be interrupted, and a device that never drains hangs the env teardown;
// bound it well above any real use.
constexpr int64_t kMaxSpinMicroseconds = 60 * 1000 * 1000;

Napi::Value LaunchFillF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchFillF32";
  float* ptr = F32(info, 0, fn, "ptr");
  const uint64_t n = ReadSafeUint(info, 1, fn, "n");
  const double value = ReadNumber(info, 2, fn, "value");
  cudaStream_t s;
  const int device = Bound(env, info, 3, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_fill_f32(ptr, n, static_cast<float>(value), s),
                   std::string(fn) + "(ptr=" + Hex(ptr) + ", n=" + std::to_string(n) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchAxpyF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchAxpyF32";
  float* y = F32(info, 0, fn, "y");
  const float* x = F32(info, 1, fn, "x");
  const uint64_t n = ReadSafeUint(info, 2, fn, "n");
  const double a = ReadNumber(info, 3, fn, "a");
  cudaStream_t s;
  const int device = Bound(env, info, 4, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_axpy_f32(y, x, n, static_cast<float>(a), s),
                   std::string(fn) + "(y=" + Hex(y) + ", x=" + Hex(x) + ", n=" + std::to_string(n) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchReadFloor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchReadFloor";
  const void* p = reinterpret_cast<const void*>(ReadAlignedAddress(info, 0, fn, "ptr", 16, "16-byte loads"));
  const uint64_t bytes = ReadSafeUint(info, 1, fn, "bytes");
  auto* sink = reinterpret_cast<uint32_t*>(ReadAlignedAddress(info, 2, fn, "sink", 4, "a u32 store"));
  cudaStream_t s;
  const int device = Bound(env, info, 3, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_read_floor(p, bytes, sink, s),
                   std::string(fn) + "(ptr=" + Hex(p) + ", bytes=" + std::to_string(bytes) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchSignal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchSignal";
  auto* counter = reinterpret_cast<unsigned int*>(ReadAlignedAddress(info, 0, fn, "counter", 4, "a u32 store"));
  const uint32_t value = ReadU32(info, 1, fn, "value");
  cudaStream_t s;
  const int device = Bound(env, info, 2, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_signal(counter, value, s),
                   std::string(fn) + "(counter=" + Hex(counter) + ", value=" + std::to_string(value) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchStampNow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchStampNow";
  auto* dst = reinterpret_cast<unsigned long long*>(ReadAlignedAddress(info, 0, fn, "dst", 8, "a u64 store"));
  cudaStream_t s;
  const int device = Bound(env, info, 1, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_stamp_now(dst, s),
                   std::string(fn) + "(dst=" + Hex(dst) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchProbeWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchProbeWrite";
  auto* dst = reinterpret_cast<unsigned int*>(ReadAlignedAddress(info, 0, fn, "dst", 4, "u32 words"));
  const uint64_t n = ReadSafeUint(info, 1, fn, "n");
  const uint32_t seed = ReadU32(info, 2, fn, "seed");
  cudaStream_t s;
  const int device = Bound(env, info, 3, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_probe_write(dst, n, seed, s),
                   std::string(fn) + "(dst=" + Hex(dst) + ", n=" + std::to_string(n) +
                       ", seed=" + std::to_string(seed) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchSpin(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchSpin";
  const int64_t us = ReadIntInRange(info, 0, fn, "microseconds", 0, kMaxSpinMicroseconds);
  cudaStream_t s;
  const int device = Bound(env, info, 1, fn, &s);
  MEMRA_CUDA_CHECK(env, device, memra_launch_spin(static_cast<uint64_t>(us), s),
                   std::string(fn) + "(microseconds=" + std::to_string(us) + ", stream=" + Hex(s) + ")");
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
