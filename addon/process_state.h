// Process-wide: which environment (main thread or worker) claimed which device ordinal. Two
// ranks on one card are refused by default (seed 000: a kernel's store into a peer pointer across
// two contexts on one card is undefined). Loopback claims are the one exception: threads that all
// ask for loopback share the ordinal (see BindDevice in addon/device.cpp for why that is safe).
#pragma once

#include <string>

namespace memra::process {

// Claims `ordinal` for `owner`; `shared` (loopback) claims coexist with other shared claims and
// with nothing else. On refusal returns false and fills `holder` with the label of a thread that
// holds it and `holderShared` with whether that claim is a loopback one. May throw
// std::bad_alloc / std::system_error.
bool Claim(int ordinal, const void* owner, const std::string& label, bool shared,
           std::string* holder, bool* holderShared);

// Drops `owner`'s claim on `ordinal`, if it has one. Never throws: called from env teardown.
void Release(int ordinal, const void* owner) noexcept;

}  // namespace memra::process
