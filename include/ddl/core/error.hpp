#pragma once
/// \file
/// The ddl exception hierarchy. Every run-time precondition or peer failure
/// surfaces as one of these; nothing in ddl calls `std::abort` or hangs.
#include <stdexcept>
#include <string>

namespace ddl {

/// Base of every exception ddl throws.
class error : public std::runtime_error {
 public:
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
  timeout_error(int peer, std::string phase, std::string collective, double waited_s)
      : error(format(peer, phase, collective, waited_s)),
        peer_(peer),
        phase_(std::move(phase)),
        collective_(std::move(collective)),
        waited_s_(waited_s) {}

  /// Rank (in the transport's numbering) that did not answer; -1 if unknown.
  int peer() const noexcept { return peer_; }
  /// Algorithm phase, e.g. "ring reduce-scatter step 3/7".
  const std::string& phase() const noexcept { return phase_; }
  /// Collective being run, e.g. "all_reduce".
  const std::string& collective() const noexcept { return collective_; }
  /// Seconds waited before giving up.
  double waited() const noexcept { return waited_s_; }

 private:
  static std::string format(int peer, const std::string& phase, const std::string& collective,
                            double waited_s) {
    std::string s = "timeout after " + std::to_string(waited_s) + " s waiting for peer " +
                    std::to_string(peer);
    if (!phase.empty()) s += " in " + phase;
    if (!collective.empty()) s += " of " + collective;
    return s + " (deadline from DDL_TIMEOUT or communicator options)";
  }
  int peer_;
  std::string phase_, collective_;
  double waited_s_;
};

}  // namespace ddl
