#pragma once
/// \file
/// Watching another process of this machine: has it exited, is it stopped?
/// A transport whose ranks are processes (MPI) learns of a peer's death from
/// the peer's process itself instead of waiting for its deadline: the MPI
/// standard tells nothing of a dead peer (that is ULFM, in no MPI here), but
/// a peer on the same machine can be looked at through `/proc`.
///
/// A process is named by its pid, its start time (a pid reused by a later
/// process is not taken for the first) and its machine: the boot (Linux's
/// `boot_id`) and pid namespace it lives in, so processes of two hosts, or
/// of two containers on one host, are never compared by pid. Linux only;
/// elsewhere `this_process()` has no machine and nothing is watched.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__linux__)
#include <unistd.h>
#endif

#include "ddl/core/hash.hpp"

namespace ddl {
namespace detail {

/// One process, as processes of the same machine can tell it apart.
struct process_id {
  std::int64_t pid = 0;
  std::uint64_t start = 0;    // start time since boot (clock ticks)
  std::uint64_t machine = 0;  // boot and pid namespace; 0: unknown (never watched)
};

enum class process_state {
  running,  // alive and not stopped (sleeping, waiting on I/O ... count as running)
  stopped,  // stopped by a signal (SIGSTOP, SIGTSTP) or a debugger
  gone,     // exited (a zombie not yet reaped counts as gone), or another process now has its pid
  unknown,  // cannot be looked at here
};

inline const char* name_of(process_state s) noexcept {
  switch (s) {
    case process_state::running: return "running";
    case process_state::stopped: return "stopped";
    case process_state::gone: return "exited";
    default: return "unknown";
  }
}

#if defined(__linux__)
// Reads a small file whole; "" when it cannot.
inline std::string read_small_file(const char* path) {
  std::string s;
  if (std::FILE* f = std::fopen(path, "r")) {
    char buf[1024];
    std::size_t n = std::fread(buf, 1, sizeof buf, f);
    s.assign(buf, n);
    std::fclose(f);
  }
  return s;
}
// The state letter and start time from /proc/<pid>/stat ("pid (comm) S ppid
// ... starttime(22nd field) ..."); the command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
inline bool read_stat(std::int64_t pid, char& state, std::uint64_t& start) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  const std::string s = read_small_file(path);
  const auto close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return false;
  state = s[close + 2];
  const char* p = s.c_str() + close + 2;
  for (int field = 3; field < 22; ++field) {  // skip to field 22
    p = std::strchr(p, ' ');
    if (!p) return false;
    ++p;
  }
  char* end = nullptr;
  start = std::strtoull(p, &end, 10);
  return end != p;
}
#endif

/// This process, named so that its peers on the same machine can watch it.
inline process_id this_process() {
  process_id me;
#if defined(__linux__)
  me.pid = static_cast<std::int64_t>(::getpid());
  char state = 0;
  std::string boot = read_small_file("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t len = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (!read_stat(me.pid, state, me.start) || boot.empty() || len <= 0) return me;  // machine 0: not watchable
  me.machine = fnv1a(ns, static_cast<std::size_t>(len), fnv1a(boot));
  if (me.machine == 0) me.machine = 1;
#endif
  return me;
}

/// What `p` is doing now, as seen from this process (`unknown` unless it
/// lives on this process's machine).
inline process_state state_of(const process_id& p, std::uint64_t my_machine) {
#if defined(__linux__)
  if (p.machine == 0 || p.machine != my_machine) return process_state::unknown;
  char state = 0;
  std::uint64_t start = 0;
  if (!read_stat(p.pid, state, start)) return process_state::gone;  // no /proc entry: the pid is free
  if (start != p.start) return process_state::gone;                 // a later process has the pid
  if (state == 'Z' || state == 'X') return process_state::gone;
  if (state == 'T' || state == 't') return process_state::stopped;
  return process_state::running;
#else
  (void)p;
  (void)my_machine;
  return process_state::unknown;
#endif
}

}  // namespace detail
}  // namespace ddl
