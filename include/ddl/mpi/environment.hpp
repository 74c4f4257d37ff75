#pragma once
/// \file
/// What the MPI library and the machine tell an `mpi_transport`: MPI's
/// errors as `transport_error`s (`DDL_MPI_CHECK`), its eager limits read
/// through the MPI tool interface, whether an RDMA device is there, the
/// tag space, the cores the ranks may use, and the process's record of
/// failed calls that `mpi_session` ends MPI by.
#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <cstdint>
#include <cstring>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <thread>
#include <vector>

#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/shm/process.hpp"
#include "ddl/shm/shared_stages.hpp"
#include "ddl/transport/stage_access.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"


/// Throws `ddl::transport_error` with the MPI error string if `call` fails.
#define DDL_MPI_CHECK(call)                                                              \
  do {                                                                                   \
    const int ddl_mpi_rc_ = (call);                                                      \
    if (ddl_mpi_rc_ != MPI_SUCCESS) ::ddl::detail::throw_mpi_error(ddl_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)

namespace ddl {
namespace detail {
[[noreturn]] inline void throw_mpi_error(int rc, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw transport_error(std::string(call) + " failed with MPI error " + std::to_string(rc) + " (" +
                        std::string(text, static_cast<std::size_t>(len)) + ") at " + file + ":" + std::to_string(line));
}

/// A send that could not be withdrawn after an error (the peer never took
/// it and this MPI cannot cancel sends): MPI would go on reading the
/// caller's buffer after the call returned, and a rank that frees it and
/// goes on crashes later (or sends garbage). Unless `DDL_MPI_STRANDED=release`
/// (hand the request to MPI and hope the buffer outlives it), the job ends
/// here with `MPI_Abort`, saying why.
inline std::string first_mpi_failure();
inline void stranded_send(int rank, int peer) noexcept {
  const char* v = std::getenv("DDL_MPI_STRANDED");
  if (v && std::string(v) == "release") return;
  std::string why;
  try {
    why = first_mpi_failure();
  } catch (...) {
  }
  std::fprintf(stderr,
               "ddl: rank %d: a send to peer %d of its communicator could not be withdrawn after the call failed%s%s%s (the "
               "peer never received it and MPI cannot cancel sends); MPI would keep reading the caller's buffer, so the "
               "job ends now (MPI_Abort; DDL_MPI_STRANDED=release hands the send to MPI instead)\n",
               rank, peer, why.empty() ? "" : " (", why.c_str(), why.empty() ? "" : ")");
  std::fflush(stderr);
  // Give the launcher a moment to forward the text: MPICH's ends every
  // process at the first MPI_Abort and may drop what is still in its pipes
  // (seen once in 40+ runs of mpi.roots.n4 under load: an empty output).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, 70);
}

/// A size-valued control variable of this MPI (through the MPI tool
/// interface), e.g. Open MPI's `btl_vader_eager_limit`; 0 where the MPI has
/// no variable of that name.
inline std::size_t mpi_size_cvar(const char* cvar) noexcept {
  // Asks for the level MPI runs at: Open MPI 4.1 records what MPI_T was
  // asked for as the process's thread level (MPI_Query_thread).
  int level = MPI_THREAD_SINGLE, provided = 0;
  MPI_Query_thread(&level);
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return 0;
  unsigned long long value = 0;
  int index = -1;
  if (MPI_T_cvar_get_index(cvar, &index) == MPI_SUCCESS) {
    char name[128], desc[512];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype;
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) ==
            MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      alignas(8) unsigned char buf[64] = {};
      if (count == 1 && MPI_T_cvar_read(handle, buf) == MPI_SUCCESS) {
        if (type == MPI_UNSIGNED_LONG_LONG) value = *reinterpret_cast<unsigned long long*>(buf);
        else if (type == MPI_UNSIGNED_LONG) value = *reinterpret_cast<unsigned long*>(buf);
        else if (type == MPI_UNSIGNED) value = *reinterpret_cast<unsigned*>(buf);
        else if (type == MPI_INT) value = static_cast<unsigned long long>(std::max(0, *reinterpret_cast<int*>(buf)));
      }
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return static_cast<std::size_t>(value);
}

/// The largest message (bytes, header included) this MPI sends between ranks
/// of one node without a handshake: Open MPI's shared-memory BTL
/// (`btl_vader_eager_limit`, 4096 by default). 0 where the MPI has no such
/// variable (MPICH: its messages up to 16 KiB already went eagerly in our
/// measurements).
inline std::size_t mpi_node_eager_limit() noexcept { return mpi_size_cvar("btl_vader_eager_limit"); }

/// Whether this machine has an RDMA device (InfiniBand, RoCE, iWARP: an
/// entry in `/sys/class/infiniband`). Without one, an MPI reaches other
/// machines over TCP sockets.
inline bool has_rdma_device() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

/// The largest message (bytes, header included) this MPI sends to another
/// machine without a handshake where that goes over TCP: Open MPI's TCP
/// BTL (`btl_tcp_eager_limit`, 64 KiB by default) on a machine without an
/// RDMA device (with one, Open MPI takes UCX or openib). 0 elsewhere.
inline std::size_t mpi_network_eager_limit() {
#ifdef OPEN_MPI
  if (!has_rdma_device()) return mpi_size_cvar("btl_tcp_eager_limit");
#endif
  return 0;
}

/// The first failure of any ddl communicator over MPI in this process (a
/// timeout, a peer's notice, a mismatch, an MPI error), for `mpi_session`'s
/// end: "" while none happened.
struct mpi_failure_record {
  std::mutex m;
  std::string first;
};
inline mpi_failure_record& mpi_failures() {
  static mpi_failure_record r;
  return r;
}
inline void note_mpi_failure(const std::string& why) {
  auto& r = mpi_failures();
  std::lock_guard<std::mutex> lock(r.m);
  if (r.first.empty()) r.first = why.empty() ? "a ddl call over MPI failed" : why;
}
inline std::string first_mpi_failure() {
  auto& r = mpi_failures();
  std::lock_guard<std::mutex> lock(r.m);
  return r.first;
}

/// How many `mpi_transport`s this process holds now (`allows_progress_thread`).
inline std::atomic<int>& mpi_transports_alive() {
  static std::atomic<int> n{0};
  return n;
}

/// `MPI_TAG_UB` for `comm`, the same on every rank (collective): the
/// communicator's attribute, else `MPI_COMM_WORLD`'s (the standard sets it
/// there, and its value holds for every communicator; Open MPI gives none
/// on a communicator made by `MPI_Comm_split`), else 32767 (the least the
/// standard allows); lowered to `DDL_MPI_TAG_UB` where that is set (a test
/// of the small tag space some MPIs have). The ranks' smallest value, so
/// every rank lays its tags out alike.
inline int tag_upper_bound(MPI_Comm comm) {
  void* attr = nullptr;
  int flag = 0;
  DDL_MPI_CHECK(MPI_Comm_get_attr(comm, MPI_TAG_UB, &attr, &flag));
  if (!flag) DDL_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag));
  int ub = flag ? *static_cast<int*>(attr) : 32767;
  if (const char* v = std::getenv("DDL_MPI_TAG_UB"); v && *v) {
    char* end = nullptr;
    errno = 0;
    const long x = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < 32767 || x > INT_MAX)
      throw invalid_argument("DDL_MPI_TAG_UB='" + std::string(v) + "' must be a whole number in 32767..2147483647");
    ub = std::min(ub, static_cast<int>(x));
  }
  DDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ub, 1, MPI_INT, MPI_MIN, comm));
  return ub;
}

/// Says once per process that the call stamps do not fit in this MPI's tags
/// and how calls are checked instead.
inline void say_stamps_left_out(int tag_ub) {
  static std::once_flag once;
  std::call_once(once, [tag_ub] {
    std::fprintf(stderr,
                 "ddl: mpi_transport: MPI_TAG_UB is %d, below the 2^25 - 1 that call stamps need; every collective is "
                 "checked by a round of small messages before it runs instead (as DDL_CHECK=1)\n",
                 tag_ub);
    std::fflush(stderr);
  });
}

/// How many cores the ranks of `comm` may run on: the CPUs of the union of
/// their affinity masks (a launcher may bind each rank to one core; nodes
/// are taken to number their cores alike), else the machine's count.
inline int usable_cores(MPI_Comm comm) {
  constexpr int words = 16;  // CPUs 0-1023
  std::uint64_t mask[words] = {};
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < words * 64 && c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) mask[c / 64] |= std::uint64_t{1} << (c % 64);
  DDL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mask, words, MPI_UINT64_T, MPI_BOR, comm));
  int cores = 0;
  for (std::uint64_t w : mask) cores += __builtin_popcountll(w);
  return cores > 0 ? cores : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}
}  // namespace detail
}  // namespace ddl
