#pragma once
/// \file
/// Topology detection over any process transport (MPI, UCX): what
/// `mpi_cluster` and `ucx_cluster` share once they have found which ranks
/// share a node and numbered the ranks node by node (the innermost
/// dimension of any box then stays inside a node whatever order the
/// launcher chose). `basic_cluster<T>` builds the topology:
///   - `DDL_TOPOLOGY` when set (checked identical on every rank first, so a
///     mismatch is the same `topology_error` everywhere, not a hang);
///   - `DDL_TOPOLOGY=auto` (or `detect_options::hierarchy`): measured. A
///     node is priced by one collective step of all its ranks at once; the
///     node leaders probe pairwise, one pair at a time (latency from 1-byte
///     round trips; bandwidth from a one-way stream, and from streams both
///     ways at once, the exchange bandwidth: steps that exchange with one
///     peer are priced with it), nodes are grouped by the largest one-way
///     bandwidth gap into "racks", nodes are renumbered rack by rack, and a
///     concurrent probe finds how many links a node and a rack have (does a
///     second flow halve the first?) and what exchanging costs under that
///     load (every rank of a unit streaming at once, one way and both ways:
///     the ratio scales the level's exchange bandwidth, since a pair probed
///     alone can miss a penalty the loaded unit pays). Three levels (ranks
///     per node x nodes per rack x racks), or two when no gap shows; what
///     was found is logged on rank 0;
///   - else two levels, ranks per node (shared memory) x nodes (network),
///     with default link costs, or measured ones with `probe` / `DDL_PROBE=1`;
///   - else, when nodes hold different rank counts, one flat level (with a
///     warning): the multi-ring needs a box, the ring and doubling do not.
/// The measurements are `topology/probe.hpp`'s; the clustering and the
/// plausibility checks are pure (`topology/cluster.hpp`).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ddl/core/config.hpp"
#include "ddl/core/hash.hpp"
#include "ddl/topology/cluster.hpp"
#include "ddl/topology/probe.hpp"
#include "ddl/topology/topology.hpp"

namespace ddl {

/// Where ranks sit: nodes ordered by their lowest rank in the group the
/// cluster was made from (rack by rack once `DDL_TOPOLOGY=auto` found racks).
struct node_layout {
  int nodes = 1;
  int node = 0;        ///< this rank's node
  int local_rank = 0;  ///< rank within the node
  int local_size = 1;  ///< ranks on this rank's node
  bool uniform = true; ///< every node holds the same number of ranks
  std::vector<int> node_sizes;
};

/// Settings of detection.
struct detect_options {
  /// >= 0: ranks passing the same colour share a "node" (tests, emulated
  /// clusters); -1: ask the transport's world (MPI: shared memory; UCX:
  /// the host name).
  int node_colour = -1;
  /// Measure point-to-point bandwidth and latency per level (also `DDL_PROBE=1`).
  bool probe = false;
  /// Find racks by probing node leaders pairwise (also `DDL_TOPOLOGY=auto`).
  bool hierarchy = false;
  /// Bandwidths closer than this ratio are one level.
  double gap_ratio = 1.5;
  /// Bytes of one bandwidth probe message.
  std::size_t probe_bytes = std::size_t{1} << 20;
  /// Link costs assumed without a probe or `DDL_TOPOLOGY`.
  double node_bandwidth = 5e9, node_latency = 2e-6;        ///< inside a node (shared memory)
  /// A node's step latency when its ranks outnumber the cores they may run
  /// on: every hand-off then waits for the receiver to be scheduled. Its
  /// bandwidth is then `node_bandwidth` x cores / ranks: the ranks' copies
  /// share the cores (a little below what the probe measures, on purpose:
  /// the planner should not count on the scheduler's luck).
  double oversubscribed_latency = 20e-6;
  double network_bandwidth = 1.25e9, network_latency = 20e-6;  ///< between nodes
  /// Print what was found and any fallback on rank 0 (stderr).
  bool verbose = false;
};

namespace detail {
/// The layout from each rank's node key (its host name, a colour, its node
/// leader): ranks with one key share a node, nodes are ordered by their
/// lowest rank, ranks inside a node by rank.
inline node_layout layout_of(const std::vector<std::string>& keys, int rank) {
  node_layout L;
  std::vector<std::string> order;  // node keys by first rank
  std::vector<int> node_of(keys.size());
  for (std::size_t q = 0; q < keys.size(); ++q) {
    const auto it = std::find(order.begin(), order.end(), keys[q]);
    node_of[q] = static_cast<int>(it - order.begin());
    if (it == order.end()) order.push_back(keys[q]);
  }
  L.nodes = static_cast<int>(order.size());
  L.node_sizes.assign(order.size(), 0);
  L.node = node_of[static_cast<std::size_t>(rank)];
  for (std::size_t q = 0; q < keys.size(); ++q) {
    if (static_cast<int>(q) < rank && node_of[q] == L.node) ++L.local_rank;
    ++L.node_sizes[static_cast<std::size_t>(node_of[q])];
  }
  L.local_size = L.node_sizes[static_cast<std::size_t>(L.node)];
  L.uniform = std::all_of(L.node_sizes.begin(), L.node_sizes.end(), [&](int s) { return s == L.node_sizes[0]; });
  return L;
}

/// Whether numbering node by node keeps every rank's number: each node's
/// ranks already contiguous (a key, once left, never comes back). O(n log n).
inline bool node_major_already(const std::vector<std::string>& keys) {
  std::set<std::string> left;
  for (std::size_t q = 1; q < keys.size(); ++q)
    if (keys[q] != keys[q - 1]) {
      left.insert(keys[q - 1]);
      if (left.count(keys[q])) return false;
    }
  return true;
}

/// This rank's number when ranks are numbered node by node.
inline int node_major_rank(const node_layout& L) {
  int before = 0;
  for (int k = 0; k < L.node; ++k) before += L.node_sizes[static_cast<std::size_t>(k)];
  return before + L.local_rank;
}
}  // namespace detail

/// Ranks numbered node by node over a transport `T` (an `mpi_transport`, a
/// `ucx_transport`), and the topology they form. Made by `mpi_cluster` and
/// `ucx_cluster`, which find the nodes and number the ranks; this class
/// prices the levels and, when it finds racks, numbers the nodes rack by rack.
template <class T>
class basic_cluster {
 public:
  /// The transport in node-major (rack-major when racks were found) rank order.
  T& transport() noexcept { return *transport_; }
  const ddl::topology& topo() const noexcept { return topology_; }
  const node_layout& layout() const noexcept { return layout_; }
  /// One line: what detection found and where the costs came from.
  const std::string& report() const noexcept { return found_; }

 protected:
  /// Gives this rank the number `rank` in a new transport of the same group
  /// (collective: every rank calls it at once).
  using renumber_fn = std::function<std::unique_ptr<T>(int rank)>;

  basic_cluster() = default;
  ~basic_cluster() = default;
  basic_cluster(const basic_cluster&) = delete;
  basic_cluster& operator=(const basic_cluster&) = delete;

  /// Builds the topology over `t`, whose ranks are numbered node by node as
  /// `layout` says. Collective; throws the same `topology_error` on every
  /// rank when `DDL_TOPOLOGY` differs between ranks or does not fit.
  void detect(std::unique_ptr<T> t, node_layout layout, const detect_options& o, renumber_fn renumber) {
    transport_ = std::move(t);
    layout_ = std::move(layout);
    renumber_ = std::move(renumber);
    prober_.retarget(*transport_);
    const int n = transport_->size();

    const char* env = std::getenv("DDL_TOPOLOGY");
    const std::string raw = env ? env : "";
    const std::string text = raw != "auto" ? raw : "";
    check_same_everywhere(raw);
    if (!text.empty()) {
      topology_ = topology::parse(text);
      topology_.check(n);
      found_ = "DDL_TOPOLOGY=" + text;
    } else if (layout_.uniform) {
      const int ppn = layout_.node_sizes[0];
      // Ranks outnumbering the cores they may run on: a step costs a
      // process switch, not a memory hop, and the ranks' copies share the
      // cores (each flow of a step where all move data gets cores / ranks).
      const int cores = transport_->cores();
      const bool crowded = ppn > cores;
      const double node_latency = crowded ? std::max(o.node_latency, o.oversubscribed_latency) : o.node_latency;
      const double node_bandwidth = crowded ? o.node_bandwidth * cores / ppn : o.node_bandwidth;
      if (ppn > 1 || layout_.nodes == 1) topology_.add(level{ppn, node_bandwidth, node_latency, 0});
      if (layout_.nodes > 1) topology_.add(level{layout_.nodes, o.network_bandwidth, o.network_latency, 0});
      found_ = std::to_string(layout_.nodes) + " node(s) x " + std::to_string(ppn) + " rank(s)";
      if (crowded) found_ += " on " + std::to_string(cores) + " core(s): steps priced as process switches";
      const char* p = std::getenv("DDL_PROBE");
      if ((raw == "auto" || o.hierarchy) && layout_.nodes > 1) probe_hierarchy(o);
      else if (o.probe || raw == "auto" || (p && std::string(p) == "1")) probe();
    } else {
      std::string sizes;
      for (int s : layout_.node_sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(s);
      topology_ = topology::uniform(n, o.network_bandwidth, o.network_latency);
      found_ = "nodes hold different rank counts (" + sizes + "): one flat level of " + std::to_string(n) +
               " ranks; multi-ring boxes across nodes are not used";
      if (transport_->rank() == 0) std::fprintf(stderr, "ddl: warning: %s\n", found_.c_str());
    }
    renumber_ = nullptr;  // may hold what the subclass's constructor owns
    if ((o.verbose || raw == "auto") && transport_->rank() == 0)
      std::fprintf(stderr, "ddl: topology: %s -> %s\n", found_.c_str(), topology_.str().c_str());
  }

 private:
  void check_same_everywhere(const std::string& text) {
    const std::uint64_t mine = detail::fnv1a(text);
    const std::vector<std::byte> bytes = prober_.share(&mine, sizeof mine);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(transport_->size()));
    std::memcpy(all.data(), bytes.data(), bytes.size());
    for (std::size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0])
        throw topology_error("DDL_TOPOLOGY differs between ranks (rank " + std::to_string(r) +
                             " has a different value than rank 0); set the same value on every rank");
  }

  // The node level: one step of a collective as every rank of a node runs
  // it at once (`prober::node_step_cost`: 1 byte for the latency, 1 MiB
  // for the bandwidth); between nodes, ping-pong between rank 0 and rank
  // `ppn`. Rank 0's figures are checked (`sane`) and used everywhere. Every
  // wait has a deadline.
  void probe() {
    auto& t = *transport_;
    const int ppn = layout_.node_sizes[0];
    std::vector<int> partners;
    if (ppn > 1) partners.push_back(1);
    if (layout_.nodes > 1) partners.push_back(ppn);
    std::vector<double> costs(2 * partners.size(), 0.0);
    std::string log;
    for (std::size_t k = 0; k < partners.size(); ++k) {
      const level& fallback = topology_[k];
      const bool in_node = k == 0 && ppn > 1;
      detail::link_cost c = in_node ? prober_.node_step_cost(ppn, std::size_t{1} << 20)
                                    : prober_.pingpong(0, partners[k], std::size_t{4} << 20, 4);
      if (t.rank() == 0) {
        c = prober_.sane(c, {fallback.latency, fallback.bandwidth}, in_node ? "inside a node" : "between nodes", log);
        costs[2 * k] = c.latency;
        costs[2 * k + 1] = c.bandwidth;
      }
    }
    prober_.from_rank0(costs.data(), costs.size());
    for (std::size_t k = 0; k < partners.size(); ++k) {
      topology_[k].latency = costs[2 * k];
      topology_[k].bandwidth = costs[2 * k + 1];
    }
    found_ += std::string(", link costs probed") + (ppn > 1 ? " (in a node: one step of all its ranks at once)" : "") + log;
  }

  void probe_hierarchy(const detect_options& o) {
    auto& t = *transport_;
    const int ppn = layout_.node_sizes[0], nodes = layout_.nodes;
    // Stream as the collectives will: that many chunks in flight.
    const int depth = static_cast<int>(options::from_env().pipeline_depth);
    std::string log;
    char line[200];
    // Inside a node: one step of all its ranks at once.
    detail::link_cost node{};
    if (ppn > 1) {
      node = prober_.node_step_cost(ppn, o.probe_bytes);
      if (t.rank() == 0) node = prober_.sane(node, {o.node_latency, o.node_bandwidth}, "inside a node", log);
      prober_.quiet_barrier();
      double shared[2] = {node.latency, node.bandwidth};
      prober_.from_rank0(shared, 2);
      node = {shared[0], shared[1]};
    }
    // Every pair of node leaders, one pair at a time.
    const auto N = static_cast<std::size_t>(nodes);
    detail::pair_matrices pm = prober_.measure_pairs(nodes, ppn, o.probe_bytes, depth);
    std::vector<double>& bw = pm.one_way, &xbw = pm.exchange, &lat = pm.latency;
    // Rank 0 checks every pair against its bounds; what it decides, all use.
    const link_bounds lb = prober_.bounds();
    if (t.rank() == 0) {
      int replaced = 0;
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = 0; j < N; ++j) {
          if (i == j) continue;
          const std::size_t k = i * N + j;
          if (!implausible_link(lat[k], bw[k], lb).empty() || !implausible_link(lat[k], xbw[k], lb).empty()) {
            bw[k] = xbw[k] = o.network_bandwidth;
            lat[k] = o.network_latency;
            ++replaced;
          }
        }
      if (replaced) {
        std::snprintf(line, sizeof line, "\n  %d pair(s) implausible (latency < %.3g us or bandwidth > %.3g GB/s): defaults used", replaced,
                      lb.min_latency * 1e6, lb.max_bandwidth / 1e9);
        log += line;
      }
    }
    for (auto* m : {&bw, &xbw, &lat}) prober_.from_rank0(m->data(), m->size());
    auto print_matrix = [&](const std::vector<double>& m, const char* unit) {
      for (int i = 0; i < nodes; ++i) {
        log += "\n  node " + std::to_string(i) + " to nodes:";
        for (int j = 0; j < nodes; ++j) {
          std::snprintf(line, sizeof line, " %8.1f", i == j ? 0.0 : m[i * N + j] / 1e6);
          log += line;
        }
        log += unit;
      }
    };
    print_matrix(bw, " MB/s one way");
    print_matrix(xbw, " MB/s each way, exchanging");
    // Racks: the largest bandwidth gap splits fast pairs from slow ones
    // (topology/cluster.hpp; used only when the split is clean).
    const bandwidth_groups split = group_by_bandwidth_gap(bw, nodes, o.gap_ratio);
    const double gap = split.gap;
    const bool clean = split.clean;
    const int groups = split.groups;
    const std::vector<int>& group = split.group;
    if (!clean && gap >= o.gap_ratio) log += "\n  " + split.why + ": one network level";
    const int per_group = clean ? nodes / groups : nodes;
    // Renumber nodes rack by rack (groups in order of their first node).
    std::vector<int> order;  // order[k] = old node at new position k
    if (clean)
      for (int g = 0; g < groups; ++g)
        for (int i = 0; i < nodes; ++i)
          if (group[static_cast<std::size_t>(i)] == g) order.push_back(i);
    bool moved = false;
    for (std::size_t k = 0; k < order.size(); ++k) moved = moved || order[k] != static_cast<int>(k);
    if (moved) {
      int pos = 0;
      for (std::size_t k = 0; k < order.size(); ++k)
        if (order[k] == layout_.node) pos = static_cast<int>(k);
      prober_.quiet_barrier();  // nothing of the old numbering in flight
      transport_ = renumber_(pos * ppn + layout_.local_rank);
      prober_.retarget(*transport_);
      layout_.node = pos;
      log += "\n  nodes renumbered rack by rack";
    }
    struct pair_costs {
      double latency, bandwidth, exchange;
    };
    auto stats = [&](bool inside) {
      std::vector<double> b, x, l;
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = i + 1; j < N; ++j)
          if (!clean || (group[i] == group[j]) == inside) {
            b.push_back(bw[i * N + j]);
            x.push_back(xbw[i * N + j]);
            l.push_back(lat[i * N + j]);
          }
      // An exchange is never priced faster than one way.
      return pair_costs{detail::median(l), detail::median(b), std::min(detail::median(x), detail::median(b))};
    };
    // The level's exchange bandwidth: its one-way bandwidth times the loaded
    // factor when measured, else the pairs' own exchange figure.
    auto exchange_of = [](const pair_costs& c, const detail::unit_probe& u) {
      return u.factor > 0 ? c.bandwidth * u.factor : c.exchange;
    };
    topology_ = topology{};
    if (ppn > 1) topology_.add(level{ppn, node.bandwidth, node.latency, 0});
    const pair_costs in = stats(true);
    // Node links: every rank of node 0 talks to its counterpart on node 1 at once.
    std::vector<std::pair<int, int>> pairs;
    for (int r = 0; r < ppn; ++r) pairs.push_back({r, ppn + r});
    const detail::unit_probe node_unit = prober_.probe_unit(pairs, o.probe_bytes, depth);
    const double in_x = exchange_of(in, node_unit);
    topology_.add(level{per_group, in.bandwidth, in.latency, node_unit.links, in_x});
    std::snprintf(line, sizeof line, "\n  %s: %d node(s), %.1f MB/s one way, %.1f MB/s exchanging, %.1f us, %s",
                  clean ? "inside a rack" : "network", per_group, in.bandwidth / 1e6, in_x / 1e6, in.latency * 1e6,
                  node_unit.links ? (std::to_string(node_unit.links) + " link(s) per node").c_str()
                                  : "links per node not measured (one per rank assumed)");
    log += line + detail::prober<T>::describe(node_unit, pairs.size());
    if (clean) {
      const pair_costs out = stats(false);
      // Rack links: every rank of rack 0's nodes talks to its counterpart in
      // rack 1 at once (the load a cross-rack step puts on them).
      pairs.clear();
      for (int k = 0; k < per_group; ++k)
        for (int r = 0; r < ppn; ++r) pairs.push_back({k * ppn + r, (per_group + k) * ppn + r});
      const detail::unit_probe rack_unit = prober_.probe_unit(pairs, o.probe_bytes, depth);
      const double out_x = exchange_of(out, rack_unit);
      // Racks' links are counted in node uplinks, not flows (0: not measured).
      const int rack_links = std::min(per_group, rack_unit.links);
      topology_.add(level{groups, out.bandwidth, out.latency, rack_links, out_x});
      std::snprintf(line, sizeof line,
                    "\n  across racks: %d rack(s), %.1f MB/s one way, %.1f MB/s exchanging, %.1f us, %d link(s) per rack (gap %.1fx)",
                    groups, out.bandwidth / 1e6, out_x / 1e6, out.latency * 1e6, rack_links, gap);
      log += line + detail::prober<T>::describe(rack_unit, pairs.size());
    }
    topology_.check(transport_->size());
    found_ += ", hierarchy probed (DDL_TOPOLOGY=auto):" + log;
  }

  detail::prober<T> prober_;
  node_layout layout_;
  std::unique_ptr<T> transport_;
  renumber_fn renumber_;
  ddl::topology topology_;
  std::string found_;
};

}  // namespace ddl
