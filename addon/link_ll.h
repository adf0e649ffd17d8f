// The low-latency exchange kernel's binding (cu/tp_ll.cu).
#pragma once

#include <napi.h>

namespace memra {

void RegisterLinkLl(Napi::Env env, Napi::Object exports);

}  // namespace memra
