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
///   - else two levels, ranks per node (shared memory) x nodes (network),
///     with default link costs, or measured ones with `probe` / `DDL_PROBE=1`;
///   - else, when nodes hold different rank counts, one flat level (with a
///     warning): the multi-ring needs a box, the ring and doubling do not.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../transport/mpi.hpp"
#include "topology.hpp"

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
  /// Link costs assumed without a probe or `DDL_TOPOLOGY`.
  double node_bandwidth = 5e9, node_latency = 2e-6;        ///< inside a node (shared memory)
  double network_bandwidth = 1.25e9, network_latency = 20e-6;  ///< between nodes
  /// Print what was found and any fallback on rank 0 (stderr).
  bool verbose = false;
};

namespace detail {
inline std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

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
    const int n = transport_->size();

    const char* env = std::getenv("DDL_TOPOLOGY");
    const std::string text = (env && std::string(env) != "auto") ? env : "";
    check_same_everywhere(text);
    if (!text.empty()) {
      topology_ = topology::parse(text);
      topology_.check(n);
      found_ = "DDL_TOPOLOGY=" + text;
    } else if (layout_.uniform) {
      const int ppn = layout_.node_sizes[0];
      if (ppn > 1 || layout_.nodes == 1) topology_.add(level{ppn, o.node_bandwidth, o.node_latency, 0});
      if (layout_.nodes > 1) topology_.add(level{layout_.nodes, o.network_bandwidth, o.network_latency, 0});
      found_ = std::to_string(layout_.nodes) + " node(s) x " + std::to_string(ppn) + " rank(s)";
      const char* p = std::getenv("DDL_PROBE");
      if (o.probe || (p && std::string(p) == "1")) probe();
    } else {
      std::string sizes;
      for (int s : layout_.node_sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(s);
      topology_ = topology::uniform(n, o.network_bandwidth, o.network_latency);
      found_ = "nodes hold different rank counts (" + sizes + "): one flat level of " + std::to_string(n) +
               " ranks; multi-ring boxes across nodes are not used";
      if (transport_->rank() == 0) std::fprintf(stderr, "ddl: warning: %s\n", found_.c_str());
    }
    if (o.verbose && transport_->rank() == 0)
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

  // Ping-pong between rank 0 and a partner at each level: latency from 1-byte
  // round trips, bandwidth from 4 MiB ones. Every wait has a deadline.
  void probe() {
    auto& t = *transport_;
    const int ppn = layout_.node_sizes[0];
    std::vector<int> partners;
    if (ppn > 1) partners.push_back(1);
    if (layout_.nodes > 1) partners.push_back(ppn);
    std::vector<double> costs(2 * partners.size(), 0.0);
    const std::size_t big = 4u << 20;
    std::unique_ptr<std::byte[]> buf(new std::byte[big]());
    const auto limit = std::chrono::seconds(60);
    for (std::size_t k = 0; k < partners.size(); ++k) {
      const int peer = partners[k];
      if (t.rank() != 0 && t.rank() != peer) continue;
      const int other = t.rank() == 0 ? peer : 0;
      auto pingpong = [&](std::size_t bytes, int reps) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) {
          if (t.rank() == 0) {
            auto s = t.isend(other, {buf.get(), bytes}, 7);
            t.wait(s, std::chrono::steady_clock::now() + limit);
            auto r = t.irecv(other, {buf.get(), bytes}, 7);
            t.wait(r, std::chrono::steady_clock::now() + limit);
          } else {
            auto r = t.irecv(other, {buf.get(), bytes}, 7);
            t.wait(r, std::chrono::steady_clock::now() + limit);
            auto s = t.isend(other, {buf.get(), bytes}, 7);
            t.wait(s, std::chrono::steady_clock::now() + limit);
          }
        }
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
      };
      pingpong(1, 5);
      const double rtt = pingpong(1, 50);
      pingpong(big, 1);
      const double rtt_big = pingpong(big, 4);
      costs[2 * k] = rtt / 2;
      costs[2 * k + 1] = 2.0 * big / std::max(rtt_big - rtt, 1e-9);
    }
    DDL_MPI_CHECK(MPI_Bcast(costs.data(), static_cast<int>(costs.size()), MPI_DOUBLE, 0, t.comm()));
    std::size_t lv = 0;
    for (std::size_t k = 0; k < partners.size(); ++k, ++lv) {
      topology_[lv].latency = costs[2 * k];
      topology_[lv].bandwidth = costs[2 * k + 1];
    }
    found_ += ", link costs probed";
  }

  node_layout layout_;
  std::unique_ptr<mpi_transport> transport_;
  ddl::topology topology_;
  std::string found_;
};

}  // namespace ddl
