#pragma once
/// \file
/// Topology detection over MPI: `ddl::mpi_cluster` finds the ranks of each
/// node with `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` (or a colour given
/// for tests and emulated clusters), numbers the ranks node by node in a
/// communicator of its own, and builds the topology as `topology/detect.hpp`
/// says (`DDL_TOPOLOGY`, `DDL_TOPOLOGY=auto`, `DDL_PROBE=1`, defaults).
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "ddl/mpi/transport.hpp"
#include "ddl/topology/detect.hpp"

namespace ddl {

namespace detail {
/// Each rank's node key: the lowest rank of its node in `comm` (the ranks
/// that share memory with it, or that passed the same `colour` >= 0).
inline std::vector<std::string> mpi_node_keys(MPI_Comm comm, int colour) {
  int rank = 0, size = 1;
  DDL_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  DDL_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm node_comm = MPI_COMM_NULL;
  if (colour >= 0)
    DDL_MPI_CHECK(MPI_Comm_split(comm, colour, rank, &node_comm));
  else
    DDL_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm));
  int leader = rank;
  DDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node_comm));
  MPI_Comm_free(&node_comm);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  DDL_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm));
  std::vector<std::string> keys;
  for (int l : leaders) keys.push_back(std::to_string(l));
  return keys;
}

/// An `mpi_transport` over `comm` with this rank numbered `rank` (collective).
inline std::unique_ptr<mpi_transport> mpi_renumbered(MPI_Comm comm, int rank) {
  MPI_Comm ordered = MPI_COMM_NULL;
  DDL_MPI_CHECK(MPI_Comm_split(comm, 0, rank, &ordered));
  auto t = std::make_unique<mpi_transport>(ordered);
  MPI_Comm_free(&ordered);
  return t;
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
class mpi_cluster : public basic_cluster<mpi_transport> {
 public:
  /// Collective over `comm`; throws the same `topology_error` on every rank
  /// when `DDL_TOPOLOGY` differs between ranks or does not fit.
  explicit mpi_cluster(MPI_Comm comm, detect_options o = {}) {
    int rank = 0;
    DDL_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    node_layout layout = detail::layout_of(detail::mpi_node_keys(comm, o.node_colour), rank);
    auto t = detail::mpi_renumbered(comm, detail::node_major_rank(layout));
    detect(std::move(t), std::move(layout), o, [this](int r) { return detail::mpi_renumbered(transport().comm(), r); });
  }
};

}  // namespace ddl
