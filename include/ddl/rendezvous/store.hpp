#pragma once
/// \file
/// Rendezvous stores: how the processes of a job that no MPI launcher
/// started find each other. A store is a small key-value table every rank
/// of the job reaches; a transport's bootstrap (`ucx_transport`) writes its
/// own record under its rank and reads the others'.
///
/// The Store concept (what `ddl::bootstrap` needs of a type `S`):
///   - `void set(const std::string& key, const std::string& value)` — write
///     once; a later `get` of the key on any rank sees it whole;
///   - `std::optional<std::string> get(const std::string& key, ddl::deadline)`
///     — the key's value as soon as it is set, `std::nullopt` once the
///     deadline passed without it (a store never blocks past it);
///   - `std::int64_t add(const std::string& key, std::int64_t delta)` —
///     adds atomically (a missing key counts as 0) and returns the sum.
/// Keys are short printable names without '/' at either end; values are
/// bytes (a worker address may hold zeros).
///
/// Provided: `file_store` (a directory every rank sees: one host, or a
/// shared file system), `mpi_store` in `<ddl/mpi.hpp>` (an MPI job that runs
/// ddl over another transport), and the torch backend's adapter of torch's
/// own store (`integrations/torch`).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "ddl/core/error.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {

/// A store in a directory: a key is a file, written to a temporary name and
/// renamed (so a reader never sees half of it); `add` holds an exclusive
/// `flock` on the key's file while it reads and writes the count. The
/// directory is created if missing (one level); a directory that cannot be
/// written is an `invalid_argument` at construction. One directory per job:
/// the records of an earlier job in it would be read as this one's.
class file_store {
 public:
  explicit file_store(std::string dir) : dir_(std::move(dir)) {
    if (dir_.empty()) throw invalid_argument("file_store: empty directory name");
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
      throw invalid_argument("file_store: cannot create the rendezvous directory '" + dir_ + "': " + std::strerror(errno));
    // Writable? A probe file of this process, removed again.
    const std::string probe = dir_ + "/.probe." + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0)
      throw invalid_argument("file_store: cannot write in the rendezvous directory '" + dir_ + "': " +
                             std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
  }

  /// The directory.
  const std::string& path() const noexcept { return dir_; }

  void set(const std::string& key, const std::string& value) {
    const std::string file = name(key), tmp = file + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0) fail("write", tmp);
    write_all(fd, value, tmp);
    ::close(fd);
    if (::rename(tmp.c_str(), file.c_str()) != 0) fail("rename", file);
  }

  std::optional<std::string> get(const std::string& key, deadline until) const {
    const std::string file = name(key);
    for (unsigned round = 0;; ++round) {
      if (auto v = read(file)) return v;
      if (std::chrono::steady_clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::microseconds(round < 20 ? 200 : 2000));
    }
  }

  std::int64_t add(const std::string& key, std::int64_t delta) {
    const std::string file = name(key);
    const int fd = ::open(file.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) fail("open", file);
    if (::flock(fd, LOCK_EX) != 0) {
      ::close(fd);
      fail("lock", file);
    }
    char buf[32] = {};
    const ssize_t got = ::pread(fd, buf, sizeof buf - 1, 0);
    const std::int64_t sum = (got > 0 ? std::strtoll(buf, nullptr, 10) : 0) + delta;
    const std::string text = std::to_string(sum);
    const bool ok = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, text.data(), text.size(), 0) == ssize_t(text.size());
    ::flock(fd, LOCK_UN);
    ::close(fd);
    if (!ok) fail("write", file);
    return sum;
  }

 private:
  std::string name(const std::string& key) const {
    if (key.empty() || key.find("..") != std::string::npos)
      throw invalid_argument("file_store: bad key '" + key + "'");
    std::string k = key;
    for (char& c : k)
      if (c == '/') c = '.';
    return dir_ + "/" + k;
  }
  static std::optional<std::string> read(const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) return std::nullopt;
    std::string v;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) v.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    return v;
  }
  static void write_all(int fd, const std::string& v, const std::string& file) {
    std::size_t done = 0;
    while (done < v.size()) {
      const ssize_t n = ::write(fd, v.data() + done, v.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        fail("write", file);
      }
      done += static_cast<std::size_t>(n);
    }
  }
  [[noreturn]] static void fail(const char* what, const std::string& file) {
    throw transport_error(std::string("file_store: cannot ") + what + " '" + file + "': " + std::strerror(errno));
  }
  std::string dir_;
};

}  // namespace ddl
