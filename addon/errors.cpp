#include "addon/errors.h"

#include <charconv>
#include <cmath>

namespace memra {

void ThrowCudaError(Napi::Env env, cudaError_t err, const std::string& call, int device) {
  (void)cudaGetLastError();
  std::string message = call;
  if (device >= 0) message += " on device " + std::to_string(device);
  message += ": ";
  message += cudaGetErrorString(err);
  message += " (";
  message += cudaGetErrorName(err);
  message += ")";
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, cudaGetErrorName(err)));
  error.Set("cudaError", Napi::Number::New(env, static_cast<double>(err)));
  if (device >= 0) error.Set("device", Napi::Number::New(env, device));
  throw error;
}

void ThrowTypeError(Napi::Env env, const std::string& message) {
  throw Napi::TypeError::New(env, message);
}

void ThrowError(Napi::Env env, const std::string& message, const char* code) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  throw error;
}

void ThrowArgError(Napi::Env env, const char* fn, const char* name, const char* what,
                   const Napi::Value& got) {
  ThrowTypeError(env, std::string(fn) + ": argument '" + name + "' must be " + what + ", got " +
                          DescribeValue(got));
}

bool ConsumeNotReady(cudaError_t err) {
  if (err != cudaErrorNotReady) return false;
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
  return true;
}

static std::string FormatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string DescribeValue(const Napi::Value& value) {
  switch (value.Type()) {
    case napi_undefined: return "undefined";
    case napi_null: return "null";
    case napi_boolean: return value.As<Napi::Boolean>().Value() ? "true" : "false";
    case napi_number: return FormatNumber(value.As<Napi::Number>().DoubleValue());
    case napi_string: {
      std::string s = value.As<Napi::String>().Utf8Value();
      if (s.size() > 40) s = s.substr(0, 40) + "...";
      return "\"" + s + "\"";
    }
    case napi_symbol: return "a symbol";
    case napi_bigint: return "a bigint";
    case napi_function: return "a function";
    case napi_object:
      if (value.IsTypedArray()) return "a typed array";
      if (value.IsArrayBuffer()) return "an ArrayBuffer";
      if (value.IsArray()) return "an array";
      return "an object";
    default: return "a value of unknown type";
  }
}

std::string Hex(uintptr_t value) {
  char buf[2 + 16 + 1];
  buf[0] = '0';
  buf[1] = 'x';
  auto res = std::to_chars(buf + 2, buf + sizeof buf, value, 16);
  return std::string(buf, res.ptr);
}

}  // namespace memra
