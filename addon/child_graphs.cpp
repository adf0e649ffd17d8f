#include "addon/child_graphs.h"

#include <map>
#include <mutex>

namespace memra::child_graphs {

namespace {

struct Entry {
  int device;
  int holders;
};

struct Table {
  std::mutex mutex;
  std::map<cudaGraph_t, Entry> children;
};

// Leaked on purpose, like the device claims: a worker's env teardown may run during static
// destruction at exit.
Table& TheTable() {
  static Table* table = new Table();
  return *table;
}

}  // namespace

void Add(cudaGraph_t g, int device) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.children[g] = Entry{device, 0};
}

int DeviceOf(cudaGraph_t g) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.children.find(g);
  return it == t.children.end() ? -1 : it->second.device;
}

bool Hold(cudaGraph_t g) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.children.find(g);
  if (it == t.children.end()) return false;
  ++it->second.holders;
  return true;
}

void Drop(cudaGraph_t g) noexcept {
  try {
    Table& t = TheTable();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.children.find(g);
    if (it != t.children.end() && it->second.holders > 0) --it->second.holders;
  } catch (...) {
    // A failed lock leaves the count high: the child then refuses an orderly destroy until its
    // thread's teardown, which forces it. Nothing is freed early.
  }
}

bool Remove(cudaGraph_t g, bool force, std::string* why) {
  try {
    Table& t = TheTable();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.children.find(g);
    if (it == t.children.end()) return true;
    if (it->second.holders > 0 && !force) {
      if (why) {
        *why = std::to_string(it->second.holders) +
               " parent graph(s) still hold it: destroy the parent first (seed 003: children "
               "outlive the executable parent)";
      }
      return false;
    }
    t.children.erase(it);
    return true;
  } catch (...) {
    return force;
  }
}

}  // namespace memra::child_graphs
