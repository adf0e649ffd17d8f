#include "addon/process_state.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace memra::process {

namespace {

struct ClaimEntry {
  const void* owner;
  std::string label;
  bool shared;
};

struct Table {
  std::mutex mutex;
  // One entry per ordinal, except for loopback claims, which may be several.
  std::map<int, std::vector<ClaimEntry>> claims;
};

// Leaked on purpose: an env finalizer can run during static destruction at exit, and a
// destroyed mutex there would be undefined behaviour.
Table& TheTable() {
  static Table* table = new Table();
  return *table;
}

}  // namespace

bool Claim(int ordinal, const void* owner, const std::string& label, bool shared,
           std::string* holder, bool* holderShared) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<ClaimEntry>& holders = t.claims[ordinal];
  for (const ClaimEntry& e : holders) {
    if (e.owner == owner) continue;
    if (!shared || !e.shared) {
      *holder = e.label;
      *holderShared = e.shared;
      return false;
    }
  }
  holders.erase(std::remove_if(holders.begin(), holders.end(),
                               [owner](const ClaimEntry& e) { return e.owner == owner; }),
                holders.end());
  holders.push_back(ClaimEntry{owner, label, shared});
  return true;
}

void Release(int ordinal, const void* owner) noexcept {
  try {
    Table& t = TheTable();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.claims.find(ordinal);
    if (it == t.claims.end()) return;
    std::vector<ClaimEntry>& holders = it->second;
    holders.erase(std::remove_if(holders.begin(), holders.end(),
                                 [owner](const ClaimEntry& e) { return e.owner == owner; }),
                  holders.end());
    if (holders.empty()) t.claims.erase(it);
  } catch (...) {
    // A failed lock leaves the claim in place; the ordinal stays refused rather than shared.
  }
}

}  // namespace memra::process
