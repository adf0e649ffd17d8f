// Page-locked, mapped, portable host memory: allocated (hostAlloc) or registered over a JS
// buffer (hostRegister), so kernels on any device store into it and JS reads it with Atomics.
#pragma once

#include <napi.h>

namespace memra {

void RegisterHostMemory(Napi::Env env, Napi::Object exports);

}  // namespace memra
