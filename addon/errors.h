// How every failure reaches JS. CUDA failures become an Error naming the call, its key arguments,
// the device and the CUDA error (`code` = error name, `cudaError` = number); bad arguments become
// a TypeError naming the function and the argument. Everything here throws Napi::Error, which
// node-addon-api turns into a JS exception at the callback boundary; nothing aborts.
#pragma once

#include <napi.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace memra {

// `device` < 0 leaves out "on device N" (process-wide calls). Clears the runtime's non-sticky
// last error, so the next launch check does not report this failure a second time.
[[noreturn]] void ThrowCudaError(Napi::Env env, cudaError_t err, const std::string& call,
                                 int device);

[[noreturn]] void ThrowTypeError(Napi::Env env, const std::string& message);

// A plain Error with a `code` (MEMRA_*), for state errors: no device bound, foreign handle,
// ordinal out of range or claimed.
[[noreturn]] void ThrowError(Napi::Env env, const std::string& message, const char* code);

// `fn: argument 'name' must be <what>, got <value>`.
[[noreturn]] void ThrowArgError(Napi::Env env, const char* fn, const char* name,
                                const char* what, const Napi::Value& got);

// For the *Query calls, where cudaErrorNotReady is an answer ("not yet"), not a failure: true
// when `err` is that answer, which is then cleared as the last error (only if it is the last
// error: another pending one must still reach the next launch check).
bool ConsumeNotReady(cudaError_t err);

// Short description of a JS value for messages; never calls into JS (no toString).
std::string DescribeValue(const Napi::Value& value);

std::string Hex(uintptr_t value);
inline std::string Hex(const void* p) { return Hex(reinterpret_cast<uintptr_t>(p)); }

}  // namespace memra

// The description is built only on failure: launches are on the hot path.
#define MEMRA_CUDA_CHECK(env, device, expr, description)                         \
  do {                                                                             \
    const cudaError_t memra_err_ = (expr);                                         \
    if (memra_err_ != cudaSuccess) {                                               \
      ::memra::ThrowCudaError((env), memra_err_, (description), (device));         \
    }                                                                              \
  } while (0)
