#include "addon/process_state.h"

#include <map>
#include <mutex>

namespace memra::process {

namespace {

struct ClaimEntry {
  const void* owner;
  std::string label;
};

struct Table {
  std::mutex mutex;
  std::map<int, ClaimEntry> claims;
};

// Leaked on purpose: an env finalizer can run during static destruction at exit, and a
// destroyed mutex there would be undefined behaviour.
Table& TheTable() {
  static Table* table = new Table();
  return *table;
}

}  // namespace

bool Claim(int ordinal, const void* owner, const std::string& label, std::string* holder) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.claims.find(ordinal);
  if (it != t.claims.end() && it->second.owner != owner) {
    *holder = it->second.label;
    return false;
  }
  t.claims[ordinal] = ClaimEntry{owner, label};
  return true;
}

void Release(int ordinal, const void* owner) noexcept {
  try {
    Table& t = TheTable();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.claims.find(ordinal);
    if (it != t.claims.end() && it->second.owner == owner) t.claims.erase(it);
  } catch (...) {
    // A failed lock leaves the claim in place; the ordinal stays refused rather than shared.
  }
}

}  // namespace memra::process
