// Device discovery (process-wide, any thread, never binds) and the calling thread's binding.
#pragma once

#include <napi.h>

namespace memra {

void RegisterDevice(Napi::Env env, Napi::Object exports);

}  // namespace memra
