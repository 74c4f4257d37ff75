#pragma once
/// \file
/// A job without an MPI launcher: which rank this process is, how many there
/// are, where they meet (`launch_from_env`, `DDL_RENDEZVOUS`), and the one
/// round through a store in which every rank publishes a record and reads
/// everyone's (`exchange_records`), with the errors a user can act on: a
/// rank that never came (named, at the deadline), ranks that disagree on the
/// world size, two processes claiming one rank.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/rendezvous/store.hpp"

namespace ddl {

/// This process's place in its job, and which variables said so.
struct launch_info {
  int rank = 0, size = 1;
  std::string from;  // e.g. "RANK/WORLD_SIZE"
};

namespace detail {
inline std::optional<long> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1L << 20))
    throw invalid_argument(std::string(name) + "='" + v + "' is not a rank number or a count of ranks");
  return x;
}
}  // namespace detail

/// Rank and size from the variables launchers set, the first pair found of
/// `RANK`/`WORLD_SIZE` (torchrun, ddl-run), `OMPI_COMM_WORLD_RANK`/`_SIZE`
/// (Open MPI), `PMI_RANK`/`PMI_SIZE` (MPICH's Hydra, Intel MPI),
/// `SLURM_PROCID`/`SLURM_NTASKS` (srun). A pair with one half missing, a
/// rank not below the size, or no pair at all is an `invalid_argument`
/// naming the variables.
inline launch_info launch_from_env() {
  static const char* pairs[][2] = {{"RANK", "WORLD_SIZE"},
                                   {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"},
                                   {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& p : pairs) {
    const auto r = detail::env_number(p[0]), n = detail::env_number(p[1]);
    if (!r && !n) continue;
    const std::string names = std::string(p[0]) + "/" + p[1];
    if (!r || !n)
      throw invalid_argument(names + ": " + (r ? p[1] : p[0]) + " is not set while " + (r ? p[0] : p[1]) + " is");
    if (*n < 1 || *r >= *n)
      throw invalid_argument(names + ": rank " + std::to_string(*r) + " of " + std::to_string(*n) +
                             " ranks (a rank must be below the size)");
    return {static_cast<int>(*r), static_cast<int>(*n), names};
  }
  throw invalid_argument(
      "no rank and world size in the environment: set RANK and WORLD_SIZE (torchrun and ddl-run do), or start under "
      "mpiexec (OMPI_COMM_WORLD_*, PMI_*) or srun (SLURM_PROCID/SLURM_NTASKS)");
}

/// The rendezvous directory named by `DDL_RENDEZVOUS=file:///path` (the only
/// scheme a process finds on its own; an MPI job passes an `mpi_store`, the
/// torch backend torch's store). Missing or of another scheme: `invalid_argument`.
inline std::string rendezvous_dir_from_env() {
  const char* v = std::getenv("DDL_RENDEZVOUS");
  if (!v || !*v)
    throw invalid_argument(
        "DDL_RENDEZVOUS is not set: name a directory every rank sees, DDL_RENDEZVOUS=file:///path (ddl-run sets one)");
  const std::string s(v);
  if (s.rfind("file://", 0) != 0 || s.size() <= 7)
    throw invalid_argument("DDL_RENDEZVOUS='" + s + "': expected file:///path (a directory every rank sees)");
  return s.substr(7);
}

/// How long a rendezvous waits for the last rank: `DDL_TIMEOUT` (seconds) where
/// set, else 300 s, as a collective's wait.
inline std::chrono::duration<double> rendezvous_timeout() {
  if (const char* t = std::getenv("DDL_TIMEOUT")) return std::chrono::duration<double>(detail::parse_positive("DDL_TIMEOUT", t));
  return std::chrono::seconds(300);
}

/// Publishes `mine` as rank `rank` of `size` in `store` (under `prefix`) and
/// returns every rank's record, in rank order. Errors, each on the rank that
/// sees it: a second process claiming `rank` (`invalid_argument`, on that
/// process and on every rank that reads records after it came), a rank whose
/// record says another world size (`invalid_argument` naming both), ranks
/// that published nothing by `until` (`timeout_error` naming them all).
template <class Store>
std::vector<std::string> exchange_records(Store& store, const std::string& prefix, int rank, int size,
                                          const std::string& mine, deadline until) {
  if (size < 1 || rank < 0 || rank >= size)
    throw invalid_argument("rendezvous: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                           " ranks (a rank must be below the size)");
  const auto start = std::chrono::steady_clock::now();
  const std::string me = std::to_string(rank);
  if (const auto claims = store.add(prefix + "claim." + me, 1); claims > 1)
    throw invalid_argument("rendezvous: two processes claim rank " + me + " (this one came " +
                           std::to_string(claims) + "th): check RANK, or that DDL_RENDEZVOUS is new to this job");
  store.set(prefix + "rank." + me, std::to_string(size) + "\n" + mine);
  std::vector<std::string> records(static_cast<std::size_t>(size));
  std::vector<int> missing;
  for (int q = 0; q < size; ++q) {
    auto got = store.get(prefix + "rank." + std::to_string(q), missing.empty() ? until : deadline{});
    if (!got) {
      missing.push_back(q);
      continue;
    }
    const auto nl = got->find('\n');
    const std::string theirs = got->substr(0, nl);
    if (nl == std::string::npos || theirs != std::to_string(size))
      throw invalid_argument("rendezvous: ranks disagree on the world size: rank " + std::to_string(q) + " says " +
                             theirs + " ranks, rank " + me + " says " + std::to_string(size));
    records[static_cast<std::size_t>(q)] = got->substr(nl + 1);
  }
  if (!missing.empty()) {
    std::string list;
    for (int q : missing) list += (list.empty() ? "" : ", ") + std::to_string(q);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    throw timeout_error(missing.front(), "rendezvous", "", waited, missing,
                        "rank(s) " + list + " of " + std::to_string(size) + " never joined the rendezvous");
  }
  for (int q = 0; q < size; ++q)
    if (store.add(prefix + "claim." + std::to_string(q), 0) > 1)
      throw invalid_argument("rendezvous: two processes claim rank " + std::to_string(q) +
                             ": check RANK, or that DDL_RENDEZVOUS is new to this job");
  return records;
}

}  // namespace ddl
