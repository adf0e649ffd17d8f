// Process-wide: which environment (main thread or worker) claimed which device ordinal. Two
// ranks on one card are refused: they would share a context, and a kernel's store into a peer
// pointer across two ranks on one card is undefined.
#pragma once

#include <string>

namespace memra::process {

// Claims `ordinal` for `owner`. On refusal returns false and fills `holder` with the label of
// the thread that holds it. May throw std::bad_alloc / std::system_error.
bool Claim(int ordinal, const void* owner, const std::string& label, std::string* holder);

// Drops the claim if `owner` holds it. Never throws: called from env teardown.
void Release(int ordinal, const void* owner) noexcept;

}  // namespace memra::process
