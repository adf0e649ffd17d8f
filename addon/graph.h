// CUDA graphs by stream capture: begin/end a capture on an owned stream, launch and destroy the
// executable graph. Executable graphs are owned by the thread that instantiated them.
#pragma once

#include <napi.h>

namespace memra {

void RegisterGraph(Napi::Env env, Napi::Object exports);

}  // namespace memra
