#pragma once
/// \file
/// The simulator's network: links per level and unit, connections between
/// ranks, messages flowing at shared rates, and the statistics a
/// `sim_report` shows. The model is described in `sim/transport.hpp`; this
/// file plays it out in virtual time, with no knowledge of ranks' operations
/// (the fabric starts a message when a send meets its receive, and learns
/// from `handle` when the message has arrived).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ddl/topology/topology.hpp"

namespace ddl {

/// One direction of one unit's links at one level.
struct sim_link {
  int level = 0;
  int unit = 0;
  bool egress = true;
  double capacity = 0;      ///< links x bandwidth, bytes/s
  double bytes = 0;         ///< bytes carried
  double busy_seconds = 0;  ///< time with at least one connection active
  std::string str() const {
    return "level " + std::to_string(level + 1) + " unit " + std::to_string(unit) + (egress ? " out" : " in");
  }
};

/// What a simulation measured.
struct sim_report {
  double seconds = 0;                 ///< virtual time when the last rank finished
  std::vector<double> rank_seconds;   ///< per rank
  std::size_t messages = 0;           ///< point-to-point messages
  double bytes = 0;                   ///< bytes sent in all
  /// Per level, innermost first.
  struct level_stats {
    double bytes = 0;           ///< bytes that left a unit over this level's links
    double busiest = 0;         ///< largest busy fraction of one of its links
    double top_seconds = 0;     ///< time with a message in flight whose highest level is this one
  };
  std::vector<level_stats> levels;
  /// The level that took the most time as the highest level messages crossed
  /// (what bounds the collective), and that level's link busy longest.
  int bound_level = 0;
  sim_link busiest;
  std::vector<sim_link> links;        ///< every link, levels innermost first
};

namespace detail {

/// Virtual time and what happens next: messages becoming active after their
/// latency, messages finishing, fibers' timers. Ties keep posting order.
/// Events made stale (a message rescheduled at a new rate) stay queued until
/// popped, or until the owner drops them all at once (`drop_if`).
class sim_clock {
 public:
  struct event {
    enum kind_t : std::uint8_t { activate, finish, timer } kind;  // timer: `id` is a fiber
    double time;
    std::uint64_t seq;
    std::uint32_t id, version;
    bool operator>(const event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  double now() const noexcept { return now_; }
  void push(event::kind_t k, double t, std::uint32_t id, std::uint32_t version = 0) {
    events_.push_back(event{k, t, seq_++, id, version});
    std::push_heap(events_.begin(), events_.end(), std::greater<event>{});
  }
  bool empty() const noexcept { return events_.empty(); }
  std::size_t size() const noexcept { return events_.size(); }
  /// The next event; virtual time moves to it.
  event pop() {
    std::pop_heap(events_.begin(), events_.end(), std::greater<event>{});
    const event e = events_.back();
    events_.pop_back();
    now_ = e.time;
    return e;
  }
  /// Forgets the events `stale(e)` names; the others keep their order (time,
  /// then posting order), so what pops next is what would have.
  template <class Stale>
  void drop_if(Stale stale) {
    events_.erase(std::remove_if(events_.begin(), events_.end(), stale), events_.end());
    std::make_heap(events_.begin(), events_.end(), std::greater<event>{});
  }
  void reset() {
    events_.clear();
    now_ = 0;
    seq_ = 0;
  }

 private:
  std::vector<event> events_;  // a heap, earliest on top
  double now_ = 0;
  std::uint64_t seq_ = 0;
};

/// A fresh record from `pool` (reusing freed ones), its generation bumped so
/// stale handles to the old occupant are recognised.
template <class Rec, class Bump>
std::uint32_t take_record(std::vector<Rec>& pool, std::vector<std::uint32_t>& free, Bump bump) {
  std::uint32_t i;
  if (!free.empty()) {
    i = free.back();
    free.pop_back();
  } else {
    i = static_cast<std::uint32_t>(pool.size());
    pool.emplace_back();
  }
  const std::uint32_t g = bump(pool[i]) + 1;
  pool[i] = Rec{};
  bump(pool[i]) = g;
  return i;
}

class flow_network {
 public:
  flow_network(const ddl::topology& topo, sim_clock& clock) : topo_(topo), clock_(clock), n_(topo.size()) {
    build_links();
    reset();
  }

  /// Forgets every message and statistic (links and connections' routes stay).
  void reset() {
    msgs_.clear();
    free_msgs_.clear();
    for (auto& c : conns_) {
      c.msgs.clear();
      c.rate = 0;
      c.stamp = 0;
    }
    for (auto& l : links_) {
      l.info.bytes = l.info.busy_seconds = 0;
      l.conns.clear();
    }
    top_.assign(topo_.count(), {0, 0.0});
    top_seconds_.assign(topo_.count(), 0.0);
    stamp_ = 0;
    compact_at_ = 4096;
    messages_ = 0;
    bytes_ = 0;
  }

  /// A message of `bytes` from rank `a` to rank `b`, posted now: it becomes
  /// active after its connection's latency. Returns its id.
  std::uint32_t start(int a, int b, std::size_t bytes) {
    const std::uint32_t m = take_record(msgs_, free_msgs_, [](msg_rec& rec) -> std::uint32_t& { return rec.version; });
    msg_rec& mr = msgs_[m];
    mr.live = true;
    mr.bytes = bytes;
    mr.remaining = static_cast<double>(bytes);
    mr.conn = connection(a, b);
    ++messages_;
    bytes_ += static_cast<double>(bytes);
    clock_.push(sim_clock::event::activate, clock_.now() + conns_[mr.conn].latency, m, mr.version);
    return m;
  }

  /// Plays out an `activate` or `finish` event; returns the message that
  /// arrived with it, if one did (its id is free for reuse afterwards).
  std::optional<std::uint32_t> handle(const sim_clock::event& e) {
    if (stale(e)) return std::nullopt;
    msg_rec& mr = msgs_[e.id];
    if (e.kind == sim_clock::event::activate) {
      if (mr.bytes == 0) return arrive(e.id);
      conn_rec& c = conns_[mr.conn];
      mr.active = true;
      mr.last = clock_.now();
      c.msgs.push_back(e.id);
      if (c.msgs.size() == 1) join(mr.conn);
      else refresh_conn(mr.conn, false);
      return std::nullopt;
    }
    return arrive(e.id);
  }

  /// Fills the network's part of `r` (`r.seconds` set by the caller).
  void fill(sim_report& r) const {
    r.messages = messages_;
    r.bytes = bytes_;
    r.levels.assign(topo_.count(), sim_report::level_stats{});
    // Levels in flight about as long (within 5%, e.g. all of a flat ring's)
    // are told apart by bandwidth: the slower one bounds.
    for (std::size_t l = 0; l < topo_.count(); ++l) {
      r.levels[l].top_seconds = top_seconds_[l];
      const auto b = static_cast<std::size_t>(r.bound_level);
      const double tb = top_seconds_[b], tl = top_seconds_[l];
      if (tl > 1.05 * tb || (tl >= 0.95 * tb && tl > 0 && topo_[l].bandwidth < topo_[b].bandwidth))
        r.bound_level = static_cast<int>(l);
    }
    r.busiest.level = r.bound_level;
    for (const auto& l : links_) {
      r.links.push_back(l.info);
      auto& pl = r.levels[static_cast<std::size_t>(l.info.level)];
      if (l.info.egress) pl.bytes += l.info.bytes;
      if (r.seconds > 0) pl.busiest = std::max(pl.busiest, l.info.busy_seconds / r.seconds);
      if (l.info.level == r.bound_level && l.info.busy_seconds > r.busiest.busy_seconds) r.busiest = l.info;
    }
  }

 private:
  struct msg_rec {
    bool live = false, active = false;
    std::uint32_t conn = 0, version = 0;
    std::size_t bytes = 0;
    double remaining = 0, rate = 0, last = 0;
  };
  struct conn_rec {
    std::vector<std::uint32_t> links;  // resource indices
    std::vector<std::uint32_t> msgs;   // active messages
    int top = 0;                       // highest level crossed
    double latency = 0, rate = 0;
    std::uint64_t stamp = 0;
  };
  struct link_rec {
    sim_link info;
    double per_conn = 0;               // one link's bandwidth
    std::vector<std::uint32_t> conns;  // active connections
    double busy_since = 0;
  };

  /// A message's event made out of date (rescheduled, or the message gone).
  bool stale(const sim_clock::event& e) const {
    const msg_rec& mr = msgs_[e.id];
    return mr.version != e.version || !mr.live;
  }
  std::uint32_t arrive(std::uint32_t m) {
    msg_rec& mr = msgs_[m];
    mr.live = false;
    if (mr.active) {
      conn_rec& c = conns_[mr.conn];
      c.msgs.erase(std::find(c.msgs.begin(), c.msgs.end(), m));
      for (std::uint32_t l : c.links) links_[l].info.bytes += static_cast<double>(mr.bytes);
      if (c.msgs.empty()) leave(mr.conn);
      else refresh_conn(mr.conn, false);
    }
    ++mr.version;
    free_msgs_.push_back(m);
    return m;
  }

  void build_links() {
    const std::size_t k = topo_.count();
    link_base_.assign(k, 0);
    int g = 1;
    for (std::size_t l = 0; l < k; ++l) {
      const level& lv = topo_[l];
      link_base_[l] = static_cast<std::uint32_t>(links_.size());
      const int units = n_ / g;
      const int nlinks = lv.links ? lv.links : g;
      for (int u = 0; u < units; ++u)
        for (bool out : {true, false}) {
          link_rec lr;
          lr.info.level = static_cast<int>(l);
          lr.info.unit = u;
          lr.info.egress = out;
          lr.info.capacity = lv.bandwidth * nlinks;
          lr.per_conn = lv.bandwidth;
          links_.push_back(lr);
        }
      g *= lv.extent;
    }
  }

  std::uint32_t connection(int a, int b) {
    const std::uint64_t key = static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(n_) + static_cast<std::uint64_t>(b);
    auto it = conn_index_.find(key);
    if (it != conn_index_.end()) return it->second;
    conn_rec c;
    int g = 1, ca = a, cb = b, top = 0;
    for (std::size_t l = 0; l < topo_.count(); ++l) {
      if (ca % topo_[l].extent != cb % topo_[l].extent) top = static_cast<int>(l);
      ca /= topo_[l].extent;
      cb /= topo_[l].extent;
    }
    for (int l = 0; l <= top; ++l) {
      const level& lv = topo_[static_cast<std::size_t>(l)];
      // A private level's links carry only messages that stay inside its unit.
      if (lv.extent > 1 && (l == top || !lv.private_links)) {
        const std::uint32_t base = link_base_[static_cast<std::size_t>(l)];
        c.links.push_back(base + static_cast<std::uint32_t>(2 * (a / g)));
        c.links.push_back(base + static_cast<std::uint32_t>(2 * (b / g) + 1));
        c.latency = std::max(c.latency, lv.latency);
      }
      g *= lv.extent;
    }
    c.top = top;
    const auto idx = static_cast<std::uint32_t>(conns_.size());
    conns_.push_back(std::move(c));
    conn_index_.emplace(key, idx);
    return idx;
  }

  double conn_rate(const conn_rec& c) const {
    double r = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : c.links) {
      const link_rec& lr = links_[l];
      const double share = lr.info.capacity / static_cast<double>(lr.conns.size());
      r = std::min(r, std::min(lr.per_conn, share));
    }
    return r;
  }

  /// Brings a connection's messages to now at the old rate, then reschedules
  /// them at the new one.
  void refresh_conn(std::uint32_t ci, bool recompute) {
    conn_rec& c = conns_[ci];
    const double rate = recompute ? conn_rate(c) : c.rate;
    c.rate = rate;
    if (c.msgs.empty()) return;
    const double now = clock_.now();
    const double per = rate / static_cast<double>(c.msgs.size());
    for (std::uint32_t m : c.msgs) {
      msg_rec& mr = msgs_[m];
      mr.remaining = std::max(0.0, mr.remaining - mr.rate * (now - mr.last));
      mr.last = now;
      // At an unchanged rate the finish already queued still holds: most
      // connections a join or leave refreshes keep theirs, and the stale
      // events would fill the queue.
      if (per == mr.rate) continue;
      mr.rate = per;
      ++mr.version;
      clock_.push(sim_clock::event::finish, now + mr.remaining / per, m, mr.version);
    }
    // Links shared by many connections reschedule them all at every join and
    // leave: the stale events are dropped whenever the queue has doubled
    // (plus 4096) since the last drop, not left to grow to many times what
    // is in flight.
    if (clock_.size() > compact_at_) {
      clock_.drop_if([this](const sim_clock::event& e) { return e.kind != sim_clock::event::timer && stale(e); });
      compact_at_ = 2 * clock_.size() + 4096;
    }
  }
  void refresh_around(std::uint32_t ci) {
    const std::uint64_t st = ++stamp_;
    for (std::uint32_t l : conns_[ci].links)
      for (std::uint32_t other : links_[l].conns)
        if (conns_[other].stamp != st) {
          conns_[other].stamp = st;
          refresh_conn(other, true);
        }
  }
  void join(std::uint32_t ci) {
    auto& tl = top_[static_cast<std::size_t>(conns_[ci].top)];
    if (tl.first++ == 0) tl.second = clock_.now();
    for (std::uint32_t l : conns_[ci].links) {
      link_rec& lr = links_[l];
      if (lr.conns.empty()) lr.busy_since = clock_.now();
      lr.conns.push_back(ci);
    }
    refresh_around(ci);
  }
  void leave(std::uint32_t ci) {
    auto& tl = top_[static_cast<std::size_t>(conns_[ci].top)];
    if (--tl.first == 0) top_seconds_[static_cast<std::size_t>(conns_[ci].top)] += clock_.now() - tl.second;
    for (std::uint32_t l : conns_[ci].links) {
      link_rec& lr = links_[l];
      lr.conns.erase(std::find(lr.conns.begin(), lr.conns.end(), ci));
      if (lr.conns.empty()) lr.info.busy_seconds += clock_.now() - lr.busy_since;
    }
    refresh_around(ci);
    conns_[ci].rate = 0;
  }

  const ddl::topology& topo_;
  sim_clock& clock_;
  int n_ = 0;
  std::size_t messages_ = 0;
  double bytes_ = 0;
  std::uint64_t stamp_ = 0;
  std::size_t compact_at_ = 4096;  // queue length that triggers dropping stale events
  std::vector<msg_rec> msgs_;
  std::vector<std::uint32_t> free_msgs_;
  std::vector<conn_rec> conns_;
  std::unordered_map<std::uint64_t, std::uint32_t> conn_index_;
  std::vector<link_rec> links_;
  std::vector<std::uint32_t> link_base_;
  std::vector<std::pair<int, double>> top_;  // per level: connections active with it as top, since when
  std::vector<double> top_seconds_;
};

}  // namespace detail
}  // namespace ddl
