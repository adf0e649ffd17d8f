#include "addon/host_memory.h"

#include <string>

#include <cuda_runtime_api.h>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/thread_state.h"

namespace memra {

namespace {

constexpr uintptr_t kPage = 4096;

Napi::Value HostAlloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const uint64_t bytes = ReadPositiveSafeUint(info, 0, "hostAlloc", "bytes");
  const int device = ts.RequireBound(env, "hostAlloc");
  void* p = nullptr;
  // Portable: pinned for every context, so a peer's worker may read it too. Under unified
  // addressing the device address of mapped memory equals the host address, hence one number.
  MEMRA_CUDA_CHECK(env, device,
                   cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                   "cudaHostAlloc(bytes=" + std::to_string(bytes) +
                       ", cudaHostAllocMapped|cudaHostAllocPortable)");
  return AdoptHandle(env, ts.hostAllocs, p, cudaFreeHost);
}

Napi::Value HostFree(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* p = ReadHandle<void*>(info, 0, "hostFree", "ptr");
  const int device = ts.RequireBound(env, "hostFree");
  RequireOwned(env, ts.hostAllocs, p, "hostFree", "host pointer");
  ts.hostAllocs.erase(p);
  // Same hazard as hostUnregister: drain before the mapping goes away.
  const cudaError_t syncErr = cudaDeviceSynchronize();
  const cudaError_t err = cudaFreeHost(p);
  MEMRA_CUDA_CHECK(env, device, syncErr,
                   "cudaDeviceSynchronize() before cudaFreeHost(ptr=" + Hex(p) + ")");
  MEMRA_CUDA_CHECK(env, device, err, "cudaFreeHost(ptr=" + Hex(p) + ")");
  return env.Undefined();
}

Napi::Value HostRegister(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const ViewBytes view = ReadView(info, 0, "hostRegister", "view");
  const int device = ts.RequireBound(env, "hostRegister");

  // Only whole pages inside the view: registering the partial pages at either end would pin
  // (and map) bytes that belong to whatever else shares those pages.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(view.data);
  const uintptr_t end = begin + view.byteLength;
  const uintptr_t first = (begin + kPage - 1) & ~(kPage - 1);
  const uintptr_t last = end & ~(kPage - 1);
  if (view.data == nullptr || last <= first) {
    ThrowError(env,
               "hostRegister: the view holds no whole 4096-byte page (" +
                   std::to_string(view.byteLength) + " bytes at byteOffset " +
                   std::to_string(view.byteOffset) + ", address " + Hex(begin) +
                   "); give it at least 8191 bytes, or a page-aligned range of 4096",
               "MEMRA_NO_WHOLE_PAGE");
  }
  void* hostPtr = reinterpret_cast<void*>(first);
  const size_t bytes = last - first;
  const size_t byteOffset = view.byteOffset + (first - begin);

  // Take the reference first: if it failed after registering, the pages would be pinned with
  // nothing keeping the buffer alive.
  napi_ref ref = nullptr;
  NAPI_THROW_IF_FAILED(env, napi_create_reference(env, view.buffer, 1, &ref), Napi::Value());

  const cudaError_t regErr =
      cudaHostRegister(hostPtr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (regErr != cudaSuccess) {
    napi_delete_reference(env, ref);
    ThrowCudaError(env, regErr,
                   "cudaHostRegister(ptr=" + Hex(hostPtr) + ", bytes=" + std::to_string(bytes) +
                       ", cudaHostRegisterMapped|cudaHostRegisterPortable)",
                   device);
  }
  void* devicePtr = nullptr;
  const cudaError_t mapErr = cudaHostGetDevicePointer(&devicePtr, hostPtr, 0);
  if (mapErr != cudaSuccess) {
    cudaHostUnregister(hostPtr);
    napi_delete_reference(env, ref);
    ThrowCudaError(env, mapErr, "cudaHostGetDevicePointer(ptr=" + Hex(hostPtr) + ")", device);
  }
  try {
    ts.registrations.emplace(hostPtr, HostRegistrationRecord{bytes, ref});
  } catch (...) {
    cudaHostUnregister(hostPtr);
    napi_delete_reference(env, ref);
    throw;
  }

  Napi::Object o = Napi::Object::New(env);
  o.Set("hostPtr", AddressToValue(env, hostPtr));
  o.Set("devicePtr", AddressToValue(env, devicePtr));
  o.Set("byteOffset", Napi::Number::New(env, static_cast<double>(byteOffset)));
  o.Set("bytes", Napi::Number::New(env, static_cast<double>(bytes)));
  return o;
}

Napi::Value HostUnregister(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  void* p = ReadHandle<void*>(info, 0, "hostUnregister", "hostPtr");
  const int device = ts.RequireBound(env, "hostUnregister");
  RequireOwned(env, ts.registrations, p, "hostUnregister", "host registration");
  const napi_ref ref = ts.registrations.at(p).buffer;
  ts.registrations.erase(p);
  // A queued kernel (a completion signal, typically) storing into pages that are no longer
  // mapped faults, and that fault is sticky: it kills the whole context. Drain first; every
  // kernel here is finite, so this cannot hang.
  const cudaError_t syncErr = cudaDeviceSynchronize();
  const cudaError_t err = cudaHostUnregister(p);
  // Keep the buffer alive if the pages may still be pinned and mapped.
  if (err == cudaSuccess) napi_delete_reference(env, ref);
  MEMRA_CUDA_CHECK(env, device, syncErr,
                   "cudaDeviceSynchronize() before cudaHostUnregister(ptr=" + Hex(p) + ")");
  MEMRA_CUDA_CHECK(env, device, err, "cudaHostUnregister(ptr=" + Hex(p) + ")");
  return env.Undefined();
}

}  // namespace

void RegisterHostMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("hostAlloc", Napi::Function::New(env, HostAlloc, "hostAlloc"));
  exports.Set("hostFree", Napi::Function::New(env, HostFree, "hostFree"));
  exports.Set("hostRegister", Napi::Function::New(env, HostRegister, "hostRegister"));
  exports.Set("hostUnregister", Napi::Function::New(env, HostUnregister, "hostUnregister"));
}

}  // namespace memra
