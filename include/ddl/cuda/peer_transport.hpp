#pragma once
/// \file
/// `cuda_peer_transport`: ranks are threads of one process, one per GPU (or
/// several per GPU: that is how one GPU tests 1-8 ranks), exchanging device
/// buffers with peer copies. Compile with nvcc; link `ddl::cuda`.
///
/// Stream-ordered, like the rest of the CUDA back-end: a rank's transfers,
/// copies and reductions are queued on the stream of the call's buffers
/// (`ddl::device_view(..., stream)`; before any call, the rank's own
/// `stream()`) and a
/// collective returns once everything is queued. Synchronise that stream
/// before reading the result on the host.
///
/// A message: the sender records a "ready" event on its stream and posts a
/// descriptor; the receiver, on its own thread, matches it (per peer and
/// tag, in posting order), makes its stream wait for "ready", then either
/// copies (`cudaMemcpyPeerAsync`) or, for a receive-and-reduce, launches the
/// reduction reading the peer's memory directly when the two devices can
/// access each other (the same device always can; otherwise
/// `cudaDeviceCanAccessPeer` decides and peer access is enabled), else copies
/// into a scratch buffer first. It records "done"; the sender's wait makes
/// its stream wait for "done" before the buffer may change. Host-side waits
/// (for the peer to post) have deadlines like every transport.
#if !defined(__CUDACC__)
#error "ddl/transport/cuda_peer.hpp: compile this translation unit with nvcc"
#endif
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddl/cuda/runtime.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/transport/threads.hpp"

namespace ddl {

class cuda_peer_fabric;

/// One rank's handle on a `cuda_peer_fabric`; used from its own thread.
class cuda_peer_transport {
 public:
  static constexpr bool device_memory = true;
  /// Each slice goes as one message: the stream orders the work, and chunks
  /// only add API calls. (With 1 MiB chunks an H100 ran 2-8 ranks at 2-5% of
  /// the memory floor; the times fit ~1.4-2.2 us per CUDA call issued, the
  /// ranks' threads taking turns in the driver.)
  static constexpr bool stream_ordered = true;
  /// Planner defaults for ranks sharing GPUs: device memory bandwidth shared
  /// by a peer read, a write and a local read, and one kernel launch.
  static constexpr double default_bandwidth = 200e9;
  static constexpr double default_latency = 10e-6;

  struct message;
  /// What a request refers to (`transport/request.hpp`).
  struct request_fields {
    cuda_peer_transport* owner_ = nullptr;
    std::shared_ptr<message> msg_;
    bool active() const noexcept { return msg_ != nullptr; }
    inline void withdraw() noexcept;
  };
  class request : public detail::request_handle<request_fields> {
    friend class cuda_peer_transport;
  };

  int rank() const noexcept { return rank_; }
  /// This rank gives the group up (the concept's `abort`).
  inline void abort(const std::string& why);
  inline int size() const noexcept;
  int device() const noexcept { return ctx_.device; }
  /// The stream transfers and local operations go on now.
  cudaStream_t stream() const noexcept { return ctx_.stream; }

  inline request isend(int peer, const_bytes data, tag t);
  inline request irecv(int peer, mutable_bytes data, tag t);
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);
  inline void wait(request& r, deadline until);
  inline bool test(request& r);
  /// Device operations on the buffers' stream (which transfers then use too).
  inline memory_ops memory(const location& where);

  struct message {
    // set by the sender
    tag tg = 0;
    const std::byte* src = nullptr;
    std::size_t bytes = 0;
    int src_rank = 0, src_device = 0;
    cudaEvent_t ready = nullptr;
    // set by the receiver when it queues the transfer
    std::atomic<bool> consumed{false};
    cudaEvent_t done = nullptr;
    std::string error;
    // receive side
    bool recv = false, fused = false, matched = false;
    int peer = 0;
    std::byte* dst = nullptr;
    const std::byte* local = nullptr;
    reduction red{};
    std::shared_ptr<message> send;  // the matched send
  };

 private:
  friend class cuda_peer_fabric;
  inline bool try_match();
  inline void check_stamp(request& req);
  inline void enqueue(message& r, message& s);
  cuda_peer_fabric* fab_ = nullptr;
  int rank_ = 0;
  cudaStream_t own_stream_ = nullptr;
  cuda::stream_context ctx_{};
  std::deque<std::shared_ptr<message>> pending_recvs_;
  std::byte* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  unsigned recv_polls_ = 0;  // `check_stamp` looks every 16th poll of an unmatched receive
};

/// The ranks, their devices, and the mailboxes between them.
class cuda_peer_fabric {
 public:
  /// \param ranks how many; \param devices the device of each rank
  ///        (default: rank % device count).
  explicit cuda_peer_fabric(int ranks, std::vector<int> devices = {}) : n_(ranks), devices_(std::move(devices)) {
    const int count = cuda::device_count();
    if (count == 0) throw transport_error("cuda_peer_fabric: no CUDA device");
    if (ranks < 1) throw invalid_argument("cuda_peer_fabric: needs at least one rank");
    if (devices_.empty())
      for (int r = 0; r < ranks; ++r) devices_.push_back(r % count);
    if (static_cast<int>(devices_.size()) != ranks)
      throw invalid_argument("cuda_peer_fabric: " + std::to_string(devices_.size()) + " devices for " +
                             std::to_string(ranks) + " ranks");
    for (int d : devices_)
      if (d < 0 || d >= count) throw invalid_argument("cuda_peer_fabric: no device " + std::to_string(d));
    // Peer access where the hardware allows it (both directions).
    direct_.assign(static_cast<std::size_t>(count * count), false);
    for (int a = 0; a < count; ++a)
      for (int b = 0; b < count; ++b) {
        if (a == b) {
          direct_[a * count + b] = true;
          continue;
        }
        int can = 0;
        DDL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
        if (can) {
          cuda::device_guard g(a);
          const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
          if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) direct_[a * count + b] = true;
          (void)cudaGetLastError();
        }
      }
    count_ = count;
    sends_.resize(static_cast<std::size_t>(ranks) * ranks);
  }

  int size() const noexcept { return n_; }
  int device_of(int rank) const { return devices_.at(static_cast<std::size_t>(rank)); }
  /// True when rank `a`'s device reads rank `b`'s memory directly.
  bool direct(int a, int b) const { return direct_[devices_[a] * count_ + devices_[b]]; }

  /// Runs `f(cuda_peer_transport&)` on one thread per rank (device set, a
  /// stream created) and joins them (`detail::run_rank_threads`): the first
  /// rank to throw makes the others' waits throw "rank k failed: ...", and
  /// its own exception is rethrown here.
  template <class F>
  void run(F&& f) {
    std::vector<cuda_peer_transport> ts(static_cast<std::size_t>(n_));
    aborted_.store(false);
    detail::run_rank_threads(
        n_,
        [&](int r) {
          cuda_peer_transport& t = ts[static_cast<std::size_t>(r)];
          struct release {  // the rank's stream and scratch, however it ends
            cuda_peer_transport& t;
            ~release() {
              if (t.scratch_) (void)cudaFree(t.scratch_);
              if (t.own_stream_) (void)cudaStreamDestroy(t.own_stream_);
            }
          } guard{t};
          DDL_CUDA_CHECK(cudaSetDevice(devices_[r]));
          t.fab_ = this;
          t.rank_ = r;
          DDL_CUDA_CHECK(cudaStreamCreateWithFlags(&t.own_stream_, cudaStreamNonBlocking));
          t.ctx_ = {devices_[r], t.own_stream_};
          f(t);
          DDL_CUDA_CHECK(cudaStreamSynchronize(t.own_stream_));
        },
        [&](int r, const std::string& why) { abort(r, why); });
  }
  /// Marks the fabric failed (the first call wins): every rank's waits throw
  /// `transport_error` naming `rank` and `why`.
  void abort(int rank, const std::string& why) {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (aborted_.load(std::memory_order_acquire)) return;
    abort_reason_ = "cuda_peer_transport: rank " + std::to_string(rank) + " failed: " + why;
    aborted_.store(true, std::memory_order_release);
  }
  template <class F>
  static void run(int ranks, F&& f) {
    cuda_peer_fabric fab(ranks);
    fab.run(std::forward<F>(f));
  }

 private:
  friend class cuda_peer_transport;
  using queue = std::deque<std::shared_ptr<cuda_peer_transport::message>>;
  queue& sends(int from, int to) { return sends_[static_cast<std::size_t>(from) * n_ + to]; }

  int n_ = 0, count_ = 0;
  std::vector<int> devices_;
  std::vector<bool> direct_;
  std::mutex mu_;
  std::vector<queue> sends_;
  std::atomic<bool> aborted_{false};
  std::mutex abort_mutex_;
  std::string abort_reason_;  // written once, before aborted_ is set
};

inline int cuda_peer_transport::size() const noexcept { return fab_->n_; }
inline void cuda_peer_transport::abort(const std::string& why) { fab_->abort(rank_, why); }

inline memory_ops cuda_peer_transport::memory(const location& where) {
  if (where.space != memory_space::cuda)
    throw invalid_argument("cuda_peer_transport moves device buffers; use local_transport for host memory");
  if (where.device >= 0 && where.device != ctx_.device)
    throw invalid_argument("cuda_peer_transport: rank " + std::to_string(rank_) + " runs on device " +
                           std::to_string(ctx_.device) + " but was handed memory of device " +
                           std::to_string(where.device));
  ctx_.stream = static_cast<cudaStream_t>(where.stream);  // null: the legacy default stream, as CUDA means it
  return cuda::device_memory_ops(&ctx_);
}

inline cuda_peer_transport::request cuda_peer_transport::isend(int peer, const_bytes data, tag t) {
  if (peer < 0 || peer >= size() || peer == rank_)
    throw invalid_argument("cuda_peer_transport: bad peer " + std::to_string(peer));
  auto m = std::make_shared<message>();
  m->tg = t;
  m->src = data.data;
  m->bytes = data.size;
  m->src_rank = rank_;
  m->src_device = ctx_.device;
  DDL_CUDA_CHECK(cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming));
  DDL_CUDA_CHECK(cudaEventRecord(m->ready, ctx_.stream));
  {
    std::lock_guard<std::mutex> lk(fab_->mu_);
    fab_->sends(rank_, peer).push_back(m);
  }
  request r;
  r.owner_ = this;
  r.msg_ = std::move(m);
  return r;
}

inline cuda_peer_transport::request cuda_peer_transport::irecv(int peer, mutable_bytes data, tag t) {
  return irecv_reduce(peer, data, const_bytes{}, reduction{}, t);
}

/// With `local.data` null: a plain receive.
inline cuda_peer_transport::request cuda_peer_transport::irecv_reduce(int peer, mutable_bytes dst, const_bytes local,
                                                                      reduction red, tag t) {
  if (peer < 0 || peer >= size() || peer == rank_)
    throw invalid_argument("cuda_peer_transport: bad peer " + std::to_string(peer));
  auto m = std::make_shared<message>();
  m->recv = true;
  m->fused = local.data != nullptr;
  m->peer = peer;
  m->tg = t;
  m->dst = dst.data;
  m->local = local.data;
  m->bytes = dst.size;
  m->red = red;
  pending_recvs_.push_back(m);
  try_match();
  request r;
  r.owner_ = this;
  r.msg_ = std::move(m);
  return r;
}

// Matches pending receives in posting order against the senders' queues.
inline bool cuda_peer_transport::try_match() {
  bool any = false;
  std::lock_guard<std::mutex> lk(fab_->mu_);
  for (auto it = pending_recvs_.begin(); it != pending_recvs_.end();) {
    message& r = **it;
    auto& q = fab_->sends(r.peer, rank_);
    auto s = q.begin();
    while (s != q.end() && (*s)->tg != r.tg) ++s;
    // An earlier pending receive from the same peer and tag goes first.
    bool earlier = false;
    for (auto e = pending_recvs_.begin(); e != it; ++e)
      earlier = earlier || ((*e)->peer == r.peer && (*e)->tg == r.tg);
    if (s == q.end() || earlier) {
      ++it;
      continue;
    }
    r.send = *s;
    q.erase(s);
    enqueue(r, *r.send);
    r.matched = true;
    any = true;
    it = pending_recvs_.erase(it);
  }
  return any;
}

// An unmatched receive whose peer has posted this rank a message of the
// same call under another stamp (`transport/stamp.hpp`): the ranks called
// different collectives (or dtypes, ops, counts); waiting cannot help. The
// receive is withdrawn and `mismatch_error` names both ranks and the field;
// the communicator then gives the group up, so every rank's call ends with
// it. Only the awaited peer's queue is looked at, as on the other
// transports: another rank's message may belong to a later call.
inline void cuda_peer_transport::check_stamp(request& req) {
  const message& m = *req.msg_;
  if (!detail::is_stamped(m.tg)) return;
  tag other = 0;
  {
    std::lock_guard<std::mutex> lk(fab_->mu_);
    for (const auto& s : fab_->sends(m.peer, rank_))
      if (detail::stamps_disagree(m.tg, s->tg)) {
        other = s->tg;
        break;
      }
  }
  if (other == 0) return;
  const int peer = m.peer;
  const tag mine = m.tg;
  req.release();
  throw mismatch_error("cuda_peer_transport: " + detail::stamp_mismatch(rank_, mine, peer, other));
}

inline void cuda_peer_transport::enqueue(message& r, message& s) {
  if (s.bytes != r.bytes) {
    r.error = s.error = detail::size_mismatch("cuda_peer_transport", s.src_rank, s.bytes, rank_, r.bytes, r.tg);
    s.consumed.store(true, std::memory_order_release);
    return;
  }
  cudaStream_t st = ctx_.stream;
  DDL_CUDA_CHECK(cudaStreamWaitEvent(st, s.ready, 0));
  (void)cudaEventDestroy(s.ready);  // released once the wait has passed it
  s.ready = nullptr;
  if (r.bytes) {
    const bool direct = fab_->direct(rank_, s.src_rank);
    if (!r.fused) {
      DDL_CUDA_CHECK(cudaMemcpyPeerAsync(r.dst, ctx_.device, s.src, s.src_device, r.bytes, st));
    } else {
      const std::byte* src = s.src;
      if (!direct) {  // copy into scratch first
        if (scratch_bytes_ < r.bytes) {
          if (scratch_) DDL_CUDA_CHECK(cudaFree(scratch_));
          void* p = nullptr;
          DDL_CUDA_CHECK(cudaMalloc(&p, r.bytes));
          scratch_ = static_cast<std::byte*>(p);
          scratch_bytes_ = r.bytes;
        }
        DDL_CUDA_CHECK(cudaMemcpyPeerAsync(scratch_, ctx_.device, s.src, s.src_device, r.bytes, st));
        src = scratch_;
      }
      const std::size_t count = r.bytes / size_of(r.red.type);
      if (r.red.received_first) cuda::reduce(r.dst, src, r.local, count, r.red, st);
      else cuda::reduce(r.dst, r.local, src, count, r.red, st);
    }
  }
  DDL_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  DDL_CUDA_CHECK(cudaEventRecord(s.done, st));
  s.consumed.store(true, std::memory_order_release);
}

inline bool cuda_peer_transport::test(request& req) {
  if (!req.msg_) return true;
  message& m = *req.msg_;
  if (m.recv) {
    if (!m.matched) try_match();
    if (!m.matched) {
      if (++recv_polls_ % 16 == 0) check_stamp(req);
      return false;
    }
    std::string err = m.error;
    req.msg_.reset();
    if (!err.empty()) throw transport_error(err);
    return true;
  }
  if (!m.consumed.load(std::memory_order_acquire)) return false;
  if (m.done) {
    DDL_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, m.done, 0));  // the peer has read the buffer
    (void)cudaEventDestroy(m.done);
  }
  std::string err = m.error;
  req.msg_.reset();
  if (!err.empty()) throw transport_error(err);
  return true;
}

inline void cuda_peer_transport::wait(request& req, deadline until) {
  if (!req.msg_) return;
  const auto start = std::chrono::steady_clock::now();
  detail::backoff b;
  const int peer = req.msg_->recv ? req.msg_->peer : -1;
  for (;;) {
    if (test(req)) return;
    if (fab_->aborted_.load(std::memory_order_acquire)) throw transport_error(fab_->abort_reason_);
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) throw timeout_error(peer, "", "", std::chrono::duration<double>(now - start).count());
    b.pause();
  }
}

inline void cuda_peer_transport::request_fields::withdraw() noexcept {
  if (!owner_) return;
  try {
    cuda_peer_transport& t = *owner_;
    std::lock_guard<std::mutex> lk(t.fab_->mu_);
    message& m = *msg_;
    if (m.recv && !m.matched) {
      for (auto it = t.pending_recvs_.begin(); it != t.pending_recvs_.end(); ++it)
        if (it->get() == &m) {
          t.pending_recvs_.erase(it);
          break;
        }
    } else if (!m.recv && !m.consumed.load()) {
      // Still queued for the peer: withdraw it (its memory may go away).
      for (int p = 0; p < t.size(); ++p) {
        auto& q = t.fab_->sends(t.rank_, p);
        for (auto it = q.begin(); it != q.end(); ++it)
          if (it->get() == &m) {
            q.erase(it);
            if (m.ready) (void)cudaEventDestroy(m.ready);
            break;
          }
      }
    } else if (!m.recv && m.done) {
      (void)cudaStreamWaitEvent(t.ctx_.stream, m.done, 0);
      (void)cudaEventDestroy(m.done);
    }
  } catch (...) {
  }
}

}  // namespace ddl
