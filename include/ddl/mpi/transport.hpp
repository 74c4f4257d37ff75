#pragma once
/// \file
/// `mpi_transport`: the Transport concept over a user's MPI communicator,
/// with any MPI (tested with Open MPI and MPICH). Link `ddl::mpi`.
///
/// - ddl never calls `MPI_Init` behind a user's back; `ddl::mpi_session` is
///   an RAII helper for programs that want one.
/// - The communicator is duplicated, so ddl's messages never meet the
///   user's; tags keep concurrent phases of one collective apart.
/// - Non-blocking point-to-point only; `wait` polls `MPI_Test` against a
///   deadline and yields, then sleeps, while idle, so oversubscribed ranks do
///   not starve each other. No `MPI_Wait` without a deadline anywhere.
/// - What the ranks learn of each other at construction (nodes, eager and
///   piece sizes, processes, shared stages) is in `mpi/peers.hpp`; how a
///   wait looks around (notices, exited peers, stamps) in `mpi/watch.hpp`.
/// - No fused receive-and-reduce: strategies receive chunks into the
///   communicator's pre-allocated scratch ring and reduce them there, while
///   the next chunks are in flight.
#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <cstdint>
#include <cstring>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <thread>
#include <vector>

#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/shm/process.hpp"
#include "ddl/shm/shared_stages.hpp"
#include "ddl/transport/stage_access.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/mpi/environment.hpp"
#include "ddl/mpi/session.hpp"

namespace ddl {

/// One rank's handle on an MPI communicator.
class mpi_transport : public detail::stage_access<mpi_transport> {
 public:
  /// Link costs the planner assumes without `DDL_TOPOLOGY` or a probe.
  static constexpr double default_bandwidth = 2e9;
  static constexpr double default_latency = 20e-6;  ///< link latency the planner assumes without `DDL_TOPOLOGY`
  /// The direct strategies through shared stages copy at memory speed, not
  /// at the rate of messages the link costs describe: priced at 8x the link
  /// bandwidth (`cost::price_direct`; at 2x the model priced two_shot's
  /// copies alone well above what whole calls took).
  static constexpr double direct_read_factor = 8.0;
  /// A direct strategy's synchronisation round (small eager messages to and
  /// from every peer) costs about one step's latency here, not ceil(log2 n)
  /// of them (`plan_for::direct_round_one_step`; priced at ceil(log2 n),
  /// auto ran one_shot where two_shot was faster).
  static constexpr bool direct_round_one_step = true;

  /// What a request refers to (`transport/request.hpp`).
  struct request_fields {
    MPI_Request r_ = MPI_REQUEST_NULL;
    int peer_ = -1;
    bool send_ = false;
    tag tag_ = 0;            // ddl's tag (error texts, the stamp check)
    std::size_t bytes_ = 0;  // a receive's size (checked against the message's)
    bool active() const noexcept { return r_ != MPI_REQUEST_NULL; }
    // Withdraws an incomplete request: a receive is cancelled for sure; a
    // send is cancelled if the MPI can, else `detail::stranded_send` decides
    // (by default the job ends: MPI would read a buffer the caller owns).
    void withdraw() noexcept {
      int fin = 0;
      MPI_Finalized(&fin);
      if (fin) return;
      MPI_Cancel(&r_);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      int flag = 0;
      while (!flag && std::chrono::steady_clock::now() < until) {
        MPI_Test(&r_, &flag, MPI_STATUS_IGNORE);
        if (!flag) std::this_thread::yield();
      }
      if (!flag) {
        if (send_) {
          int me = -1;
          MPI_Comm_rank(MPI_COMM_WORLD, &me);
          detail::stranded_send(me, peer_);
        }
        MPI_Request_free(&r_);
      }
      r_ = MPI_REQUEST_NULL;
    }
  };
  /// A send or receive in flight; move-only, withdrawn if dropped unfinished.
  class request : public detail::request_handle<request_fields> {
   public:
    int peer() const noexcept { return peer_; }  ///< the request's peer (an `irecv_any`'s sender once complete)

   private:
    friend class mpi_transport;
    friend class detail::stage_access<mpi_transport>;
  };

  /// Duplicates `comm` twice (collective over `comm`): one communicator for
  /// the collectives' messages, one for failure notices (`abort`), on which a
  /// receive from any rank stays posted.
  explicit mpi_transport(MPI_Comm comm) {
    DDL_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
    DDL_MPI_CHECK(MPI_Comm_dup(comm, &notices_));
    // MPI errors on ddl's communicators come back as `transport_error`
    // (naming the call and the peer), not as the end of the job.
    DDL_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    DDL_MPI_CHECK(MPI_Comm_set_errhandler(notices_, MPI_ERRORS_RETURN));
    DDL_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    DDL_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    tag_ub_ = detail::tag_upper_bound(comm_);
    int bits = 0;  // MPI tags have `bits` bits: [0, 2^bits) <= MPI_TAG_UB
    while (bits < 31 && (std::int64_t{1} << (bits + 1)) - 1 <= tag_ub_) ++bits;
    narrow_ = detail::narrow_tags(bits);  // no stamps below MPI_TAG_UB 2^25 - 1
    if (!stamps_in_tags() && rank_ == 0) detail::say_stamps_left_out(tag_ub_);
    reported_.assign(static_cast<std::size_t>(size_), -1e300);
    find_eager_peers();
    find_pieces();
    find_processes();
    find_stages();
    cores_ = detail::usable_cores(comm_);
    post_notice_receive();
    ++detail::mpi_transports_alive();
  }
  ~mpi_transport() {
    --detail::mpi_transports_alive();
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (notice_recv_ != MPI_REQUEST_NULL) {  // a receive can always be cancelled
      MPI_Cancel(&notice_recv_);
      MPI_Wait(&notice_recv_, MPI_STATUS_IGNORE);
    }
    for (auto& r : notice_sends_) {  // small, eager: done, or handed to MPI
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (!done) MPI_Request_free(&r);
    }
    // A group that broke or timed out may still have messages on their way
    // to these communicators (sends nobody will receive). Freed, their
    // context ids would be reused by the next communicator, whose matching
    // (Open MPI orders messages per context and peer) would meet them and
    // stall: such communicators are left allocated instead.
    if (!tainted_ && broken_.empty()) {
      if (notices_ != MPI_COMM_NULL) MPI_Comm_free(&notices_);
      if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    }
  }

  /// Whether the collectives' tags carry their call stamps
  /// (`transport/stamp.hpp`): they need `MPI_TAG_UB` >= 2^25 - 1 (Open MPI
  /// 2^31 - 1, MPICH 2^28 - 1). Where they do not fit, a communicator over
  /// this transport checks every call with the `DDL_CHECK` round instead
  /// (`stamps_in_tags_of`), and rank 0 says so once.
  bool stamps_in_tags() const noexcept { return narrow_.stamps(); }
  /// `MPI_TAG_UB` as this transport uses it (the same on every rank).
  int tag_upper_bound() const noexcept { return tag_ub_; }

  /// This rank gives the group up (the concept's `abort`): a notice naming
  /// this rank and `why` goes to every peer, whose waits then throw
  /// `transport_error` within a few polls, as do this rank's later calls.
  /// No-op once the group is broken (by this rank or a peer's notice).
  void abort(const std::string& why) {
    if (broken()) return;
    broken_ = "rank " + std::to_string(rank_) + " failed: " + why;
    detail::note_mpi_failure(broken_);
    notice_out_ = broken_.substr(0, sizeof notice_in_);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      notice_sends_.emplace_back(MPI_REQUEST_NULL);
      DDL_MPI_CHECK(MPI_Isend(notice_out_.data(), static_cast<int>(notice_out_.size()), MPI_CHAR, p, abort_tag, notices_,
                              &notice_sends_.back()));
    }
  }
  /// True once this rank or a peer gave the group up (`abort`). Takes in
  /// the peers' timeout reports on the way.
  bool broken() {
    while (broken_.empty()) {
      int flag = 0;
      MPI_Status st;
      DDL_MPI_CHECK(MPI_Test(&notice_recv_, &flag, &st));
      if (!flag) return false;
      if (st.MPI_TAG == timeout_tag) {
        reported_[static_cast<std::size_t>(st.MPI_SOURCE)] = detail::steady_seconds();
        post_notice_receive();
        continue;
      }
      int len = 0;
      MPI_Get_count(&st, MPI_CHAR, &len);
      broken_.assign(notice_in_, static_cast<std::size_t>(std::max(len, 0)));
    }
    return true;
  }
  mpi_transport(const mpi_transport&) = delete;
  mpi_transport& operator=(const mpi_transport&) = delete;

  int rank() const noexcept { return rank_; }  ///< this rank: 0 to size() - 1
  int size() const noexcept { return size_; }  ///< the group's ranks
  /// ddl's private duplicate of the user's communicator.
  MPI_Comm comm() const noexcept { return comm_; }
  /// How many cores the group's ranks may run on (`detail::usable_cores`,
  /// found at construction).
  int cores() const noexcept { return cores_; }

  /// A communicator's progress thread may drive this transport when MPI was
  /// initialised with `MPI_THREAD_MULTIPLE`, or with `MPI_THREAD_SERIALIZED`
  /// (what `ddl::mpi_session` asks for) while this is the process's only
  /// `mpi_transport`: two transports' progress threads would call MPI at
  /// once, which `SERIALIZED` does not allow. Where it is not allowed,
  /// asynchronous collectives run inside their requests' `wait` and `test`
  /// on the caller's thread (no overlap, still correct); a communicator
  /// looks again each time it has nothing pending, so its calls go back to
  /// the background once the other transports are gone. Under `SERIALIZED`
  /// the program must not call MPI itself, nor construct another transport,
  /// while a ddl asynchronous collective is pending.
  bool allows_progress_thread() const noexcept {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level >= MPI_THREAD_MULTIPLE ||
           (level == MPI_THREAD_SERIALIZED && detail::mpi_transports_alive().load(std::memory_order_relaxed) <= 1);
  }

  /// The largest payload a message to or from `peer` carries without a
  /// handshake (0: not known, or not worth cutting for). The step engine
  /// sends a slice of up to 4 of these as eager messages in flight at once
  /// rather than one message that waits for the receiver (Open MPI on one
  /// node: small all-reduces no longer wait for a rendezvous). Peers on this rank's
  /// node get Open MPI's shared-memory eager limit less its header;
  /// `DDL_MPI_EAGER_BYTES` sets it for every peer (0 turns it off; it must
  /// be the same on every rank).
  std::size_t eager_bytes(int peer) const noexcept {
    return peer >= 0 && peer < size_ && (eager_everywhere_ || on_node_[static_cast<std::size_t>(peer)]) ? eager_ : 0;
  }

  /// The largest message the step engine sends to or receives from `peer`
  /// in one piece (0: any size). Peers on other machines reached over TCP
  /// get Open MPI's TCP eager limit less its header (64 KiB by default): a
  /// larger message waits for the receiver's answer, which queues behind
  /// the bulk data the receiver sends the other way on the same socket
  /// (1 MiB chunks stalled so on the emulated two-rack network). Peers on
  /// this node, and machines with an RDMA
  /// device, keep `options::chunk_bytes`. `DDL_MPI_PIECE_BYTES` sets it for
  /// every peer (0 turns it off), on every rank where any rank sets it. The
  /// ranks agree on it at construction (the largest value), so both sides of
  /// a pair cut alike.
  std::size_t piece_bytes(int peer) const noexcept {
    return peer >= 0 && peer < size_ && (piece_everywhere_ || !on_node_[static_cast<std::size_t>(peer)]) ? piece_ : 0;
  }

  // The stage members (`stage`, `peer_stage`, `stages_shared`, `read_peer`,
  // `peer_buffer`, `wait_until`, ...: `detail::stage_access`) come from the
  // base: ranks MPI puts on one node share stages (`find_stages`; a rank
  // with `DDL_MPI_SHM=0` shares with none), and read each other's memory
  // unless a rank sets `DDL_MPI_CMA=0`.

  /// Sends `data` to `peer` under `t` (`MPI_Isend`); the bytes must stay
  /// valid and unchanged until the request completes.
  request isend(int peer, const_bytes data, tag t) {
    refuse_if_broken();
    request r;
    r.peer_ = peer;
    r.send_ = true;
    r.tag_ = t;
    DDL_MPI_CHECK(MPI_Isend(data.data, count_of(data.size), MPI_BYTE, peer, mpi_tag(t), comm_, &r.r_));
    return r;
  }
  /// Receives exactly `data.size` bytes from `peer` under `t` (`MPI_Irecv`).
  request irecv(int peer, mutable_bytes data, tag t) {
    refuse_if_broken();
    request r;
    r.peer_ = peer;
    r.tag_ = t;
    r.bytes_ = data.size;
    DDL_MPI_CHECK(MPI_Irecv(data.data, count_of(data.size), MPI_BYTE, peer, mpi_tag(t), comm_, &r.r_));
    return r;
  }
  /// Receives exactly `data.size` bytes under `t` from whichever rank's
  /// message MPI matches first (`MPI_ANY_SOURCE`; the concept's
  /// `irecv_any`); once complete, the request's `peer()` is the sender.
  request irecv_any(mutable_bytes data, tag t) {
    refuse_if_broken();
    request r;
    r.peer_ = -1;
    r.tag_ = t;
    r.bytes_ = data.size;
    DDL_MPI_CHECK(MPI_Irecv(data.data, count_of(data.size), MPI_BYTE, MPI_ANY_SOURCE, mpi_tag(t), comm_, &r.r_));
    return r;
  }

  /// True (and `req` retired) when it has completed; never blocks. Every
  /// 16th unfinished test looks, as `wait` does, for a peer's notice that it
  /// gave up (then throws) and for a receive's peer in another call.
  bool test(request& req) {
    if (!req.active()) return true;
    int flag = 0;
    MPI_Status st;
    if (const int rc = MPI_Test(&req.r_, &flag, &st); rc != MPI_SUCCESS) failed(req, rc);
    if (flag) {
      finished(req, st);
      return true;
    }
    if (++tests_ % 16 == 0) look_around(req);
    return false;
  }

  /// Polls until `req` completes; throws `timeout_error` naming the peer
  /// after `until` (the request is cancelled first).
  void wait(request& req, deadline until) {
    if (!req.active()) return;
    const auto start = std::chrono::steady_clock::now();
    // A busy-polling rank steals the core its peer needs: MPI_Test 64 times,
    // then yield, then sleep.
    detail::backoff wait_more(64, 448);
    for (unsigned polls = 0;; ++polls) {
      int flag = 0;
      MPI_Status st;
      if (const int rc = MPI_Test(&req.r_, &flag, &st); rc != MPI_SUCCESS) failed(req, rc);
      if (flag) {
        finished(req, st);
        return;
      }
      if (polls % 16 == 15) look_around(req);
      if (const auto now = std::chrono::steady_clock::now(); now >= until) timed_out(req, start, now);
      wait_more.pause();
    }
  }

 private:
  friend class detail::stage_access<mpi_transport>;
  static constexpr const char* transport_name = "mpi_transport";
  std::int64_t pid_of(int q) const { return procs_[static_cast<std::size_t>(q)].pid; }
  // A wait on `req` since `start` passed its deadline at `now`: withdrawn,
  // the timeout reported to the peers, `timeout_error` thrown.
  [[noreturn]] void timed_out(request& req, std::chrono::steady_clock::time_point start,
                              std::chrono::steady_clock::time_point now) {
    const int peer = req.peer_;
    taint("timeout waiting for rank " + std::to_string(peer));
    req.release();
    const double waited = std::chrono::duration<double>(now - start).count();
    std::vector<int> silent = report_timeout(detail::timeout_grace(waited));
    std::string note = stopped_ranks(peer, silent);
    throw timeout_error(peer, "", "", waited, std::move(silent), std::move(note));
  }
  static constexpr int abort_tag = 0, timeout_tag = 1;
  void post_notice_receive() {
    DDL_MPI_CHECK(
        MPI_Irecv(notice_in_, sizeof notice_in_, MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, notices_, &notice_recv_));
  }
  // A wait's looks around (`mpi/watch.hpp`): peers' notices, exited
  // peers, calls under other stamps; and a timeout reported to the peers.
  inline std::vector<int> report_timeout(double grace);
  // MPI failed `req` with `rc`: withdrawn, and thrown as `transport_error`
  // naming the peer. A receive of a call's message longer than it
  // (MPI_ERR_TRUNCATE) is a call mismatch: the ranks disagree on the count.
  [[noreturn]] void failed(request& req, int rc) {
    const int peer = req.peer_;
    const bool send = req.send_;
    const tag t = req.tag_;
    const std::size_t bytes = req.bytes_;
    if (req.r_ != MPI_REQUEST_NULL) req.release();
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    int cls = rc;
    MPI_Error_class(rc, &cls);
    taint("MPI error from rank " + std::to_string(peer));
    std::string what = "mpi_transport: rank " + std::to_string(rank_) + ": the " + (send ? "send to" : "receive from") +
                       " rank " + std::to_string(peer) + " failed: " + std::string(text, static_cast<std::size_t>(len));
    if (cls == MPI_ERR_TRUNCATE)
      what = detail::is_stamped(t) ? "mpi_transport: " + detail::count_mismatch(peer, "more than " + std::to_string(bytes),
                                                                                 rank_, bytes, t)
                                   : what + " (a longer message than the receive: did every rank pass the same count?)";
    throw transport_error(what);
  }
  // A completed request: a receive must have got as many bytes as it posted
  // (MPI accepts a shorter message silently).
  void finished(request& req, const MPI_Status& st) {
    req.r_ = MPI_REQUEST_NULL;
    if (req.send_) return;
    if (req.peer_ < 0) req.peer_ = st.MPI_SOURCE;  // `irecv_any`: the sender
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (static_cast<std::size_t>(got) != req.bytes_) {
      taint("message size mismatch from rank " + std::to_string(req.peer_));
      throw transport_error(
          detail::size_mismatch("mpi_transport", req.peer_, static_cast<std::size_t>(got), rank_, req.bytes_, req.tag_));
    }
  }
  template <class Ready = std::nullptr_t>
  void look_around(request& req, Ready&& ready = nullptr);
  inline std::string stopped_ranks(int peer, const std::vector<int>& silent) const;
  // "rank 2 (pid 4242 on node1)": a rank of this machine, by its process.
  // `peer` is one of this communicator's ranks, else `invalid_argument`.
  void require_rank(int peer) const {
    if (peer < 0 || peer >= size_)
      throw invalid_argument("mpi_transport: no rank " + std::to_string(peer) + " of " + std::to_string(size_));
  }
  std::string process_of(int q) const {
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(host, &len);
    return "rank " + std::to_string(q) + " (pid " + std::to_string(procs_[static_cast<std::size_t>(q)].pid) + " on " +
           std::string(host, static_cast<std::size_t>(std::max(len, 0))) + ")";
  }
  template <class Ready = std::nullptr_t>
  void check_alive(request& req, Ready&& ready = nullptr);
  template <class Ready = std::nullptr_t>
  void check_stamp(request& req, Ready&& ready = nullptr);
  // A wait ended unfinished (messages may still be in flight): the
  // communicators are not freed, and `mpi_session` learns of it.
  void taint(const std::string& why) {
    tainted_ = true;
    detail::note_mpi_failure("rank " + std::to_string(rank_) + ": " + why);
  }
  void refuse_if_broken() {
    if (!broken_.empty()) throw transport_error("mpi_transport: the group is broken (" + broken_ + ")");
  }
  static int count_of(std::size_t bytes) {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      throw invalid_argument("mpi_transport: one message of " + std::to_string(bytes) +
                             " bytes exceeds INT_MAX; lower options.chunk_bytes");
    return static_cast<int>(bytes);
  }
  // ddl tags are 64-bit (`transport/stamp.hpp`); MPI's stop at MPI_TAG_UB
  // (>= 32767; 2^31 - 1 in Open MPI): folded by `detail::narrow_tags`.
  int mpi_tag(tag t) const { return static_cast<int>(narrow_.pack(t)); }
  tag unpack(int m) const { return narrow_.unpack(static_cast<std::uint64_t>(m)); }

  // What the ranks learn of each other at construction (`mpi/peers.hpp`).
  inline void find_eager_peers();
  inline void find_pieces();
  static inline std::size_t payload_under(std::size_t limit) noexcept;
  inline void find_processes();
  inline void find_stages();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int cores_ = 1;                 // see `cores`
  std::vector<detail::process_id> procs_;  // per rank: its process
  std::uint64_t machine_ = 0;              // this process's machine (`detail::process_id`)
  double next_look_ = 0;                   // when `check_alive` looks again (steady seconds)
  int gone_peer_ = -1;                     // the awaited peer the last look found gone; -1: none
  std::vector<char> on_node_;     // per rank: on this rank's node (as MPI sees nodes: MPI_COMM_TYPE_SHARED)
  std::size_t eager_ = 0;         // eager payload between ranks of one node (bytes)
  bool eager_everywhere_ = false;  // DDL_MPI_EAGER_BYTES: for every peer
  std::size_t piece_ = 0;          // largest message to a peer on another machine (bytes; 0: any)
  bool piece_everywhere_ = false;  // DDL_MPI_PIECE_BYTES: for every peer
  int rank_ = 0, size_ = 1, tag_ub_ = 32767;
  detail::narrow_tags narrow_;  // see mpi_tag
  // Failure notices: their own communicator, one receive from any rank
  // always posted, the sends of this rank's own notice.
  MPI_Comm notices_ = MPI_COMM_NULL;
  MPI_Request notice_recv_ = MPI_REQUEST_NULL;
  char notice_in_[256] = {};
  std::string notice_out_;
  std::vector<MPI_Request> notice_sends_;
  std::string broken_;  // why the group is broken; empty while it is not
  unsigned tests_ = 0;   // unfinished `test`s: every 16th looks for notices
  std::vector<double> reported_;  // per rank: when its last timeout report arrived (steady seconds)
  bool tainted_ = false;          // a wait ended unfinished: messages may still be in flight
};

}  // namespace ddl

// The members declared above and defined apart.
#include "ddl/mpi/peers.hpp"
#include "ddl/mpi/watch.hpp"
