#pragma once
/// \file
/// `ucx_transport`: the Transport concept over UCX's tag API (UCP), for
/// processes that no MPI launcher started: torchrun, a Slurm or Kubernetes
/// job, `ddl-run`, a trainer that starts its own workers. Link `ddl::ucx`.
///
/// - Ranks meet through a rendezvous store (`rendezvous/store.hpp`): each
///   publishes its worker's address, its host and its process, and every
///   rank connects an endpoint to every other (`ucx/peers.hpp`): with UCX's
///   peer error handling to other hosts (a peer that dies fails the requests
///   on its endpoint), without it to this host's (shared memory; a peer
///   that dies is seen through its process).
/// - UCX chooses the wires (shared memory, CMA, TCP, InfiniBand, RoCE) from
///   its own settings: `UCX_TLS=tcp` keeps ranks of one host on sockets.
/// - Tags: UCP tags are 64 bits and carry no sender, so the sender's rank
///   rides in the top 20 bits, a control bit (ddl's own notices) below it,
///   and the communicator's tag folded into the low 43 (`detail::narrow_tags`:
///   the call stamps fit, so mismatched calls are told apart by their tags).
/// - Waits poll the worker against a deadline and yield, then sleep, while
///   idle (oversubscribed ranks). Every 16th poll looks for a peer's
///   failure notice, a failed endpoint, an awaited peer of this machine
///   whose process has exited, and the peer's message of this call under
///   another stamp (`ucx/watch.hpp`).
/// - Ranks of one machine share memory through stages as MPI ranks do
///   (`transport/stage_access.hpp`): the direct strategies and CMA reads run
///   over UCX too.
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/rendezvous/bootstrap.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/shm/process.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/shm/shared_stages.hpp"
#include "ddl/transport/stage_access.hpp"
#include "ddl/transport/stamp.hpp"
#include "ddl/ucx/context.hpp"
#include "ddl/ucx/peers.hpp"

namespace ddl {

namespace detail {
/// How many `ucx_transport`s this process has made: the n-th of every rank
/// meets the n-th of the others under its own keys of a shared store.
inline std::atomic<int>& ucx_generation() {
  static std::atomic<int> n{0};
  return n;
}
}  // namespace detail

/// One rank's handle on a group of processes connected by UCX.
class ucx_transport : public detail::stage_access<ucx_transport> {
 public:
  static constexpr double default_bandwidth = 2e9;  ///< link bandwidth the planner assumes without `DDL_TOPOLOGY`
  static constexpr double default_latency = 20e-6;  ///< link latency the planner assumes without `DDL_TOPOLOGY`
  /// As `mpi_transport`: the direct strategies through shared stages copy at
  /// memory speed, and their synchronisation round costs about one step.
  static constexpr double direct_read_factor = 8.0;
  static constexpr bool direct_round_one_step = true;  ///< a direct round costs one step
  /// The largest group (the sender's rank has 20 bits of each tag).
  static constexpr int max_ranks = 1 << 20;

  /// What a request refers to (`transport/request.hpp`): a UCP request, or
  /// none (a send UCX completed at once).
  struct request_fields {
    void* r_ = nullptr;
    ucx_transport* owner_ = nullptr;
    int peer_ = -1;
    bool send_ = false;
    tag tag_ = 0;
    std::size_t bytes_ = 0;
    bool active() const noexcept { return r_ != nullptr; }
    void withdraw() noexcept {
      owner_->withdraw(r_, send_, peer_);
      r_ = nullptr;
    }
  };
  /// A send or receive in flight; move-only, withdrawn if dropped unfinished.
  class request : public detail::request_handle<request_fields> {
   public:
    int peer() const noexcept { return peer_; }  ///< the request's peer (an `irecv_any`'s sender once complete)

   private:
    friend class ucx_transport;
    friend class detail::stage_access<ucx_transport>;
  };

  /// Rank `rank` of `size`, meeting the others through `store` (the Store
  /// concept of `rendezvous/store.hpp`) under the keys `name` (by default
  /// the n-th transport a process makes meets the n-th of the others); waits
  /// `wait` for the last rank to come (then `timeout_error` naming the
  /// missing ranks).
  template <class Store>
  ucx_transport(Store&& store, int rank, int size, std::chrono::duration<double> wait = rendezvous_timeout(),
                std::string name = {})
      : rank_(rank), size_(size) {
    if (size < 1 || size > max_ranks)
      throw invalid_argument("ucx_transport: " + std::to_string(size) + " ranks (1 to 2^20)");
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(wait);
    if (name.empty()) name = std::to_string(detail::ucx_generation()++);
    const std::string prefix = "ddl.ucx." + name + ".";
    const auto records = exchange_records(store, prefix, rank, size, detail::ucx_peers::record(worker_), until);
    peers_.connect(worker_, records, rank_);
    if (const char* v = std::getenv("DDL_UCX_PIECE_BYTES")) piece_ = detail::parse_bytes("DDL_UCX_PIECE_BYTES", v);
    cores_ = peers_.cores;
    reported_.assign(static_cast<std::size_t>(size_), -1e300);
    post_notice_receive();
    find_stages(until);
  }
  /// Rank and size from the launcher's variables (`launch_from_env`), the
  /// store from `DDL_RENDEZVOUS=file:///path`.
  explicit ucx_transport(const launch_info& who) : ucx_transport(file_store(rendezvous_dir_from_env()), who.rank, who.size) {}
  ucx_transport() : ucx_transport(launch_from_env()) {}
  ~ucx_transport() { close(); }
  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  int rank() const noexcept { return rank_; }  ///< this rank: 0 to size() - 1
  int size() const noexcept { return size_; }  ///< the group's ranks
  /// How many cores the group's ranks may run on (the union of their
  /// affinity masks, found at construction).
  int cores() const noexcept { return cores_; }
  /// The host name rank `q` gave at the rendezvous.
  const std::string& host_of(int q) const { return peers_.hosts.at(static_cast<std::size_t>(q)); }
  /// The call stamps fit in UCX's tags.
  bool stamps_in_tags() const noexcept { return narrow_.stamps(); }
  /// One thread at a time may drive the worker (`UCS_THREAD_MODE_SERIALIZED`).
  bool allows_progress_thread() const noexcept { return true; }
  /// The largest message the step engine sends to or receives from `peer`
  /// in one piece (0: any size): 64 KiB to a peer of another host (over
  /// TCP a larger message waits for the receiver's answer, which queues
  /// behind the bulk data the receiver sends the other way, as over MPI);
  /// `DDL_UCX_PIECE_BYTES` sets it for every such peer (0: off; the same on
  /// every rank). Both sides of a pair see each other as remote, so they cut alike.
  std::size_t piece_bytes(int peer) const noexcept {
    return peer >= 0 && peer < size_ && peers_.remote(static_cast<std::size_t>(peer)) ? piece_ : 0;
  }

  /// Sends `data` to `peer` under `t` (`ucp_tag_send_nbx`); the bytes must
  /// stay valid and unchanged until the request completes.
  request isend(int peer, const_bytes data, tag t) {
    refuse_if_broken(true);
    usable(peer, true);
    request r = fields(peer, t, true, data.size);
    ucp_request_param_t p{};
    void* q = ucp_tag_send_nbx(peers_.eps[static_cast<std::size_t>(peer)], data.data, data.size, wire(rank_, t), &p);
    if (UCS_PTR_IS_ERR(q)) failed_at_once(peer, true, UCS_PTR_STATUS(q));
    r.r_ = q;
    return r;
  }
  /// Receives exactly `data.size` bytes from `peer` under `t`.
  request irecv(int peer, mutable_bytes data, tag t) {
    refuse_if_broken(true);
    usable(peer, false);
    return post_receive(peer, data, wire(peer, t), ~ucp_tag_t{0}, t);
  }
  /// Receives exactly `data.size` bytes under `t` from whichever rank's
  /// message UCX matches first (the sender's bits masked); once complete,
  /// the request's `peer()` is the sender (the concept's `irecv_any`).
  request irecv_any(mutable_bytes data, tag t) {
    refuse_if_broken(true);
    return post_receive(-1, data, narrow_.pack(t), payload_mask, t);
  }

  /// True (and `req` retired) when it has completed; never blocks.
  bool test(request& req) {
    if (!req.active()) return true;
    worker_.progress();
    if (finished(req)) return true;
    if (++tests_ % 16 == 0) look_around(req);
    return false;
  }
  /// Polls until `req` completes; `timeout_error` naming the peer after `until`.
  void wait(request& req, deadline until) {
    if (!req.active()) return;
    const auto start = std::chrono::steady_clock::now();
    detail::backoff wait_more(64, 448);
    for (unsigned polls = 0;; ++polls) {
      worker_.progress();
      if (finished(req)) return;
      if (polls % 16 == 15) look_around(req);
      if (const auto now = std::chrono::steady_clock::now(); now >= until) timed_out(req, start, now);
      wait_more.pause();
    }
  }

  /// This rank gives the group up (the concept's `abort`): a notice naming
  /// this rank and `why` goes to every peer whose endpoint still works.
  void abort(const std::string& why) {
    if (broken()) return peers_.end_stranded(worker_);
    broken_ = "rank " + std::to_string(rank_) + " failed: " + why;
    notice_out_ = broken_.substr(0, notice_bytes);
    for (int p = 0; p < size_; ++p)
      if (p != rank_) send_control(p, abort_kind, notice_out_.data(), notice_out_.size());
    peers_.end_stranded(worker_);
  }
  /// True once this rank or a peer gave the group up. Takes in the peers'
  /// timeout reports on the way.
  bool broken() {
    while (broken_.empty() && notice_recv_) {
      worker_.progress();
      ucp_tag_recv_info_t info{};
      const ucs_status_t s = ucp_tag_recv_request_test(notice_recv_, &info);
      if (s == UCS_INPROGRESS) return false;
      ucp_request_free(notice_recv_);
      notice_recv_ = nullptr;
      if (s != UCS_OK) return false;  // cancelled at the end, or the worker failed: not a peer's notice
      if (take_notice(info)) post_notice_receive();
    }
    return !broken_.empty();
  }

  // The stage members (`stage`, `peer_stage`, `stages_shared`, `read_peer`,
  // `peer_buffer`, `wait_until`, ...: `detail::stage_access`) come from the
  // base: ranks of one machine with one host name share stages
  // (`find_stages`), unless a rank sets `DDL_UCX_SHM=0`.

 private:
  friend class detail::stage_access<ucx_transport>;
  static constexpr const char* transport_name = "ucx_transport";
  std::int64_t pid_of(int q) const { return peers_.procs[static_cast<std::size_t>(q)].pid; }

  // --- Tags -----------------------------------------------------------------
  static constexpr int rank_shift = 44;
  static constexpr ucp_tag_t control_bit = ucp_tag_t{1} << 43, setup_bit = ucp_tag_t{1} << 42;
  static constexpr ucp_tag_t payload_mask = (ucp_tag_t{1} << rank_shift) - 1;  // all but the sender
  static constexpr ucp_tag_t abort_kind = 0, timeout_kind = 1;
  static constexpr std::size_t notice_bytes = 256;
  ucp_tag_t wire(int from, tag t) const noexcept {
    return ucp_tag_t(static_cast<std::uint64_t>(from)) << rank_shift | narrow_.pack(t);
  }
  static int sender_of(ucp_tag_t t) noexcept { return static_cast<int>(t >> rank_shift); }

  // --- Set-up ---------------------------------------------------------------
  // Every rank's stage file, and which ranks open each other's: ranks of
  // one machine with the same host name (so the emulated hosts of
  // bench/cluster, network namespaces with a host name each, stay apart).
  // `DDL_UCX_SHM=0` on a rank shares with none. Two rounds over UCX.
  void find_stages(deadline until) {
    const char* env = std::getenv("DDL_UCX_SHM");
    const bool wanted = !(env && std::strcmp(env, "0") == 0) && peers_.machine != 0;
    const detail::shared_stages::file mine = wanted ? stages_.create() : detail::shared_stages::file{};
    std::vector<detail::shared_stages::file> all(static_cast<std::size_t>(size_));
    all_gather_bytes(&mine, sizeof mine, all.data(), until);
    if (wanted && mine.fd >= 0)
      for (int p = 0; p < size_; ++p) {
        const auto q = static_cast<std::size_t>(p);
        if (p != rank_ && peers_.procs[q].machine == peers_.machine && peers_.hosts[q] == peers_.hosts[static_cast<std::size_t>(rank_)])
          stages_.open_peer(p, peers_.procs[q].pid, all[q], size_, true);
      }
    const std::vector<std::uint64_t> row = stages_.row(rank_, size_);
    std::vector<std::uint64_t> rows(row.size() * static_cast<std::size_t>(size_));
    all_gather_bytes(row.data(), row.size() * sizeof(std::uint64_t), rows.data(), until);
    stages_.agree(std::move(rows), rank_, size_);
  }
  // Every rank's `bytes` at `mine` into `all` (rank order), over UCX's
  // control tags; `timeout_error` naming the first silent rank at `until`.
  void all_gather_bytes(const void* mine, std::size_t bytes, void* all, deadline until) {
    const ucp_tag_t kind = setup_bit | setups_++;
    auto* out = static_cast<std::byte*>(all);
    std::memcpy(out + static_cast<std::size_t>(rank_) * bytes, mine, bytes);
    std::vector<request> pending;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      request s = fields(p, 0, true, bytes);
      ucp_request_param_t prm{};
      void* q = ucp_tag_send_nbx(peers_.eps[static_cast<std::size_t>(p)], mine, bytes,
                                 ucp_tag_t(static_cast<std::uint64_t>(rank_)) << rank_shift | control_bit | kind, &prm);
      if (UCS_PTR_IS_ERR(q)) failed_at_once(p, true, UCS_PTR_STATUS(q));
      s.r_ = q;
      pending.push_back(std::move(s));
      pending.push_back(post_receive(p, {out + static_cast<std::size_t>(p) * bytes, bytes},
                                     ucp_tag_t(static_cast<std::uint64_t>(p)) << rank_shift | control_bit | kind,
                                     ~ucp_tag_t{0}, 0));
    }
    for (auto& r : pending) wait(r, until);
  }

  // --- Requests ---------------------------------------------------------------
  request fields(int peer, tag t, bool send, std::size_t bytes) {
    request r;
    r.owner_ = this;
    r.peer_ = peer;
    r.send_ = send;
    r.tag_ = t;
    r.bytes_ = bytes;
    return r;
  }
  // A receive is always a request (`UCP_OP_ATTR_FLAG_NO_IMM_CMPL`), so its
  // sender and length are read in one place (`finished`).
  request post_receive(int peer, mutable_bytes data, ucp_tag_t wire_tag, ucp_tag_t mask, tag t) {
    request r = fields(peer, t, false, data.size);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    void* q = ucp_tag_recv_nbx(worker_.get(), data.data, data.size, wire_tag, mask, &p);
    if (UCS_PTR_IS_ERR(q)) failed_at_once(peer, false, UCS_PTR_STATUS(q));
    r.r_ = q;
    return r;
  }
  // A completed receive: its sender (for `irecv_any`) and its length.
  void received(request& req, const ucp_tag_recv_info_t& info) {
    if (req.peer_ < 0) req.peer_ = sender_of(info.sender_tag);
    if (info.length != req.bytes_)
      throw transport_error(detail::size_mismatch("ucx_transport", req.peer_, info.length, rank_, req.bytes_, req.tag_));
  }
  [[noreturn]] void truncated(const request& req, const ucp_tag_recv_info_t& info) {
    const int from = req.peer_ >= 0 ? req.peer_ : sender_of(info.sender_tag);
    if (detail::is_stamped(req.tag_))
      throw transport_error("ucx_transport: " + detail::count_mismatch(from, "more than " + std::to_string(req.bytes_),
                                                                       rank_, req.bytes_, req.tag_));
    throw transport_error("ucx_transport: rank " + std::to_string(rank_) + ": a message from rank " +
                          std::to_string(from) + " is longer than the receive of " + std::to_string(req.bytes_) +
                          " bytes (" + detail::describe_tag(req.tag_) + ")");
  }
  // Control messages and a wait's looks around (`ucx/watch.hpp`).
  inline void send_control(int p, ucp_tag_t kind, const void* data, std::size_t bytes);
  inline void post_notice_receive();
  inline bool take_notice(const ucp_tag_recv_info_t& info);
  // Whether `req` completed (then retired); throws what UCX reported.
  bool finished(request& req) {
    ucp_tag_recv_info_t info{};
    const ucs_status_t s = req.send_ ? ucp_request_check_status(req.r_) : ucp_tag_recv_request_test(req.r_, &info);
    if (s == UCS_INPROGRESS) return false;
    ucp_request_free(req.r_);
    req.r_ = nullptr;
    if (s == UCS_ERR_MESSAGE_TRUNCATED) truncated(req, info);
    if (s != UCS_OK) failed_at_once(req.peer_, req.send_, s);
    if (!req.send_) received(req, info);
    return true;
  }
  [[noreturn]] void failed_at_once(int peer, bool send, ucs_status_t s) {
    // A peer that gave up says why in a notice sent before its endpoints
    // closed: a short look for it first, so the error names the cause.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (!broken() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (broken())
      throw transport_error("ucx_transport: rank " + std::to_string(rank_) + " stopped waiting for " +
                            (peer >= 0 ? "rank " + std::to_string(peer) : std::string("any rank")) + ": " + broken_);
    std::string why = peer >= 0 ? peers_.failed[static_cast<std::size_t>(peer)] : std::string();
    if (why.empty()) why = ucs_status_string(s);
    throw transport_error("ucx_transport: rank " + std::to_string(rank_) + ": the " +
                          (send ? "send to " : "receive from ") + (peer >= 0 ? process_of(peer) : "any rank") +
                          " failed: " + why);
  }
  // Withdraws an unfinished request (its destructor): a receive is
  // cancelled. A send UCX cannot cancel (a large one the peer never took)
  // is stranded: this rank's failure notice goes out first (`abort`, which
  // the communicator calls next, or `close`), then the endpoint to its peer
  // ends by force, which fails the send, so UCX never reads the caller's
  // buffer afterwards; the peer learns why from the notice. A peer of this
  // host on an endpoint without peer error handling (shared memory) cannot
  // be cut off so: its send is held, and the peer, which takes in the
  // notice before it posts another receive (`isend`, `irecv` look), never
  // matches it; only a receive it posted before the notice came could.
  void withdraw(void* r, bool send, int peer) noexcept {
    ucp_request_cancel(worker_.get(), r);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
      if (!worker_.progress()) std::this_thread::yield();
    if (ucp_request_check_status(r) == UCS_INPROGRESS && send && peer >= 0) {
      peers_.strand(r, peer);
      return;
    }
    ucp_request_free(r);
  }
  template <class Ready = std::nullptr_t>
  void look_around(request& req, Ready&& ready = nullptr);
  template <class Ready>
  void check_alive(request& req, Ready&& ready);
  template <class Ready>
  void check_stamp(request& req, Ready&& ready);
  [[noreturn]] void timed_out(request& req, std::chrono::steady_clock::time_point start,
                              std::chrono::steady_clock::time_point now) {
    const int peer = req.peer_;
    req.release();
    const double waited = std::chrono::duration<double>(now - start).count();
    const double at = detail::steady_seconds(), grace = detail::timeout_grace(waited);
    for (int p = 0; p < size_; ++p)
      if (p != rank_) send_control(p, timeout_kind, nullptr, 0);
    while (detail::steady_seconds() < at + grace) {
      broken();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    broken();
    std::vector<int> silent =
        detail::silent_ranks([&](int q) { return reported_[static_cast<std::size_t>(q)]; }, size_, rank_, at, grace);
    throw timeout_error(peer, "", "", waited, std::move(silent));
  }

  // --- Checks and names ---------------------------------------------------------
  // Throws once the group is broken; `look` takes in the peers' notices
  // first (before a message is posted: a peer that gave up is not answered).
  void refuse_if_broken(bool look = false) {
    if (peers_.stranding()) abort("a send it could not withdraw after a failed call");
    if (look) broken();
    if (!broken_.empty()) throw transport_error("ucx_transport: the group is broken (" + broken_ + ")");
  }
  void require_rank(int peer) const {
    if (peer < 0 || peer >= size_)
      throw invalid_argument("ucx_transport: no rank " + std::to_string(peer) + " of " + std::to_string(size_));
  }
  // `peer` is a rank whose endpoint works, else the error of a failed request to it.
  void usable(int peer, bool send) {
    require_rank(peer);
    if (!peers_.failed[static_cast<std::size_t>(peer)].empty()) failed_at_once(peer, send, UCS_ERR_CONNECTION_RESET);
  }
  std::string process_of(int q) const { return peers_.process_of(q); }

  // --- The end ---------------------------------------------------------------------
  void close() noexcept {
    if (notice_recv_) {
      ucp_request_cancel(worker_.get(), notice_recv_);
      worker_.progress();
      ucp_request_free(notice_recv_);
      notice_recv_ = nullptr;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (void* r : control_sends_) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
        worker_.progress();
      ucp_request_free(r);
    }
    control_sends_.clear();
    if (peers_.stranding() && broken_.empty()) abort("a send it could not withdraw after a failed call");
    peers_.end_stranded(worker_);
    // Healthy: each endpoint flushes what it still sends, then closes; after
    // a failure, by force (a peer may never take what is queued for it),
    // once the notices had a moment to leave.
    const bool force = !broken_.empty();
    if (force) worker_.flush(std::chrono::milliseconds(500));
    for (std::size_t q = 0; q < peers_.eps.size(); ++q)
      if (peers_.eps[q]) peers_.close(worker_, q, peers_.peer_errors[q] && (force || !peers_.failed[q].empty()));
    peers_.free_held();
  }

  int rank_ = 0, size_ = 1, cores_ = 1;
  detail::ucx_worker worker_;
  detail::ucx_peers peers_;                 // endpoints, processes, hosts, failures
  detail::narrow_tags narrow_{43};
  double next_look_ = 0;                    // when `check_alive` looks again (steady seconds)
  int gone_peer_ = -1;                      // the awaited peer the last look found gone
  void* notice_recv_ = nullptr;             // the receive of peers' notices, always posted
  char notice_in_[notice_bytes] = {};
  std::string notice_out_;
  std::vector<void*> control_sends_;        // notices and reports this rank sent
  std::string broken_;                      // why the group is broken; empty while it is not
  std::vector<double> reported_;            // per rank: when its last timeout report came (steady seconds)
  unsigned tests_ = 0;
  std::size_t piece_ = std::size_t{64} << 10;  // see piece_bytes
  ucp_tag_t setups_ = 0;                    // set-up rounds so far (`all_gather_bytes`)
};

}  // namespace ddl

// The members declared above and defined apart.
#include "ddl/ucx/watch.hpp"
