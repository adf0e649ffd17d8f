#include "addon/device.h"

#include <string>

#include <cuda_runtime_api.h>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/process_state.h"
#include "addon/thread_state.h"
#include "cu/model.h"

namespace memra {

namespace {

struct Visible {
  int count;
  cudaError_t why;  // cudaErrorNoDevice / cudaErrorInsufficientDriver when count is 0 for that
};

// No driver or no device is a count of zero, not an error: the addon must load and answer on a
// CPU-only machine (CI).
Visible VisibleDevices(Napi::Env env) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return {0, err};
  }
  MEMRA_CUDA_CHECK(env, -1, err, std::string("cudaGetDeviceCount()"));
  return {count, cudaSuccess};
}

// Throws unless 0 <= ordinal < count, naming the count.
void RequireVisible(Napi::Env env, const char* fn, const char* name, int ordinal) {
  const Visible v = VisibleDevices(env);
  if (ordinal < v.count) return;
  std::string message = std::string(fn) + ": " + name + " " + std::to_string(ordinal) +
                        " is out of range: ";
  if (v.count == 0) {
    message += "no CUDA device is visible (";
    message += v.why == cudaErrorInsufficientDriver ? "no CUDA driver is installed or it is too old"
                                                    : "the driver sees no device";
    message += std::string(": ") + cudaGetErrorName(v.why) + ")";
  } else if (v.count == 1) {
    message += "1 device visible (ordinal 0)";
  } else {
    message += std::to_string(v.count) + " devices visible (ordinals 0.." +
               std::to_string(v.count - 1) + ")";
  }
  ThrowError(env, message, "MEMRA_BAD_ORDINAL");
}

Napi::Value DeviceCount(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), VisibleDevices(info.Env()).count);
}

Napi::Value DriverVersion(const Napi::CallbackInfo& info) {
  int version = 0;
  const cudaError_t err = cudaDriverGetVersion(&version);
  // Reports 0 with success when no driver is installed; treat the explicit error the same.
  if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice) {
    (void)cudaGetLastError();
    return Napi::Number::New(info.Env(), 0);
  }
  MEMRA_CUDA_CHECK(info.Env(), -1, err, std::string("cudaDriverGetVersion()"));
  return Napi::Number::New(info.Env(), version);
}

Napi::Value DeviceProps(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int ordinal = ReadOrdinal(info, 0, "deviceProps", "ordinal");
  RequireVisible(env, "deviceProps", "device ordinal", ordinal);

  cudaDeviceProp p{};
  MEMRA_CUDA_CHECK(env, ordinal, cudaGetDeviceProperties(&p, ordinal),
                   "cudaGetDeviceProperties(ordinal=" + std::to_string(ordinal) + ")");
  // cudaDeviceProp lost clockRate in CUDA 13; the attribute remains.
  int clockKHz = 0;
  MEMRA_CUDA_CHECK(env, ordinal, cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, ordinal),
                   "cudaDeviceGetAttribute(cudaDevAttrClockRate, ordinal=" +
                       std::to_string(ordinal) + ")");
  char busId[32] = {0};
  MEMRA_CUDA_CHECK(env, ordinal, cudaDeviceGetPCIBusId(busId, sizeof busId, ordinal),
                   "cudaDeviceGetPCIBusId(ordinal=" + std::to_string(ordinal) + ")");

  Napi::Object o = Napi::Object::New(env);
  o.Set("ordinal", Napi::Number::New(env, ordinal));
  o.Set("name", Napi::String::New(env, p.name));
  o.Set("totalMem", Napi::Number::New(env, static_cast<double>(p.totalGlobalMem)));
  o.Set("multiProcessorCount", Napi::Number::New(env, p.multiProcessorCount));
  o.Set("major", Napi::Number::New(env, p.major));
  o.Set("minor", Napi::Number::New(env, p.minor));
  o.Set("pciBusId", Napi::String::New(env, busId));
  o.Set("unifiedAddressing", Napi::Boolean::New(env, p.unifiedAddressing != 0));
  o.Set("canMapHostMemory", Napi::Boolean::New(env, p.canMapHostMemory != 0));
  o.Set("clockRateKHz", Napi::Number::New(env, clockKHz));
  return o;
}

Napi::Value CanAccessPeer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int device = ReadOrdinal(info, 0, "canAccessPeer", "device");
  const int peer = ReadOrdinal(info, 1, "canAccessPeer", "peer");
  RequireVisible(env, "canAccessPeer", "device ordinal", device);
  RequireVisible(env, "canAccessPeer", "peer ordinal", peer);
  int can = 0;
  MEMRA_CUDA_CHECK(env, device, cudaDeviceCanAccessPeer(&can, device, peer),
                   "cudaDeviceCanAccessPeer(device=" + std::to_string(device) +
                       ", peer=" + std::to_string(peer) + ")");
  return Napi::Boolean::New(env, can != 0);
}

// bindDevice(ordinal, loopback = false). A loopback bind shares the ordinal with other loopback
// binds of this process, and only with them: the runtime's two ranks on one card, opted into
// (RuntimeOptions.loopback). The seed's refusal is about two contexts on one card, whose address
// spaces differ, so a pointer from one means nothing in the other. That is not what two threads
// of one process get: the runtime API gives every thread the device's one primary context, so
// both ranks allocate in one address space, and a "peer" store or copy is an ordinary store or
// copy into memory of the same context.
Napi::Value BindDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int ordinal = ReadOrdinal(info, 0, "bindDevice", "ordinal");
  const bool loopback = info[1].IsUndefined() ? false : ReadBool(info, 1, "bindDevice", "loopback");
  ThreadState& ts = ThreadState::Of(env);
  if (ts.bound >= 0) {
    ThrowError(env,
               "bindDevice(" + std::to_string(ordinal) + "): this thread already bound device " +
                   std::to_string(ts.bound) +
                   "; a thread binds once (releaseDevice() drops the binding)",
               "MEMRA_ALREADY_BOUND");
  }
  RequireVisible(env, "bindDevice", "device ordinal", ordinal);

  std::string holder;
  bool holderShared = false;
  if (!process::Claim(ordinal, &ts, ts.label(), loopback, &holder, &holderShared)) {
    if (loopback) {
      ThrowError(env,
                 "bindDevice(" + std::to_string(ordinal) + ", loopback): device " +
                     std::to_string(ordinal) + " is bound by another thread (" + holder +
                     ") without loopback; a loopback bind shares a device only with other "
                     "loopback binds",
                 "MEMRA_DEVICE_CLAIMED");
    }
    ThrowError(env,
               "bindDevice: device " + std::to_string(ordinal) +
                   " is already bound by another thread (" + holder +
                   (holderShared ? ", in loopback" : "") +
                   "): two ranks on one device are refused — a kernel's store into a peer "
                   "pointer across two contexts on one card is undefined; give each rank its "
                   "own device (or bind both in loopback: RuntimeOptions.loopback)",
               "MEMRA_DEVICE_CLAIMED");
  }
  // Since CUDA 12 cudaSetDevice also creates the primary context, so a broken device fails
  // here rather than at the first allocation.
  const cudaError_t err = cudaSetDevice(ordinal);
  if (err != cudaSuccess) {
    process::Release(ordinal, &ts);
    ThrowCudaError(env, err, "cudaSetDevice(" + std::to_string(ordinal) + ")", ordinal);
  }
  ts.bound = ordinal;
  ts.loopback = loopback;
  void* sync = nullptr;
  cudaError_t syncErr = cudaMalloc(&sync, MEMRA_EXPERT_SYNC_BYTES);
  if (syncErr == cudaSuccess) {
    ts.deviceAllocs.insert(sync);
    syncErr = cudaMemset(sync, 0, MEMRA_EXPERT_SYNC_BYTES);
  }
  if (syncErr != cudaSuccess) {
    // Unbound again, with what the bind took freed: the thread may try another device.
    ts.ReleaseAll(nullptr);
    ThrowCudaError(env, syncErr, "cudaMalloc/cudaMemset of the experts' sync words (bindDevice)", ordinal);
  }
  ts.expertSync = static_cast<unsigned*>(sync);
  return env.Undefined();
}

Napi::Value BoundDevice(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), ThreadState::Of(info.Env()).bound);
}

Napi::Value ReleaseDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const int device = ts.RequireBound(env, "releaseDevice");
  const char* failed = nullptr;
  const cudaError_t err = ts.ReleaseAll(&failed);
  // Released regardless; the first failure (a sticky error from earlier work, typically) is
  // still worth reporting.
  if (err != cudaSuccess) {
    ThrowCudaError(env, err, std::string(failed) + " (releaseDevice)", device);
  }
  return env.Undefined();
}

Napi::Value MemGetInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int device = ThreadState::Of(env).RequireBound(env, "memGetInfo");
  size_t freeBytes = 0, totalBytes = 0;
  MEMRA_CUDA_CHECK(env, device, cudaMemGetInfo(&freeBytes, &totalBytes),
                   std::string("cudaMemGetInfo()"));
  Napi::Object o = Napi::Object::New(env);
  o.Set("free", Napi::Number::New(env, static_cast<double>(freeBytes)));
  o.Set("total", Napi::Number::New(env, static_cast<double>(totalBytes)));
  return o;
}

Napi::Value EnablePeerAccess(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int peer = ReadOrdinal(info, 0, "enablePeerAccess", "peer");
  const int device = ThreadState::Of(env).RequireBound(env, "enablePeerAccess");
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // otherwise the next launch check would report it
    return env.Undefined();
  }
  MEMRA_CUDA_CHECK(env, device, err,
                   "cudaDeviceEnablePeerAccess(peer=" + std::to_string(peer) + ")");
  return env.Undefined();
}

Napi::Value DisablePeerAccess(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int peer = ReadOrdinal(info, 0, "disablePeerAccess", "peer");
  const int device = ThreadState::Of(env).RequireBound(env, "disablePeerAccess");
  MEMRA_CUDA_CHECK(env, device, cudaDeviceDisablePeerAccess(peer),
                   "cudaDeviceDisablePeerAccess(peer=" + std::to_string(peer) + ")");
  return env.Undefined();
}

}  // namespace

void RegisterDevice(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceCount", Napi::Function::New(env, DeviceCount, "deviceCount"));
  exports.Set("driverVersion", Napi::Function::New(env, DriverVersion, "driverVersion"));
  exports.Set("deviceProps", Napi::Function::New(env, DeviceProps, "deviceProps"));
  exports.Set("canAccessPeer", Napi::Function::New(env, CanAccessPeer, "canAccessPeer"));
  exports.Set("bindDevice", Napi::Function::New(env, BindDevice, "bindDevice"));
  exports.Set("boundDevice", Napi::Function::New(env, BoundDevice, "boundDevice"));
  exports.Set("releaseDevice", Napi::Function::New(env, ReleaseDevice, "releaseDevice"));
  exports.Set("memGetInfo", Napi::Function::New(env, MemGetInfo, "memGetInfo"));
  exports.Set("enablePeerAccess", Napi::Function::New(env, EnablePeerAccess, "enablePeerAccess"));
  exports.Set("disablePeerAccess",
              Napi::Function::New(env, DisablePeerAccess, "disablePeerAccess"));
}

}  // namespace memra
