#pragma once
/// \file
/// What the ranks of an `mpi_transport` learn of each other at construction,
/// each a collective round over its communicator: which ranks share a node
/// and the eager payload between them, the piece size for peers on other
/// machines, every rank's process (so a wait can tell a peer exited), and
/// which ranks open each other's stage files.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ddl/mpi/transport.hpp"

namespace ddl {

// Which ranks share this rank's node, and the eager payload between them
// (see `eager_bytes`). Collective over comm_.
inline void mpi_transport::find_eager_peers() {
  on_node_.assign(static_cast<std::size_t>(size_), 0);
  MPI_Comm node = MPI_COMM_NULL;
  DDL_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPI_Group all = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
  MPI_Comm_group(comm_, &all);
  MPI_Comm_group(node, &mine);
  int n = 0;
  MPI_Group_size(mine, &n);
  std::vector<int> local(static_cast<std::size_t>(n)), global(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) local[static_cast<std::size_t>(i)] = i;
  MPI_Group_translate_ranks(mine, n, local.data(), all, global.data());
  for (int g : global)
    if (g >= 0 && g < size_) on_node_[static_cast<std::size_t>(g)] = 1;
  MPI_Group_free(&mine);
  MPI_Group_free(&all);
  MPI_Comm_free(&node);
  if (const char* v = std::getenv("DDL_MPI_EAGER_BYTES")) {
    eager_ = detail::parse_bytes("DDL_MPI_EAGER_BYTES", v);
    eager_everywhere_ = true;
    return;
  }
  eager_ = payload_under(detail::mpi_node_eager_limit());
}

// `piece_bytes`: where any rank sets DDL_MPI_PIECE_BYTES, the largest
// value set, for every peer; else the largest TCP eager payload any rank
// found (for peers on other machines). Collective. A bad value is an
// `invalid_argument` on every rank (after the round, so none waits in it).
inline void mpi_transport::find_pieces() {
  // found, set (the variable's value), the variable is set, unreadable
  unsigned long long mine[4] = {0, 0, 0, 0};
  std::string bad;
  if (const char* v = std::getenv("DDL_MPI_PIECE_BYTES")) {
    try {
      mine[1] = detail::parse_bytes("DDL_MPI_PIECE_BYTES", v);
    } catch (const std::exception& e) {
      bad = e.what();
      mine[3] = 1;
    }
    mine[2] = 1;
  } else if (std::find(on_node_.begin(), on_node_.end(), 0) != on_node_.end()) {
    mine[0] = payload_under(detail::mpi_network_eager_limit());
  }
  unsigned long long agreed[4] = {0, 0, 0, 0};
  DDL_MPI_CHECK(MPI_Allreduce(mine, agreed, 4, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm_));
  if (agreed[3])
    throw invalid_argument(!bad.empty() ? bad : "mpi_transport: another rank's DDL_MPI_PIECE_BYTES is not a size");
  piece_everywhere_ = agreed[2] != 0;
  piece_ = static_cast<std::size_t>(piece_everywhere_ ? agreed[1] : agreed[0]);
}

// The payload of a message of `limit` bytes with Open MPI's headers
// (match and fragment, rounded up), whole 64-byte lines; 0 if too small.
inline std::size_t mpi_transport::payload_under(std::size_t limit) noexcept {
  constexpr std::size_t header = 128;
  return limit > 2 * header ? (limit - header) / 64 * 64 : 0;
}

// Every rank's process (`shm/process.hpp`), so a wait on a peer of this
// machine can tell that it exited. Collective over comm_. A peer whose
// process cannot be looked at from here (another machine or container, a
// /proc that hides it) is not watched.
inline void mpi_transport::find_processes() {
  const detail::process_id me = detail::this_process();
  procs_.assign(static_cast<std::size_t>(size_), detail::process_id{});
  DDL_MPI_CHECK(MPI_Allgather(&me, sizeof me, MPI_BYTE, procs_.data(), sizeof me, MPI_BYTE, comm_));
  machine_ = me.machine;
  for (auto& p : procs_)
    if (p.machine == machine_ && detail::state_of(p, machine_) == detail::process_state::gone) p.machine = 0;
}

// Every rank's stage file, and which ranks open each other's (see
// `stages_shared`, `stages_shared_among`): only ranks MPI puts on one
// node (MPI_COMM_TYPE_SHARED), so ranks MPI keeps apart, as the emulated
// hosts of bench/cluster (network namespaces of one machine, a hostname
// each), stay apart. `DDL_MPI_SHM_RANKS=K` shares only inside blocks of K
// consecutive ranks, as if each block were a machine (tests, experiments).
// Collective over comm_: two Allgathers, a file each and a bit per pair.
inline void mpi_transport::find_stages() {
  const char* env = std::getenv("DDL_MPI_SHM");
  const bool wanted = !(env && std::strcmp(env, "0") == 0) && machine_ != 0;
  const char* cma = std::getenv("DDL_MPI_CMA");
  const bool reads = !(cma && std::strcmp(cma, "0") == 0);
  const char* per = std::getenv("DDL_MPI_SHM_RANKS");
  char* end = nullptr;
  const long block = per && *per ? std::strtol(per, &end, 10) : 0;
  int bad = per && *per && (block < 1 || *end != '\0');
  DDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm_));  // every rank refuses alike
  if (bad)
    throw invalid_argument(std::string("DDL_MPI_SHM_RANKS='") + (per ? per : "") +
                           "' on some rank: not a positive number of ranks");
  const detail::shared_stages::file mine = wanted ? stages_.create() : detail::shared_stages::file{};
  std::vector<detail::shared_stages::file> all(static_cast<std::size_t>(size_));
  DDL_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm_));
  if (wanted && mine.fd >= 0)
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && on_node_[static_cast<std::size_t>(p)] &&
          procs_[static_cast<std::size_t>(p)].machine == machine_ && (block < 1 || p / block == rank_ / block))
        stages_.open_peer(p, procs_[static_cast<std::size_t>(p)].pid, all[static_cast<std::size_t>(p)], size_, reads);
  const std::vector<std::uint64_t> row = stages_.row(rank_, size_);
  const int words = static_cast<int>(row.size());
  std::vector<std::uint64_t> rows(row.size() * static_cast<std::size_t>(size_));
  DDL_MPI_CHECK(MPI_Allgather(row.data(), words, MPI_UINT64_T, rows.data(), words, MPI_UINT64_T, comm_));
  stages_.agree(std::move(rows), rank_, size_);
}

}  // namespace ddl
