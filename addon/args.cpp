#include "addon/args.h"

#include <cmath>
#include <string>

#include "addon/errors.h"

namespace memra {

namespace {

// Returns false for non-numbers, non-integers, and values outside [lo, hi].
bool IntegerIn(const Napi::Value& v, double lo, double hi, double* out) {
  if (!v.IsNumber()) return false;
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::trunc(d) != d || d < lo || d > hi) return false;
  *out = d;
  return true;
}

}  // namespace

uint64_t ReadSafeUint(const Napi::CallbackInfo& info, size_t index, const char* fn,
                      const char* name) {
  double d;
  if (!IntegerIn(info[index], 0, kTwoPow53 - 1, &d)) {
    ThrowArgError(info.Env(), fn, name, "a non-negative safe integer", info[index]);
  }
  return static_cast<uint64_t>(d);
}

uint64_t ReadPositiveSafeUint(const Napi::CallbackInfo& info, size_t index, const char* fn,
                              const char* name) {
  double d;
  if (!IntegerIn(info[index], 1, kTwoPow53 - 1, &d)) {
    ThrowArgError(info.Env(), fn, name, "a positive safe integer", info[index]);
  }
  return static_cast<uint64_t>(d);
}

int ReadOrdinal(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name) {
  double d;
  if (!IntegerIn(info[index], 0, 2147483647.0, &d)) {
    ThrowArgError(info.Env(), fn, name, "a device ordinal (a non-negative integer)", info[index]);
  }
  return static_cast<int>(d);
}

uint32_t ReadU32(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name) {
  double d;
  if (!IntegerIn(info[index], 0, 4294967295.0, &d)) {
    ThrowArgError(info.Env(), fn, name, "an integer in [0, 4294967295]", info[index]);
  }
  return static_cast<uint32_t>(d);
}

int64_t ReadIntInRange(const Napi::CallbackInfo& info, size_t index, const char* fn,
                       const char* name, int64_t lo, int64_t hi) {
  return ReadIntValue(info.Env(), info[index], fn, name, lo, hi);
}

int64_t ReadIntValue(Napi::Env env, const Napi::Value& value, const char* fn, const char* name,
                     int64_t lo, int64_t hi, const char* what) {
  double d;
  if (!IntegerIn(value, static_cast<double>(lo), static_cast<double>(hi), &d)) {
    if (what != nullptr) ThrowArgError(env, fn, name, what, value);
    const std::string range =
        "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    ThrowArgError(env, fn, name, range.c_str(), value);
  }
  return static_cast<int64_t>(d);
}

double ReadNumber(const Napi::CallbackInfo& info, size_t index, const char* fn,
                  const char* name) {
  if (!info[index].IsNumber()) ThrowArgError(info.Env(), fn, name, "a number", info[index]);
  return info[index].As<Napi::Number>().DoubleValue();
}

bool ReadBool(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name) {
  if (!info[index].IsBoolean()) ThrowArgError(info.Env(), fn, name, "a boolean", info[index]);
  return info[index].As<Napi::Boolean>().Value();
}

uintptr_t ReadAddress(const Napi::CallbackInfo& info, size_t index, const char* fn,
                      const char* name) {
  double d;
  if (!IntegerIn(info[index], 1, kTwoPow53 - 1, &d)) {
    ThrowArgError(info.Env(), fn, name,
                  "a non-zero handle or pointer (an integer in [1, 2^53))", info[index]);
  }
  return static_cast<uintptr_t>(d);
}

uintptr_t ReadAlignedAddress(const Napi::CallbackInfo& info, size_t index, const char* fn,
                             const char* name, uintptr_t alignment, const char* forWhat) {
  const uintptr_t p = ReadAddress(info, index, fn, name);
  if (p % alignment != 0) {
    ThrowTypeError(info.Env(), std::string(fn) + ": argument '" + name + "' must be " +
                                   std::to_string(alignment) + "-byte aligned for " + forWhat +
                                   ", got " + Hex(p));
  }
  return p;
}

static size_t ElementSize(napi_typedarray_type type) {
  switch (type) {
    case napi_int8_array:
    case napi_uint8_array:
    case napi_uint8_clamped_array: return 1;
    case napi_int16_array:
    case napi_uint16_array: return 2;
#ifdef NODE_API_HAS_FLOAT16_ARRAY
    case napi_float16_array: return 2;
#endif
    case napi_int32_array:
    case napi_uint32_array:
    case napi_float32_array: return 4;
    case napi_float64_array:
    case napi_bigint64_array:
    case napi_biguint64_array: return 8;
  }
  return 0;
}

ViewBytes ReadView(const Napi::CallbackInfo& info, size_t index, const char* fn,
                   const char* name) {
  napi_env env = info.Env();
  napi_value value = info[index];
  ViewBytes out{nullptr, 0, 0, nullptr};
  bool is = false;
  if (napi_is_typedarray(env, value, &is) == napi_ok && is) {
    napi_typedarray_type type;
    size_t length = 0;
    void* data = nullptr;
    NAPI_THROW_IF_FAILED(env,
                         napi_get_typedarray_info(env, value, &type, &length, &data, &out.buffer,
                                                  &out.byteOffset),
                         out);
    const size_t size = ElementSize(type);
    if (size == 0) {
      ThrowArgError(info.Env(), fn, name, "a typed array of a known element type", info[index]);
    }
    out.data = static_cast<uint8_t*>(data);
    out.byteLength = length * size;
    return out;
  }
  if (napi_is_dataview(env, value, &is) == napi_ok && is) {
    void* data = nullptr;
    NAPI_THROW_IF_FAILED(env,
                         napi_get_dataview_info(env, value, &out.byteLength, &data, &out.buffer,
                                                &out.byteOffset),
                         out);
    out.data = static_cast<uint8_t*>(data);
    return out;
  }
  ThrowArgError(info.Env(), fn, name, "an ArrayBufferView (a typed array or DataView)",
                info[index]);
}

Napi::Value AddressToValue(Napi::Env env, const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  if (v >= (uintptr_t{1} << 53)) {
    ThrowError(env, "address " + Hex(v) + " does not fit a JS number exactly (2^53 or above)",
               "MEMRA_ADDRESS_RANGE");
  }
  return Napi::Number::New(env, static_cast<double>(v));
}

}  // namespace memra
