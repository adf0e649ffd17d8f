// The launch* functions: validate, enqueue one kernel from cu/ on an owned stream, and report a
// launch failure at the call. Execution faults surface later, at a sync/query on the stream.
#pragma once

#include <napi.h>

namespace memra {

void RegisterKernels(Napi::Env env, Napi::Object exports);

}  // namespace memra
