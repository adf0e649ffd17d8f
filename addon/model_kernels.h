// The synthetic model's launch* functions (cu/model.h): validate every argument and shape, then
// enqueue one kernel on an owned stream and report a launch failure at the call. The checks
// here are the ones that keep a kernel inside its buffers' shapes; what a kernel computes is
// cu/model.h's contract.
#pragma once

#include <napi.h>

namespace memra {

void RegisterModelKernels(Napi::Env env, Napi::Object exports);

}  // namespace memra
