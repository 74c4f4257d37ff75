#pragma once
/// \file
/// The simulator's operation records and the queues where sends meet
/// receives (`sim_fabric`'s bookkeeping): a send goes to the older of the
/// receives from its rank and from any rank; a receive from any rank takes
/// the oldest send waiting for one. Records are recycled; a generation
/// tells a stale request from the record's new owner.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ddl/core/memory.hpp"
#include "ddl/sim/network.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/stamp.hpp"

namespace ddl::detail {

/// One posted send or receive (or a read of a peer's stage).
struct sim_op {
  std::uint32_t gen = 0;
  bool used = false, send = false, fused = false, done = false, cancelled = false;
  int rank = 0, peer = 0;  // peer -1: a receive from any rank, the sender once matched
  int fiber = 0;           // the fiber that posted it (woken when it completes)
  std::uint64_t seq = 0;   // posting order (a send meets the older of two receives)
  tag tg = 0;
  std::size_t bytes = 0;
  const std::byte* src = nullptr;  // send: data
  std::byte* dst = nullptr;        // recv: destination
  const std::byte* local = nullptr;
  reduction red{};
  bool matched = false;
  std::string error;
};

/// The records and the matching queues of one run.
class sim_operations {
 public:
  sim_op& operator[](std::uint32_t i) { return ops_[i]; }
  const sim_op& operator[](std::uint32_t i) const { return ops_[i]; }

  void clear() {
    ops_.clear();
    free_.clear();
    match_.clear();
  }

  /// A new record holding `proto`, owned by fiber `fiber`; `posted`: a send
  /// or receive, numbered in posting order (a read is not).
  std::uint32_t record(sim_op proto, int fiber, bool posted) {
    const std::uint32_t i = take_record(ops_, free_, [](sim_op& o) -> std::uint32_t& { return o.gen; });
    if (posted) proto.seq = ++posted_;
    proto.gen = ops_[i].gen;
    proto.used = true;
    proto.fiber = fiber;
    ops_[i] = std::move(proto);
    return i;
  }
  void free(std::uint32_t i) {
    ops_[i].used = false;
    ++ops_[i].gen;
    free_.push_back(i);
  }

  /// Record `i` (just posted) meets its partner: (send, receive), taken out
  /// of the queues; or none, and `i` waits in its queue.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> match(std::uint32_t i) {
    const sim_op& o = ops_[i];
    if (!o.send && o.peer == -1) {  // the oldest send to this rank under the tag from anyone
      auto best = match_.end();
      for (auto at = match_.begin(); at != match_.end(); ++at)
        if (at->first.tg == o.tg && static_cast<std::uint32_t>(at->first.pair) == static_cast<std::uint32_t>(o.rank) &&
            !at->second.sends.empty() &&
            (best == match_.end() || ops_[at->second.sends.front()].seq < ops_[best->second.sends.front()].seq))
          best = at;
      if (best != match_.end()) {
        const std::uint32_t j = best->second.sends.front();
        best->second.sends.pop_front();
        if (best->second.sends.empty() && best->second.recvs.empty()) match_.erase(best);
        return std::pair{j, i};
      }
    } else if (o.send) {  // a receive from any rank posted before the receive from this one takes it
      auto any = match_.find(key{any_source << 32 | static_cast<std::uint32_t>(o.peer), o.tg});
      if (any != match_.end() && !any->second.recvs.empty()) {
        const auto mine = match_.find(key_of(o));
        const bool older = mine == match_.end() || mine->second.recvs.empty() ||
                           ops_[any->second.recvs.front()].seq < ops_[mine->second.recvs.front()].seq;
        if (older) {
          const std::uint32_t j = any->second.recvs.front();
          any->second.recvs.pop_front();
          if (any->second.recvs.empty()) match_.erase(any);
          return std::pair{i, j};
        }
      }
    }
    auto it = match_.find(key_of(o));
    if (it != match_.end()) {
      auto& other = o.send ? it->second.recvs : it->second.sends;
      if (!other.empty()) {
        const std::uint32_t j = other.front();
        other.pop_front();
        if (it->second.sends.empty() && it->second.recvs.empty()) match_.erase(it);
        return o.send ? std::pair{i, j} : std::pair{j, i};
      }
    } else {
      it = match_.emplace(key_of(o), queues{}).first;
    }
    (o.send ? it->second.sends : it->second.recvs).push_back(i);
    return std::nullopt;
  }

  /// Takes unmatched record `i` out of its queue.
  void unqueue(std::uint32_t i) {
    const sim_op& o = ops_[i];
    auto it = match_.find(key_of(o));
    if (it == match_.end()) return;
    auto& q = o.send ? it->second.sends : it->second.recvs;
    q.erase(std::find(q.begin(), q.end(), i));
    if (it->second.sends.empty() && it->second.recvs.empty()) match_.erase(it);
  }

  /// At a deadlock: a send left unmatched while its receiver waits on
  /// anything of the same call under another stamp (`transport/stamp.hpp`)
  /// -- a receive from that sender, or a send of its own (a broadcast whose
  /// ranks name different roots: each sends down its own tree) -- means the
  /// two ranks called different collectives; its text, or "". (Had the
  /// receiver gone on to the same-numbered call of another communicator, it
  /// would have finished this one and taken the send.)
  std::string stamp_disagreement() const {
    std::vector<std::pair<std::uint64_t, tag>> sent;    // (pair, tag) of unmatched sends
    std::unordered_map<int, std::vector<tag>> waiting;  // rank -> tags of its unmatched sends and receives
    for (const auto& [k, q] : match_) {
      if (!is_stamped(k.tg)) continue;
      if (!q.sends.empty()) {
        sent.emplace_back(k.pair, k.tg);
        waiting[static_cast<int>(k.pair >> 32)].push_back(k.tg);
      }
      if (!q.recvs.empty()) waiting[static_cast<int>(k.pair & 0xffffffffu)].push_back(k.tg);
    }
    for (const auto& [pair, theirs] : sent) {
      const int from = static_cast<int>(pair >> 32), to = static_cast<int>(pair & 0xffffffffu);
      const auto it = waiting.find(to);
      if (it == waiting.end()) continue;
      for (tag mine : it->second)
        if (stamps_disagree(mine, theirs)) return stamp_mismatch(to, mine, from, theirs);
    }
    return {};
  }

 private:
  // The queues of (sender, receiver, tag); a receive from any rank waits
  // under (`any_source`, receiver, tag) and never holds sends.
  struct key {
    std::uint64_t pair, tg;
    bool operator==(const key& o) const { return pair == o.pair && tg == o.tg; }
  };
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      return static_cast<std::size_t>(k.pair * 0x9E3779B97F4A7C15ull ^ (k.tg + 0x632BE59BD9B4E019ull + (k.pair << 6)));
    }
  };
  struct queues {
    std::deque<std::uint32_t> sends, recvs;
  };
  static constexpr std::uint64_t any_source = 0xffffffffu;
  static key key_of(const sim_op& o) {
    const int dst = o.send ? o.peer : o.rank;
    const std::uint64_t src = o.send ? static_cast<std::uint64_t>(o.rank)
                              : o.peer < 0 ? any_source
                                           : static_cast<std::uint64_t>(o.peer);
    return {src << 32 | static_cast<std::uint32_t>(dst), o.tg};
  }

  std::vector<sim_op> ops_;
  std::vector<std::uint32_t> free_;
  std::unordered_map<key, queues, key_hash> match_;
  std::uint64_t posted_ = 0;  // operations posted (their `seq`)
};

}  // namespace ddl::detail
