#pragma once
/// \file
/// The ddl exception hierarchy. Every run-time precondition or peer failure
/// surfaces as one of these; nothing in ddl calls `std::abort` or hangs.
#include <stdexcept>
#include <string>
#include <vector>

namespace ddl {

/// Base of every exception ddl throws.
class error : public std::runtime_error {
 public:
  /// The message, prefixed "ddl: ".
  explicit error(const std::string& what) : std::runtime_error("ddl: " + what) {}
};

/// A caller broke a precondition: null data, wrong count, overlapping buffers, ...
class invalid_argument : public error {
 public:
  using error::error;
};

/// A box, group or topology does not match the ranks it describes.
class topology_error : public error {
 public:
  using error::error;
};

/// Ranks disagreed on what collective they called (count, dtype, op, kind).
class mismatch_error : public error {
 public:
  using error::error;
};

/// The transport failed (a back-end error code, a broken peer, ...).
class transport_error : public error {
 public:
  using error::error;
};

/// A wait passed its deadline. Carries the peer, the phase and the collective
/// so a log line says who stalled where.
class timeout_error : public error {
 public:
  /// \param peer the rank waited for (-1: any); \param phase and
  /// \param collective where; \param waited_s how long; \param silent the
  /// ranks that reported no timeout; \param note what else the transport saw.
  timeout_error(int peer, std::string phase, std::string collective, double waited_s, std::vector<int> silent = {},
                std::string note = {})
      : error(format(peer, phase, collective, waited_s, silent, note)),
        peer_(peer),
        phase_(std::move(phase)),
        collective_(std::move(collective)),
        waited_s_(waited_s),
        silent_(std::move(silent)),
        note_(std::move(note)) {}

  /// Rank (in the transport's numbering) that did not answer; -1 if unknown (or any: a receive from any rank).
  int peer() const noexcept { return peer_; }
  /// Algorithm phase, e.g. "ring reduce-scatter step 3/7".
  const std::string& phase() const noexcept { return phase_; }
  /// Collective being run, e.g. "all_reduce".
  const std::string& collective() const noexcept { return collective_; }
  /// Seconds waited before giving up.
  double waited() const noexcept { return waited_s_; }
  /// Where the transport can tell (threads, MPI): the ranks that reported no
  /// timeout of their own around this one's, i.e. the ones that stalled,
  /// left or never called, rather than survivors waiting in turn. Empty when
  /// every peer timed out too or the transport cannot tell.
  const std::vector<int>& silent() const noexcept { return silent_; }
  /// What else the transport could tell, e.g. "rank 2 (pid 4242 on node1)
  /// is stopped (by a signal such as SIGSTOP, or a debugger)"; "" if nothing.
  const std::string& note() const noexcept { return note_; }

 private:
  static std::string format(int peer, const std::string& phase, const std::string& collective,
                            double waited_s, const std::vector<int>& silent, const std::string& note) {
    std::string s = "timeout after " + std::to_string(waited_s) + " s waiting for " +
                    (peer < 0 ? std::string("any peer") : "peer " + std::to_string(peer));
    if (!phase.empty()) s += " in " + phase;
    if (!collective.empty()) s += " of " + collective;
    s += " (deadline from DDL_TIMEOUT or communicator options)";
    if (!silent.empty()) {
      s += "; no timeout reported by rank";
      s += silent.size() > 1 ? "s " : " ";
      for (std::size_t i = 0; i < silent.size(); ++i) s += (i ? "," : "") + std::to_string(silent[i]);
      s += " (stalled, gone, or never called)";
    }
    if (!note.empty()) s += "; " + note;
    return s;
  }
  int peer_;
  std::string phase_, collective_;
  double waited_s_;
  std::vector<int> silent_;
  std::string note_;
};

}  // namespace ddl
