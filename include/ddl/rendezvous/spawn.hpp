#pragma once
/// \file
/// Starting the ranks of a job on this machine without MPI: `spawn_local`
/// forks `n` processes of one program, each told its place as torchrun
/// tells its workers (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
/// `LOCAL_WORLD_SIZE`) and where to meet (`DDL_RENDEZVOUS=file://` a fresh
/// directory, removed at the end). What `ddl-run` and `ddl-bench --spawn`
/// run. POSIX only.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ddl/core/error.hpp"

namespace ddl {

/// How `spawn_ranks` starts and ends the ranks' processes.
struct spawn_options {
  /// End every rank when one fails (a non-zero exit or a signal); false:
  /// let the others run to their own end (a test that kills a rank on purpose).
  bool end_all_on_failure = true;
  /// End every rank after this long (0: never); the result is then 124.
  std::chrono::duration<double> time_limit{0};
};

namespace detail {
inline std::atomic<int>& spawn_signal() {
  static std::atomic<int> s{0};
  return s;
}
inline void ddl_spawn_on_signal(int sig) { spawn_signal() = sig; }
// An exit status as a shell says it: the code, or 128 + the signal.
inline int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
}  // namespace detail

/// Runs `argv` as `n` ranks on this machine and waits for them. Returns 0
/// when every rank exits with 0; else the first failing rank's code (128 +
/// the signal for a rank ended by one), having ended the others
/// (`SIGTERM`, then `SIGKILL` 3 s later) unless `end_all_on_failure` is
/// false. SIGINT and SIGTERM sent to this process are passed on to the
/// ranks. Throws `invalid_argument` for `n` < 1 or an empty `argv`.
inline int spawn_local(int n, const std::vector<std::string>& argv, const spawn_options& opt = {}) {
  if (n < 1) throw invalid_argument("spawn_local: " + std::to_string(n) + " ranks (at least 1)");
  if (argv.empty()) throw invalid_argument("spawn_local: no program to run");
  char dir[] = "/tmp/ddl-run-XXXXXX";
  if (!::mkdtemp(dir)) throw transport_error(std::string("spawn_local: mkdtemp failed: ") + std::strerror(errno));
  std::vector<pid_t> pids(static_cast<std::size_t>(n), -1);
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      throw transport_error(std::string("spawn_local: fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("DDL_RENDEZVOUS", (std::string("file://") + dir).c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "ddl-run: cannot run %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    pids[static_cast<std::size_t>(r)] = pid;
  }
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = detail::ddl_spawn_on_signal;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  const auto start = std::chrono::steady_clock::now();
  int result = 0, left = n;
  bool ending = false;
  std::chrono::steady_clock::time_point kill_at{};
  auto end_all = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, sig);
  };
  while (left > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[static_cast<std::size_t>(r)] != done) continue;
        pids[static_cast<std::size_t>(r)] = -1;
        --left;
        const int code = detail::exit_code_of(status);
        if (code != 0 && result == 0) {
          result = code;
          if (!ending)
            std::fprintf(stderr, "ddl-run: rank %d (pid %d) %s %d%s\n", r, static_cast<int>(done),
                         WIFSIGNALED(status) ? "was ended by signal" : "exited with code",
                         WIFSIGNALED(status) ? WTERMSIG(status) : code,
                         opt.end_all_on_failure && left > 0 ? "; ending the other ranks" : "");
          if (opt.end_all_on_failure && !ending) {
            ending = true;
            end_all(SIGTERM);
            kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          }
        }
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (const int sig = detail::spawn_signal().exchange(0)) {
      end_all(sig);
      if (!ending) kill_at = now + std::chrono::seconds(3);
      ending = true;
      if (result == 0) result = 128 + sig;
    }
    if (opt.time_limit.count() > 0 && !ending && now - start > opt.time_limit) {
      std::fprintf(stderr, "ddl-run: the ranks ran past %.0f s; ending them\n", opt.time_limit.count());
      end_all(SIGTERM);
      ending = true;
      kill_at = now + std::chrono::seconds(3);
      result = 124;
    }
    if (ending && now > kill_at) end_all(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

}  // namespace ddl
