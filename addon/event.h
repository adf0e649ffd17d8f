// Events. Ownership is required where a call destroys or re-records an event; read-only uses
// (query, wait, elapsed) accept another thread's event, since a stream may wait on a record
// made on another device. Keeping such a foreign event alive is then the caller's contract.
#pragma once

#include <napi.h>

namespace memra {

void RegisterEvent(Napi::Env env, Napi::Object exports);

}  // namespace memra
