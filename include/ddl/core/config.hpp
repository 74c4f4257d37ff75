#pragma once
/// \file
/// Run-time settings: defaults, environment variables (`DDL_TIMEOUT`,
/// `DDL_CHUNK_BYTES`, `DDL_PIPELINE_DEPTH`, `DDL_PROGRESS`, `DDL_CHECK`, `DDL_BROADCAST`,
/// `DDL_TUNE`, `DDL_TUNE_COPIES`) and the
/// per-communicator options
/// that override them.
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <string>

#include "ddl/core/error.hpp"

namespace ddl {

namespace detail {
inline double parse_positive(const char* name, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0))
    throw invalid_argument(std::string(name) + "='" + text + "' is not a positive number");
  return v;
}

/// Parses a byte size with an optional K/M/G suffix (powers of 1024).
inline std::size_t parse_bytes(const char* name, const std::string& text) {
  if (text.empty()) throw invalid_argument(std::string(name) + " is empty");
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    throw invalid_argument(std::string(name) + "='" + text + "' is not a byte size");
  }
  std::string unit = text.substr(pos);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  double scale = 1;
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    throw invalid_argument(std::string(name) + "='" + text + "': unknown unit '" + unit +
                           "' (use K, M or G)");
  if (std::isnan(v)) throw invalid_argument(std::string(name) + "='" + text + "' is not a byte size");
  if (v < 0) throw invalid_argument(std::string(name) + "='" + text + "' is negative");
  if (!(v * scale < 4611686018427387904.0))  // 2^62: past any memory, and infinities
    throw invalid_argument(std::string(name) + "='" + text + "' is too large");
  return static_cast<std::size_t>(v * scale);
}
}  // namespace detail

/// Where a communicator's asynchronous collectives make progress
/// (`DDL_PROGRESS=thread|deferred`; see `comm/progress.hpp`).
enum class progress {
  thread,    ///< a background thread per communicator runs them while the caller computes
  deferred,  ///< they run inside the request's `test` / `wait`, on the caller's thread
};

/// Which broadcast algorithm runs (`DDL_BROADCAST=auto|binomial|chain|scatter_allgather|direct`;
/// the algorithms and their costs are in `strategy/broadcast.hpp`; `direct`
/// only where the ranks share stages: threads, MPI ranks of one machine).
enum class broadcast_algorithm { automatic, binomial, chain, scatter_allgather, direct };

/// Settings of one communicator. Defaults come from the environment.
struct options {
  /// Longest any single wait may take before `timeout_error` (`DDL_TIMEOUT`, seconds).
  std::chrono::duration<double> timeout = std::chrono::seconds(300);
  /// Pipeline chunk: a ring step moves its slice in chunks of this many bytes,
  /// so the transfer of one chunk overlaps the reduction of the previous
  /// (`DDL_CHUNK_BYTES`, e.g. `512K`).
  std::size_t chunk_bytes = 1u << 20;
  /// How many chunks a ring step keeps in flight per peer, 1..16
  /// (`DDL_PIPELINE_DEPTH`). Over TCP, where a message's handshake waits
  /// behind data, more in flight keeps exchanges busier.
  std::size_t pipeline_depth = 4;
  /// Where asynchronous collectives progress (`DDL_PROGRESS`). A transport
  /// that must stay on its caller's thread gets `deferred` whatever this says.
  progress async_progress = progress::thread;
  /// Before each collective, every rank trades its call's fingerprint
  /// (collective, counts, dtype, op, root) with every other (`DDL_CHECK=1`):
  /// ranks that disagree get the same `mismatch_error` naming the field, both
  /// values and both ranks, and an argument one rank rejects is every rank's
  /// error, instead of a wrong result or a hang. Costs one round of small
  /// messages to every peer per call.
  /// Without it, the call stamps in every message's tag still turn a
  /// mismatch into a `mismatch_error` (naming collective, dtype or op, or
  /// "count, root or strategy"), but the group is then given up.
  bool check_calls = false;
  /// The broadcast algorithm (`DDL_BROADCAST`); `automatic` prices them all.
  broadcast_algorithm broadcast = broadcast_algorithm::automatic;
  /// `auto_strategy` measures its candidates for all-reduces, and the
  /// communicator its broadcast algorithms, up to this many bytes per rank
  /// before settling on one per size class (`DDL_TUNE`, e.g. `16M`). Off
  /// (`0`, the cost model alone decides) by default, as PyTorch's
  /// `cudnn.benchmark`: a choice made from timings can differ between runs,
  /// and with it the last bits of a float sum, so a training run would not
  /// repeat itself exactly. See `strategy/tuning.hpp`.
  std::size_t tune_bytes = 0;
  /// `auto_strategy` measures its candidates for all-gathers, and the
  /// communicator its broadcast algorithms, from 64 KiB (16 KiB on 2
  /// ranks) up to this many bytes (the whole all-gathered vector, the
  /// broadcast message) before settling on one per size class
  /// (`DDL_TUNE_COPIES`, e.g. `64M`; `0` turns it off; all-reduces follow
  /// `tune_bytes`). On by default at every size from there: these calls
  /// copy and never reduce, so whichever algorithm is
  /// chosen every rank ends with the same bits, run after run, and what is
  /// left to choose is speed alone (which form wins moves with where the
  /// host places the ranks' cores, past any fixed bound: docs/settings.md,
  /// "Why the defaults").
  std::size_t tune_copies_bytes = std::numeric_limits<std::size_t>::max();

  /// Defaults overridden by the environment variables above when set.
  static options from_env() {
    options o;
    if (const char* t = std::getenv("DDL_TIMEOUT"))
      o.timeout = std::chrono::duration<double>(detail::parse_positive("DDL_TIMEOUT", t));
    if (const char* c = std::getenv("DDL_CHUNK_BYTES")) o.chunk_bytes = detail::parse_bytes("DDL_CHUNK_BYTES", c);
    if (const char* d = std::getenv("DDL_PIPELINE_DEPTH")) {
      const double v = detail::parse_positive("DDL_PIPELINE_DEPTH", d);
      if (v != static_cast<double>(static_cast<std::size_t>(v)) || v > 16)
        throw invalid_argument(std::string("DDL_PIPELINE_DEPTH='") + d + "' must be a whole number in 1..16");
      o.pipeline_depth = static_cast<std::size_t>(v);
    }
    if (const char* k = std::getenv("DDL_CHECK")) {
      const std::string v = k;
      if (v == "1") o.check_calls = true;
      else if (v != "0" && !v.empty()) throw invalid_argument("DDL_CHECK='" + v + "' must be 0 or 1");
    }
    if (const char* b = std::getenv("DDL_BROADCAST")) {
      const std::string v = b;
      if (v == "auto") o.broadcast = broadcast_algorithm::automatic;
      else if (v == "binomial") o.broadcast = broadcast_algorithm::binomial;
      else if (v == "chain") o.broadcast = broadcast_algorithm::chain;
      else if (v == "scatter_allgather") o.broadcast = broadcast_algorithm::scatter_allgather;
      else if (v == "direct") o.broadcast = broadcast_algorithm::direct;
      else
        throw invalid_argument("DDL_BROADCAST='" + v +
                               "' must be 'auto', 'binomial', 'chain', 'scatter_allgather' or 'direct'");
    }
    if (const char* u = std::getenv("DDL_TUNE")) o.tune_bytes = detail::parse_bytes("DDL_TUNE", u);
    if (const char* u = std::getenv("DDL_TUNE_COPIES"))
      o.tune_copies_bytes = detail::parse_bytes("DDL_TUNE_COPIES", u);
    if (const char* p = std::getenv("DDL_PROGRESS")) {
      const std::string v = p;
      if (v == "thread") o.async_progress = progress::thread;
      else if (v == "deferred") o.async_progress = progress::deferred;
      else throw invalid_argument("DDL_PROGRESS='" + v + "' must be 'thread' or 'deferred'");
    }
    o.validate();
    return o;
  }

  void validate() const {
    if (!(timeout.count() > 0)) throw invalid_argument("options.timeout must be positive");
    if (chunk_bytes < 64) throw invalid_argument("options.chunk_bytes must be at least 64");
    if (pipeline_depth < 1 || pipeline_depth > 16)
      throw invalid_argument("options.pipeline_depth must be in 1..16");
  }
};

}  // namespace ddl
