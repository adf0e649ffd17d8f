// Device memory: allocation (owned by the allocating thread), async set/copy on the caller's
// streams, and the cold-path upload/download of a JS view.
#pragma once

#include <napi.h>

namespace memra {

void RegisterMemory(Napi::Env env, Napi::Object exports);

}  // namespace memra
