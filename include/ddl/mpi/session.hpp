#pragma once
/// \file
/// `ddl::mpi_session`: MPI initialised and finalised around a program, and
/// how it ends after a ddl call over MPI failed (`on_failure`).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ddl/core/error.hpp"
#include "ddl/mpi/environment.hpp"

namespace ddl {

/// How `mpi_session` ends MPI once a ddl call over MPI has failed in this
/// process (a timeout naming a stopped or vanished rank, a mismatch, a
/// peer's failure): `abort` (the default) ends the job with `MPI_Abort`,
/// saying why, since `MPI_Finalize` would wait for a rank that hangs or is
/// stopped; `finalize`, for programs that handle failures themselves, calls
/// `MPI_Finalize` as after a clean run, and ends the process (exit code 71,
/// saying why) if that has not returned within `finalize_grace`.
/// `DDL_MPI_ON_FAILURE=abort|finalize` sets it for sessions that do not pass one.
enum class on_failure { abort, finalize };

namespace detail {
inline on_failure on_failure_from_env() {
  const char* v = std::getenv("DDL_MPI_ON_FAILURE");
  if (!v || !*v || std::string(v) == "abort") return on_failure::abort;
  if (std::string(v) == "finalize") return on_failure::finalize;
  throw invalid_argument("DDL_MPI_ON_FAILURE='" + std::string(v) + "' must be abort or finalize");
}
}  // namespace detail

/// Initialises MPI (thread level `MPI_THREAD_SERIALIZED` or better, so a
/// communicator's progress thread may run asynchronous collectives) unless
/// it already is, and finalises it on destruction if it initialised it.
/// Once a ddl call over MPI failed in this process, the end is `MPI_Abort`
/// instead (`on_failure::abort`, the default), so a rank that hangs or is
/// stopped cannot keep the job alive; under `on_failure::finalize` it is
/// `MPI_Finalize`, which never waits longer than `finalize_grace`.
/// Example: `int main(int argc, char** argv) { ddl::mpi_session mpi(argc, argv); ... }`
class mpi_session {
 public:
  mpi_session(int& argc, char**& argv, int required = MPI_THREAD_SERIALIZED,
              on_failure policy = detail::on_failure_from_env())
      : policy_(policy) {
    init(&argc, &argv, required);
  }
  explicit mpi_session(on_failure policy = detail::on_failure_from_env()) : policy_(policy) {
    init(nullptr, nullptr, MPI_THREAD_SERIALIZED);
  }
  /// Without the program's arguments, asking for thread level `required`
  /// (`MPI_THREAD_MULTIPLE` where several transports, each with its own
  /// communicators' progress threads, may call MPI at once).
  explicit mpi_session(int required, on_failure policy = detail::on_failure_from_env()) : policy_(policy) {
    init(nullptr, nullptr, required);
  }
  ~mpi_session() { end(); }
  /// How long `MPI_Finalize` may take after a failed call under
  /// `on_failure::finalize` before the process ends itself.
  static constexpr std::chrono::seconds finalize_grace{30};
  /// Ends MPI now, as the destructor would: after a ddl failure with the
  /// `abort` policy, `MPI_Abort` naming the failure (whether or not this
  /// session initialised MPI); else `MPI_Finalize` if this session
  /// initialised MPI (after a failure, watched: `finalize_grace`).
  void end() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    const std::string why = detail::first_mpi_failure();
    int rank = -1;
    if (!why.empty()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (policy_ == on_failure::abort && !why.empty()) {
      std::fprintf(stderr,
                   "ddl: rank %d: ending the job with MPI_Abort after a failed call (%s); MPI_Finalize could wait for a "
                   "rank that hangs or is stopped (DDL_MPI_ON_FAILURE=finalize keeps the job to the program)\n",
                   rank, why.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 71);
    }
    if (!owner_) return;
    if (why.empty()) {
      MPI_Finalize();
      return;
    }
    // A rank ddl gave up on may never reach MPI_Finalize: a watchdog ends
    // this process if it waits too long (the launcher then ends the job).
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([rank, why, done] {
      std::this_thread::sleep_for(finalize_grace);
      if (done->load()) return;
      std::fprintf(stderr,
                   "ddl: rank %d: MPI_Finalize has waited %lld s after a failed call (%s); ending the process "
                   "(DDL_MPI_ON_FAILURE=finalize)\n",
                   rank, static_cast<long long>(finalize_grace.count()), why.c_str());
      std::fflush(stderr);
      std::_Exit(71);
    }).detach();
    MPI_Finalize();
    done->store(true);
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;

 private:
  void init(int* argc, char*** argv, int required) {
    int done = 0;
    MPI_Initialized(&done);
    if (done) return;
    int provided = 0;
    DDL_MPI_CHECK(MPI_Init_thread(argc, argv, required, &provided));
    owner_ = true;
  }
  bool owner_ = false;
  on_failure policy_ = on_failure::abort;
};

}  // namespace ddl
