#include "addon/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "addon/args.h"
#include "addon/errors.h"

namespace memra {

namespace {

// setThreadAffinity(cpus: number[]): pins the CALLING thread (not the process) to those CPUs.
Napi::Value SetThreadAffinity(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "setThreadAffinity";
  if (!info[0].IsArray() || info[0].As<Napi::Array>().Length() == 0) {
    ThrowArgError(env, fn, "cpus", "a non-empty array of CPU numbers", info[0]);
  }
  const Napi::Array cpus = info[0].As<Napi::Array>();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (uint32_t i = 0; i < cpus.Length(); ++i) {
    const std::string at = "cpus[" + std::to_string(i) + "]";
    const int64_t cpu = ReadIntValue(env, cpus.Get(i), fn, at.c_str(), 0, CPU_SETSIZE - 1,
                                     "a CPU number in [0, CPU_SETSIZE)");
    CPU_SET(static_cast<int>(cpu), &set);
  }
  const int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (err != 0) {
    ThrowError(env,
               std::string(fn) + ": pthread_setaffinity_np failed: " + std::strerror(err) +
                   (err == EINVAL ? " (none of those CPUs is allowed for this process: see "
                                    "Cpus_allowed_list in /proc/self/status)"
                                  : ""),
               "MEMRA_AFFINITY");
  }
  return env.Undefined();
}

// threadAffinity(): the CPUs the calling thread may run on.
Napi::Value ThreadAffinity(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  cpu_set_t set;
  CPU_ZERO(&set);
  const int err = pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
  if (err != 0) {
    ThrowError(env, std::string("threadAffinity: pthread_getaffinity_np failed: ") + std::strerror(err),
               "MEMRA_AFFINITY");
  }
  Napi::Array out = Napi::Array::New(env);
  uint32_t n = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.Set(n++, Napi::Number::New(env, c));
  }
  return out;
}

}  // namespace

void RegisterThreadAffinity(Napi::Env env, Napi::Object exports) {
  exports.Set("setThreadAffinity", Napi::Function::New(env, SetThreadAffinity, "setThreadAffinity"));
  exports.Set("threadAffinity", Napi::Function::New(env, ThreadAffinity, "threadAffinity"));
}

}  // namespace memra
