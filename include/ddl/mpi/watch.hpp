#pragma once
/// \file
/// How an `mpi_transport` wait looks around while its request is open
/// (every 16th poll): a peer's notice that it gave up, an awaited peer of
/// this machine whose process exited or stopped, the peer's message of this
/// call under another stamp (a mismatch); and a timeout reported to every
/// peer, so the survivors name the silent ranks alike.
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

// This rank timed out: tells every peer, listens `grace` for theirs, and
// returns the ranks that reported none since `grace` before its own.
inline std::vector<int> mpi_transport::report_timeout(double grace) {
  const double at = detail::steady_seconds();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    notice_sends_.emplace_back(MPI_REQUEST_NULL);
    DDL_MPI_CHECK(MPI_Isend(nullptr, 0, MPI_CHAR, p, timeout_tag, notices_, &notice_sends_.back()));
  }
  while (detail::steady_seconds() < at + grace) {
    broken();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  broken();
  return detail::silent_ranks([&](int q) { return reported_[static_cast<std::size_t>(q)]; }, size_, rank_, at,
                              grace);
}

// While `req` waits (every 16th poll): a peer that gave up ends the wait
// (throws); so does an awaited peer on this machine whose process has
// exited (`check_alive`); the peer's message of this call under another
// stamp is a mismatch (`check_stamp`).
template <class Ready>
void mpi_transport::look_around(request& req, Ready&& ready) {
  if (broken()) {
    taint(broken_);
    const int peer = req.peer_;
    req.release();
    throw transport_error("mpi_transport: rank " + std::to_string(rank_) + " stopped waiting for rank " +
                          std::to_string(peer) + ": " + broken_);
  }
  check_alive(req, ready);
  check_stamp(req, ready);
}

// After a timeout: which of the awaited peer and the silent ranks are
// stopped processes on this machine (SIGSTOP, a debugger), said as a note.
inline std::string mpi_transport::stopped_ranks(int peer, const std::vector<int>& silent) const {
  std::vector<int> look(silent);
  if (std::find(look.begin(), look.end(), peer) == look.end()) look.insert(look.begin(), peer);
  std::string note;
  for (int q : look) {
    const auto i = static_cast<std::size_t>(q);
    if (i >= procs_.size() || detail::state_of(procs_[i], machine_) != detail::process_state::stopped) continue;
    note += (note.empty() ? "" : "; ") + process_of(q) + " is stopped (by a signal such as SIGSTOP, or a debugger)";
  }
  return note;
}

// Every 0.1 s of a wait on a peer of this machine: has its process exited?
// Seen gone twice 0.1 s apart with the request still open (a message it
// sent before exiting has had time to arrive), the wait ends with
// `transport_error` naming it; the communicator then gives the group up,
// so ranks of other machines learn it from this one. Only the awaited
// peer counts: another rank may have finished its calls and left.
template <class Ready>
void mpi_transport::check_alive(request& req, Ready&& ready) {
  const auto peer = static_cast<std::size_t>(req.peer_);
  if (peer >= procs_.size() || procs_[peer].machine != machine_ || machine_ == 0) return;
  const double now = detail::steady_seconds();
  if (now < next_look_) return;
  next_look_ = now + 0.1;
  const bool gone = detail::state_of(procs_[peer], machine_) == detail::process_state::gone;
  if (!gone || gone_peer_ != req.peer_) {  // the first look that finds it gone waits for a second
    gone_peer_ = gone ? req.peer_ : -1;
    return;
  }
  // Seen gone on two looks at least 0.1 s apart (`next_look_`); a wait on
  // its stage asks once more (it may have raised its counter, then left).
  if constexpr (!std::is_null_pointer_v<std::decay_t<Ready>>)
    if (ready()) return;
  const std::string why = process_of(req.peer_) + " has exited";
  const char* doing = !req.active() ? "see its stage" : req.send_ ? "send to it" : "receive from it";
  taint(why);
  req.release();
  throw transport_error("mpi_transport: rank " + std::to_string(rank_) + ": " + why + " while this rank waited to " +
                        doing);
}

// While a receive or a send waits: is the peer's oldest unmatched message
// one of this call under another stamp (`transport/stamp.hpp`)? Then the
// ranks called different collectives; waiting cannot help. A send waits
// so when the peer receives nothing from this rank in its call (a
// broadcast whose ranks name different roots, each sending down its own
// tree). (A peer in the same-numbered call of another communicator
// sharing this transport has finished this one: MPI matches a source's
// messages in order, so a receive found this call's message first, and a
// send was taken, which the test after the probe sees. Any other rank's
// message could be such a newer call while the awaited peer is late.)
//
// A wait on a peer's stage (`wait_until`, `ready` given) found such a
// message: the peer may have raised its counter and moved on to the
// same-numbered call of another communicator sharing this transport
// before sending it (the counter is raised first), so `ready` is asked
// again before this is called a mismatch.
template <class Ready>
void mpi_transport::check_stamp(request& req, Ready&& ready) {
  if (!narrow_.stamps() || req.peer_ < 0 || !detail::is_stamped(req.tag_)) return;
  int flag = 0;
  MPI_Status st;
  DDL_MPI_CHECK(MPI_Iprobe(req.peer_, MPI_ANY_TAG, comm_, &flag, &st));
  if (!flag) return;
  const tag found = unpack(st.MPI_TAG);
  if (!detail::stamps_disagree(unpack(mpi_tag(req.tag_)), found)) return;
  if (req.send_) {  // taken after all? (the probe progressed MPI)
    int done = 0;
    DDL_MPI_CHECK(MPI_Test(&req.r_, &done, MPI_STATUS_IGNORE));
    if (done) return;
  }
  if constexpr (!std::is_null_pointer_v<std::decay_t<Ready>>)
    if (ready()) return;
  const std::string why = detail::stamp_mismatch(rank_, req.tag_, req.peer_, found);
  taint(why);  // first, so a stranded send's message says why the call failed
  req.release();
  throw mismatch_error("mpi_transport: " + why);
}

}  // namespace ddl
