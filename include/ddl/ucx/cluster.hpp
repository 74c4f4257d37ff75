#pragma once
/// \file
/// Topology detection over UCX: `ddl::ucx_cluster` takes the ranks of one
/// host name as one node (or those that pass one colour, for tests and
/// emulated clusters), numbers the ranks node by node (a second rendezvous
/// through the same store when the launcher's order was not), and builds the
/// topology as `topology/detect.hpp` says: `DDL_TOPOLOGY`, `DDL_TOPOLOGY=auto`
/// (racks probed over UCX's own wires), `DDL_PROBE=1`, or defaults. Hosts
/// must have distinct host names (as `bench/cluster`'s namespaces do).
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddl/rendezvous/bootstrap.hpp"
#include "ddl/rendezvous/store.hpp"
#include "ddl/topology/detect.hpp"
#include "ddl/ucx/transport.hpp"

namespace ddl {

/// Ranks of a UCX group numbered node by node, and the topology they form.
/// Example:
/// \code
///   ddl::ucx_cluster cluster;  // RANK, WORLD_SIZE and DDL_RENDEZVOUS from the launcher
///   ddl::communicator<ddl::auto_strategy, ddl::ucx_transport> comm(
///       cluster.transport(), ddl::auto_strategy(cluster.topo()));
/// \endcode
class ucx_cluster : public basic_cluster<ucx_transport> {
 public:
  /// Rank `rank` of `size`, meeting the others through `store` (as
  /// `ucx_transport`'s constructor, each rendezvous waiting at most `wait`).
  /// Collective; throws the same `topology_error` on every rank when
  /// `DDL_TOPOLOGY` differs between ranks or does not fit.
  template <class Store>
  ucx_cluster(Store&& store, int rank, int size, detect_options o = {},
              std::chrono::duration<double> wait = rendezvous_timeout()) {
    auto t = std::make_unique<ucx_transport>(store, rank, size, wait);
    std::vector<std::string> keys(static_cast<std::size_t>(size));
    if (o.node_colour >= 0) {
      const std::vector<std::byte> all = detail::prober<ucx_transport>(t.get()).share(&o.node_colour, sizeof(int));
      for (std::size_t q = 0; q < keys.size(); ++q) {
        int c = 0;
        std::memcpy(&c, all.data() + q * sizeof c, sizeof c);
        keys[q] = std::to_string(c);
      }
    } else {
      for (int q = 0; q < size; ++q) keys[static_cast<std::size_t>(q)] = t->host_of(q);
    }
    // Every rank sees every key, so each knows whether any rank moves.
    const bool moved = !detail::node_major_already(keys);
    node_layout layout = detail::layout_of(keys, rank);
    auto renumber = [&store, size, wait](int r) { return std::make_unique<ucx_transport>(store, r, size, wait); };
    if (moved) t = renumber(detail::node_major_rank(layout));
    detect(std::move(t), std::move(layout), o, renumber);
  }
  /// Rank and size from the launcher's variables (`launch_from_env`), the
  /// store from `DDL_RENDEZVOUS=file:///path`.
  explicit ucx_cluster(detect_options o = {}) : ucx_cluster(launch_from_env(), o) {}
  ucx_cluster(const launch_info& who, detect_options o) : ucx_cluster(file_store(rendezvous_dir_from_env()), who.rank, who.size, o) {}
};

}  // namespace ddl
