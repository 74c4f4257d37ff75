#pragma once
/// \file
/// Topology detection over MPI.
///
/// `ddl::mpi_cluster` finds the ranks of each node with
/// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` (or a colour given for tests
/// and emulated clusters), renumbers ranks node by node, so that the
/// innermost dimension of any box stays inside a node whatever order the
/// launcher chose, and builds a topology:
///   - `DDL_TOPOLOGY` when set (checked identical on every rank first, so a
///     mismatch is the same `topology_error` everywhere, not a hang);
///   - `DDL_TOPOLOGY=auto` (or `detect_options::hierarchy`): measured. A
///     node is priced by one collective step of all its ranks at once; the
///     node leaders probe pairwise, one pair at a time (latency from 1-byte
///     round trips; bandwidth from a one-way stream, and from streams both
///     ways at once, the exchange bandwidth: steps that exchange with one
///     peer are priced with it), nodes are grouped
///     by the largest one-way bandwidth gap into "racks", nodes are renumbered rack
///     by rack, and a concurrent probe finds how many links a node and a rack
///     have (does a second flow halve the first?) and what exchanging costs
///     under that load (every rank of a unit streaming at once, one way and
///     both ways: the ratio scales the level's exchange bandwidth, since a
///     pair probed alone can miss a penalty the loaded unit pays). Three levels (ranks per
///     node x nodes per rack x racks), or two when no gap shows; what was
///     found is logged on rank 0;
///   - else two levels, ranks per node (shared memory) x nodes (network),
///     with default link costs, or measured ones with `probe` / `DDL_PROBE=1`;
///   - else, when nodes hold different rank counts, one flat level (with a
///     warning): the multi-ring needs a box, the ring and doubling do not.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>

#include "ddl/core/config.hpp"
#include "ddl/core/hash.hpp"
#include "ddl/mpi/probe.hpp"
#include "ddl/mpi/transport.hpp"
#include "ddl/topology/cluster.hpp"
#include "ddl/topology/topology.hpp"

namespace ddl {

/// Where ranks sit: nodes ordered by their lowest rank in the input communicator.
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
  /// clusters); -1: ask MPI which ranks share memory.
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
  /// on: every hand-off then waits for the receiver to be scheduled (measured
  /// ~20-35 us per step on the project's 2-core VM with 4-8 ranks). Its
  /// bandwidth is then `node_bandwidth` x cores / ranks: the ranks' copies
  /// share the cores (the probe measured 1.8-2.6 GB/s per step at 8 ranks on
  /// 2 cores; this gives 1.25).
  double oversubscribed_latency = 20e-6;
  double network_bandwidth = 1.25e9, network_latency = 20e-6;  ///< between nodes
  /// Print what was found and any fallback on rank 0 (stderr).
  bool verbose = false;
};

namespace detail {
inline node_layout detect_nodes(MPI_Comm comm, int colour) {
  int rank = 0, size = 1;
  DDL_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  DDL_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm node_comm = MPI_COMM_NULL;
  if (colour >= 0)
    DDL_MPI_CHECK(MPI_Comm_split(comm, colour, rank, &node_comm));
  else
    DDL_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm));
  node_layout L;
  DDL_MPI_CHECK(MPI_Comm_rank(node_comm, &L.local_rank));
  DDL_MPI_CHECK(MPI_Comm_size(node_comm, &L.local_size));
  int leader = rank;  // lowest rank of my node names it
  DDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node_comm));
  MPI_Comm_free(&node_comm);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  DDL_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm));
  std::vector<int> uniq = leaders;
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  L.nodes = static_cast<int>(uniq.size());
  L.node = static_cast<int>(std::lower_bound(uniq.begin(), uniq.end(), leader) - uniq.begin());
  L.node_sizes.assign(uniq.size(), 0);
  for (int l : leaders) ++L.node_sizes[static_cast<std::size_t>(std::lower_bound(uniq.begin(), uniq.end(), l) - uniq.begin())];
  L.uniform = std::all_of(L.node_sizes.begin(), L.node_sizes.end(), [&](int s) { return s == L.node_sizes[0]; });
  return L;
}
}  // namespace detail

/// Ranks renumbered node by node, and the topology they form.
/// Example:
/// \code
///   ddl::mpi_session mpi(argc, argv);
///   ddl::mpi_cluster cluster(MPI_COMM_WORLD);
///   ddl::communicator<ddl::auto_strategy, ddl::mpi_transport> comm(
///       cluster.transport(), ddl::auto_strategy(cluster.topo()));
/// \endcode
class mpi_cluster {
 public:
  /// Collective over `comm`; throws the same `topology_error` on every rank
  /// when `DDL_TOPOLOGY` differs between ranks or does not fit.
  explicit mpi_cluster(MPI_Comm comm, detect_options o = {}) {
    layout_ = detail::detect_nodes(comm, o.node_colour);
    int rank = 0;
    DDL_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    // Node-major numbering: nodes in order, ranks inside a node contiguous.
    int before = 0;
    for (int k = 0; k < layout_.node; ++k) before += layout_.node_sizes[static_cast<std::size_t>(k)];
    MPI_Comm ordered = MPI_COMM_NULL;
    DDL_MPI_CHECK(MPI_Comm_split(comm, 0, before + layout_.local_rank, &ordered));
    transport_ = std::make_unique<mpi_transport>(ordered);
    MPI_Comm_free(&ordered);
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
    if ((o.verbose || raw == "auto") && transport_->rank() == 0)
      std::fprintf(stderr, "ddl: topology: %s -> %s\n", found_.c_str(), topology_.str().c_str());
  }

  /// The transport in node-major rank order.
  mpi_transport& transport() noexcept { return *transport_; }
  const ddl::topology& topo() const noexcept { return topology_; }
  const node_layout& layout() const noexcept { return layout_; }
  /// One line: what detection found and where the costs came from.
  const std::string& report() const noexcept { return found_; }

 private:
  void check_same_everywhere(const std::string& text) {
    const std::uint64_t mine = detail::fnv1a(text);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(transport_->size()));
    DDL_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, transport_->comm()));
    for (std::size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0])
        throw topology_error("DDL_TOPOLOGY differs between ranks (rank " + std::to_string(r) +
                             " has a different value than rank 0); set the same value on every rank");
  }

  // The node level: one step of a collective as every rank of a node runs
  // it at once (`mpi_prober::node_step_cost`: 1 byte for the latency, 1 MiB
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
    DDL_MPI_CHECK(MPI_Bcast(costs.data(), static_cast<int>(costs.size()), MPI_DOUBLE, 0, t.comm()));
    for (std::size_t k = 0; k < partners.size(); ++k) {
      topology_[k].latency = costs[2 * k];
      topology_[k].bandwidth = costs[2 * k + 1];
    }
    found_ += std::string(", link costs probed") + (ppn > 1 ? " (in a node: one step of all its ranks at once)" : "") + log;
  }

  void probe_hierarchy(const detect_options& o) {
    auto& t = *transport_;
    const int ppn = layout_.node_sizes[0], nodes = layout_.nodes;
    const MPI_Comm comm = t.comm();
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
      DDL_MPI_CHECK(MPI_Bcast(&node, 2, MPI_DOUBLE, 0, comm));
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
    for (auto* m : {&bw, &xbw, &lat})
      DDL_MPI_CHECK(MPI_Bcast(m->data(), static_cast<int>(m->size()), MPI_DOUBLE, 0, comm));
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
      MPI_Comm reordered = MPI_COMM_NULL;
      DDL_MPI_CHECK(MPI_Comm_split(comm, 0, pos * ppn + layout_.local_rank, &reordered));
      transport_ = std::make_unique<mpi_transport>(reordered);
      prober_.retarget(*transport_);
      MPI_Comm_free(&reordered);
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
    log += line + detail::mpi_prober::describe(node_unit, pairs.size());
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
      log += line + detail::mpi_prober::describe(rack_unit, pairs.size());
    }
    topology_.check(transport_->size());
    found_ += ", hierarchy probed (DDL_TOPOLOGY=auto):" + log;
  }

  detail::mpi_prober prober_;
  node_layout layout_;
  std::unique_ptr<mpi_transport> transport_;
  ddl::topology topology_;
  std::string found_;
};

}  // namespace ddl
