#pragma once
/// \file
/// `mpi_store`: the rendezvous Store concept (`rendezvous/store.hpp`) over an
/// MPI communicator, so an MPI job can run ddl over another transport
/// (`ucx_transport(mpi_store(MPI_COMM_WORLD), rank, size)`).
///
/// Collective: every rank makes the same calls in the same order, as a
/// transport's bootstrap does. `set` is kept until the next `get` of a key
/// this rank has not seen, or the next `add`, which trade every rank's kept
/// writes in one round (an `MPI_Allgatherv`); a round applies the ranks'
/// writes in rank order. `get` waits for that round, not for its deadline
/// (MPI's collectives have none): a key that no rank wrote by then is
/// `std::nullopt`.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddl/mpi/transport.hpp"
#include "ddl/rendezvous/store.hpp"

namespace ddl {

/// A Store (`rendezvous/store.hpp`) over an MPI communicator: what the
/// ranks set and add is traded in collective rounds, so every rank must
/// call `get` and `add` in the same order.
class mpi_store {
 public:
  /// Duplicates `comm` (collective), so the store's rounds never meet the program's messages.
  explicit mpi_store(MPI_Comm comm) { DDL_MPI_CHECK(MPI_Comm_dup(comm, &comm_)); }
  ~mpi_store() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  mpi_store(const mpi_store&) = delete;
  mpi_store& operator=(const mpi_store&) = delete;

  /// Keeps `key` = `value` for the next round.
  void set(const std::string& key, const std::string& value) { kept_.push_back({false, key, value, 0}); }
  /// `key`'s value (after a round, if anything is pending or `key` unknown); none if no rank set it.
  std::optional<std::string> get(const std::string& key, deadline) {
    if (!kept_.empty() || !table_.count(key)) round();
    const auto it = table_.find(key);
    if (it == table_.end()) return std::nullopt;
    return it->second;
  }
  /// Adds `delta` to the counter `key` in a round; its new value.
  std::int64_t add(const std::string& key, std::int64_t delta) {
    kept_.push_back({true, key, {}, delta});
    return round();
  }

 private:
  struct write {
    bool add;
    std::string key, value;
    std::int64_t delta;
  };
  static void put(std::string& out, const std::string& s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&n), sizeof n).append(s);
  }
  static std::string take(const char*& p) {
    std::uint32_t n = 0;
    std::memcpy(&n, p, sizeof n);
    p += sizeof n;
    std::string s(p, n);
    p += n;
    return s;
  }
  // Trades the kept writes; returns the sum this rank's last `add` saw.
  std::int64_t round() {
    std::string mine;
    for (const auto& w : kept_) {
      mine.push_back(w.add ? 'a' : 's');
      put(mine, w.key);
      put(mine, w.add ? std::to_string(w.delta) : w.value);
    }
    int me = 0, n = 1;
    MPI_Comm_rank(comm_, &me);
    MPI_Comm_size(comm_, &n);
    const int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(n)), at(static_cast<std::size_t>(n));
    DDL_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_));
    int total = 0;
    for (int q = 0; q < n; ++q) at[static_cast<std::size_t>(q)] = total, total += lens[static_cast<std::size_t>(q)];
    std::string all(static_cast<std::size_t>(total), '\0');
    DDL_MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), at.data(), MPI_CHAR, comm_));
    std::int64_t seen = 0;
    for (int q = 0; q < n; ++q) {
      const char* p = all.data() + at[static_cast<std::size_t>(q)];
      const char* end = p + lens[static_cast<std::size_t>(q)];
      while (p < end) {
        const char kind = *p++;
        const std::string key = take(p), value = take(p);
        if (kind == 's') {
          table_[key] = value;
          continue;
        }
        auto& v = table_[key];
        v = std::to_string((v.empty() ? 0 : std::stoll(v)) + std::stoll(value));
        if (q == me) seen = std::stoll(v);
      }
    }
    kept_.clear();
    return seen;
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<write> kept_;
  std::map<std::string, std::string> table_;
};

}  // namespace ddl
