#pragma once
/// \file
/// The simulator's memory (`sim_fabric`'s): phantom ranges, reserved and
/// inaccessible, that stand for buffers in runs of sizes only; and the
/// ranks' stages, which the ranks of one shared unit read of each other
/// (`sim_options::shared_levels`). Whose stage an address lies in decides
/// whether a read travels over the network.

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"

namespace ddl::detail {

class sim_memory {
 public:
  struct stage_rec {
    std::byte* base = nullptr;
    std::size_t size = 0;
  };

  sim_memory() = default;
  sim_memory(const sim_memory&) = delete;
  sim_memory& operator=(const sim_memory&) = delete;
  ~sim_memory() {
    for (auto& [at, size] : phantom_) munmap(const_cast<std::byte*>(at), size);
  }

  /// `n` ranks, `unit` of them to a shared unit (0: no shared memory);
  /// `phantom`: stages are phantom ranges too.
  void reset(int n, int unit, bool phantom) {
    n_ = n;
    unit_ = unit;
    phantom_run_ = phantom;
    stages_.assign(static_cast<std::size_t>(n), stage_rec{});
  }

  /// Whether ranks `a` and `b` lie in one shared unit.
  bool same_unit(int a, int b) const noexcept { return unit_ > 0 && a / unit_ == b / unit_; }
  /// Whether one shared unit holds every rank.
  bool one_unit() const noexcept { return unit_ > 0 && unit_ >= n_; }
  /// Whether any rank has a stage (no read can touch one otherwise).
  bool any_stage() const noexcept { return !stage_owner_.empty(); }

  /// Rank `r`'s stage, grown to at least `bytes` (its address may change;
  /// at least 4 KiB, zeroed).
  std::byte* stage(int r, std::size_t bytes) {
    stage_rec& s = stages_[static_cast<std::size_t>(r)];
    if (bytes <= s.size) return s.base;
    const std::size_t size = std::max<std::size_t>({bytes, s.size * 2, 4096});
    std::byte* at = nullptr;
    if (phantom_run_) {
      at = static_cast<std::byte*>(reserve(size, "a stage of "));
    } else {
      stage_memory_.emplace_back(new std::byte[size]());  // zeroed; kept: peers may hold the old one until their call ends
      at = stage_memory_.back().get();
    }
    stage_owner_[at] = {size, r};
    s = {at, size};
    return at;
  }
  /// Rank `r`'s stage as it is (made, at 4 KiB, if it has none yet).
  const stage_rec& stage_of(int r) {
    if (!stages_[static_cast<std::size_t>(r)].base) stage(r, 4096);
    return stages_[static_cast<std::size_t>(r)];
  }

  /// Whether `p` lies in a phantom range.
  bool phantom_at(const std::byte* p) const {
    auto it = phantom_.upper_bound(p);
    if (it == phantom_.begin()) return false;
    --it;
    return p < it->first + it->second;
  }
  /// The rank whose stage holds [p, p + bytes), or -1.
  int stage_owner(const std::byte* p, std::size_t bytes) const {
    auto it = stage_owner_.upper_bound(p);
    if (it == stage_owner_.begin()) return -1;
    --it;
    if (p >= it->first + it->second.first) return -1;
    if (p + bytes > it->first + it->second.first)
      throw transport_error("sim_transport: a read of " + std::to_string(bytes) + " bytes runs past rank " +
                            std::to_string(it->second.second) + "'s stage");
    return it->second.second;
  }

  /// `bytes` of phantom memory in slot 0..3 (phantom runs only), shared by
  /// every rank; grown when shorter.
  void* phantom(std::size_t bytes, int slot) {
    if (!phantom_run_) throw invalid_argument("sim_transport: phantom_buffer needs sim_options::phantom");
    if (slot < 0 || slot > 3) throw invalid_argument("sim_transport: phantom slots are 0..3");
    auto& s = slots_[slot];
    if (bytes > s.second || !s.first) {
      const std::size_t size = std::max<std::size_t>(bytes, 4096);
      s = {reserve(size, ""), size};  // earlier ranges stay reserved: ranks may still hold them
    }
    return s.first;
  }

 private:
  void* reserve(std::size_t size, const char* what) {
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw transport_error(std::string("sim_transport: cannot reserve ") + what + std::to_string(size) +
                            (*what ? " bytes" : " phantom bytes"));
    phantom_[static_cast<const std::byte*>(p)] = size;
    return p;
  }

  int n_ = 0;
  int unit_ = 0;  // ranks per shared unit; 0: none
  bool phantom_run_ = false;
  std::pair<void*, std::size_t> slots_[4]{};
  std::map<const std::byte*, std::size_t> phantom_;  // every phantom range (slots, stages): its size
  std::vector<stage_rec> stages_;                    // per rank: its stage now
  std::map<const std::byte*, std::pair<std::size_t, int>> stage_owner_;  // every stage ever: (size, rank)
  std::vector<std::unique_ptr<std::byte[]>> stage_memory_;               // real runs: the stages' memory
};

}  // namespace ddl::detail
