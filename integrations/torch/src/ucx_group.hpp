#pragma once
// The "ddl" backend over UCX: for processes no MPI launcher started
// (torchrun, torch.multiprocessing.spawn, srun, a job's own workers). The
// group's members meet through the store torch hands the backend (a
// PrefixStore of the group's name over the init_method's store: env://,
// tcp://, file://), through `torch_store`, ddl's Store concept over it.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ddl/ucx.hpp>

namespace ddl_torch {

// ddl's Store concept (`ddl/rendezvous/store.hpp`) over torch's c10d::Store:
// `get` waits for the key with `check` (torch's own `get` would wait for
// the store's timeout, not ours), polling every 1-10 ms.
class torch_store {
 public:
  explicit torch_store(c10d::Store& s) : s_(s) {}
  void set(const std::string& key, const std::string& value) {
    s_.set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::optional<std::string> get(const std::string& key, ddl::deadline until) {
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      if (s_.check({key})) {
        const std::vector<uint8_t> v = s_.get(key);
        return std::string(v.begin(), v.end());
      }
      if (std::chrono::steady_clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(10));
    }
  }
  std::int64_t add(const std::string& key, std::int64_t delta) { return s_.add(key, delta); }

 private:
  c10d::Store& s_;
};

// The transport of a group of `size` members, this one torch's rank `rank`,
// over UCX; the rendezvous waits at most `wait` for the last member (then a
// timeout_error naming the missing ranks). Every group has a store of its
// own, so its keys need no number of ours; but torchrun's agent keeps its
// store across the restarts of an elastic job, so the keys carry the attempt
// (TORCHELASTIC_RESTART_COUNT): a restarted group must not read the records
// of the attempt that failed.
inline std::unique_ptr<ddl::ucx_transport> ucx_group(c10d::Store& store, int rank, int size,
                                                     std::chrono::duration<double> wait) {
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string name = std::string("torch.") + (attempt && *attempt ? attempt : "0");
  return std::make_unique<ddl::ucx_transport>(torch_store(store), rank, size, wait, name);
}

}  // namespace ddl_torch
