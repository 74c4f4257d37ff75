#pragma once
// The "ddl" backend over MPI: for processes an MPI launcher started
// (mpiexec). A group's members find each other's MPI ranks through the
// group's store, so torch's ranks need not be MPI's and any subset of the
// job's ranks can be a group.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <ddl/mpi.hpp>

namespace ddl_torch {

// MPI for the whole process: initialised by the first group, finalised at
// exit. Each group has its own transport, whose communicator's progress
// thread calls MPI while Python goes on, and programs make several groups
// (`new_group(backend="ddl")` beside `init_process_group("ddl")`): so
// MPI_THREAD_MULTIPLE, which lets those threads call MPI at once.
inline ddl::mpi_session& mpi() {
  static ddl::mpi_session session(MPI_THREAD_MULTIPLE);
  return session;
}

// The MPI ranks (of MPI_COMM_WORLD) of a torch group's members, in the
// order of their group ranks: each member writes its own under its group
// rank in the group's store (a PrefixStore of the group's name) and reads
// the others'. Only members create a group, so the group's communicator is
// made with MPI_Comm_create_group, collective over the members alone.
inline std::vector<int> members_of(c10d::Store& store, int rank, int size, int world_rank, int world_size) {
  TORCH_CHECK(size <= world_size, "ddl backend: a group of ", size, " ranks in an MPI job of ", world_size,
              ": ddl runs over MPI, so launch with `mpiexec -n ", size,
              " python ...` (at least as many MPI ranks as the group has)");
  const auto key = [](int r) { return "ddl/mpi_rank/" + std::to_string(r); };
  const std::string mine = std::to_string(world_rank);
  store.set(key(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const std::vector<uint8_t> v = store.get(key(r));
    members[static_cast<std::size_t>(r)] = std::stoi(std::string(v.begin(), v.end()));
  }
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  TORCH_CHECK(twice == sorted.end(), "ddl backend: two ranks of the group are MPI rank ",
              twice == sorted.end() ? -1 : *twice, ": were they started by separate mpiexec runs (or without ",
              "mpiexec)? Launch every rank with one `mpiexec -n ", size, " python ...`");
  return members;
}

// A communicator over `members` (MPI ranks, in group order): MPI_COMM_WORLD
// itself where the group is the world in MPI's order, else a new one
// (the caller frees it).
inline MPI_Comm communicator_of(const std::vector<int>& members, int world_size) {
  bool world = static_cast<int>(members.size()) == world_size;
  for (std::size_t r = 0; world && r < members.size(); ++r) world = members[r] == static_cast<int>(r);
  if (world) return MPI_COMM_WORLD;
  MPI_Group all = MPI_GROUP_NULL, some = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_group(MPI_COMM_WORLD, &all);
  if (rc == MPI_SUCCESS) rc = MPI_Group_incl(all, static_cast<int>(members.size()), members.data(), &some);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(MPI_COMM_WORLD, some, /*tag=*/0x64646c, &comm);
  if (some != MPI_GROUP_NULL) MPI_Group_free(&some);
  if (all != MPI_GROUP_NULL) MPI_Group_free(&all);
  TORCH_CHECK(rc == MPI_SUCCESS && comm != MPI_COMM_NULL, "ddl backend: MPI could not make the group's communicator (",
              "MPI_Comm_create_group over ", members.size(), " ranks, error ", rc, ")");
  return comm;
}

// The transport of a group of `size` members, this one torch's rank `rank`,
// over MPI. Work completes on the group's progress thread (torch waits on
// futures without our `wait`), which the transport allows at
// MPI_THREAD_MULTIPLE, or at SERIALIZED while it is the process's only
// mpi_transport.
inline std::unique_ptr<ddl::mpi_transport> mpi_group(c10d::Store& store, int rank, int size) {
  mpi();
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm comm = communicator_of(members_of(store, rank, size, world_rank, world_size), world_size);
  std::unique_ptr<ddl::mpi_transport> transport;
  try {
    transport = std::make_unique<ddl::mpi_transport>(comm);  // its own duplicates of `comm`
  } catch (...) {
    if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    throw;
  }
  if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
  if (!transport->allows_progress_thread()) {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    TORCH_CHECK(false, "ddl backend: this group's work could not complete in the background: MPI was initialised ",
                "with thread level ", level, " before the first ddl group (by another library?), and ddl needs ",
                "MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE, "), or SERIALIZED (", MPI_THREAD_SERIALIZED,
                ") with one ddl group and no other ddl transport in the process");
  }
  return transport;
}

}  // namespace ddl_torch
