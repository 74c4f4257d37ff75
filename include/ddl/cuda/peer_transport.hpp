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
/// (for the peer to post) have deadlines like every transport. The events
/// come from a pool per device (`cuda_peer_fabric`), not created per
/// message. A message between two host buffers (the direct strategies'
/// address tables) is copied on the host when it is matched; its events
/// still order the two streams.
///
/// The ranks share an address space and, on one device or on devices with
/// peer access, read each other's buffers (`peer_memory`): `ddl::one_shot`
/// and `ddl::two_shot` run over it, each rank reducing its peers' buffers
/// in one kernel (`cuda::reduce_many`), their phases ordered by the
/// messages' events, so nothing waits on the host. A one_shot call of at
/// most `flagged_bytes` sends no message at all: one kernel per rank (a
/// block per 4 KiB, up to 16) copies its input into a slot of the rank's
/// flag region, raises a counter there, spins on its peers' counters and
/// reduces their slots
/// (`flagged_all_reduce`; ranks of one fabric on one device or with peer
/// access, at most `cuda::kernels::many_max`; `DDL_CUDA_FLAGGED=0` turns it
/// off). The ranks' threads meet on the host before the launch (where they
/// compare the calls' stamps) and after it, so every rank's kernel is queued
/// before any rank returns: a spinning kernel never waits for a peer whose
/// thread is stuck in a call that waits for the whole device (`cudaFree`),
/// which deadlocked until the deadline when the kernels were launched
/// unmet (H200, bench/results/gpu-h200.md). A two_shot
/// all-reduce of any size goes the same way (`flagged_two_shot`): the
/// threads meet and trade their buffers' addresses, and one kernel per rank
/// (the ranks of a device share two blocks per multiprocessor, so that all
/// are resident at once) reduces its block
/// of every input where it lies and gathers the other reduced blocks, the
/// kernels meeting three times through counters in the flag regions; its
/// reduce-scatter and all-gather keep the messages. A rank that enters
/// another collective (by messages) meanwhile is found at the deadline,
/// not at once as between messages' stamps.
#if !defined(__CUDACC__)
#error "ddl/cuda/peer_transport.hpp: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
#endif
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddl/cuda/runtime.hpp"
#include "ddl/detail/event.hpp"
#include "ddl/topology/topology.hpp"
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
  /// Every rank's buffers are readable by every other rank's kernels where
  /// the devices allow it (`peers_readable`): the direct strategies apply.
  static constexpr bool peer_memory = true;
  /// The planner's link costs (`topology()`): device memory bandwidth shared
  /// by a peer read, a write and a local read; and a step's latency per rank
  /// of the fabric, since the ranks' threads take turns in the driver.
  static constexpr double link_bandwidth = 200e9;
  static constexpr double step_latency_per_rank = 10e-6;
  /// A flagged call's meeting costs half a step's latency: a step of
  /// messages takes about twice what the latency per rank says (H100, 8 B:
  /// recursive doubling 43-50, 131-160 and 438-528 us over 1, 2 and 3 steps
  /// at 2, 4 and 8 ranks), a flagged one_shot about as much (17-19, 32-33,
  /// 46-48 us); with it auto ran within 1.03x of the best at 8 B-256 MiB
  /// (`ddl-cuda-cost-fit`, bench/results/gpu-h100.md).
  static constexpr double flagged_latency = 0.5;

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
  /// The levels `auto_strategy` and the broadcast price on: `DDL_TOPOLOGY`
  /// where set, else one level of `link_bandwidth` whose step latency is
  /// `step_latency_per_rank` times the ranks. A step every rank takes costs
  /// about n times one rank's CUDA calls: on one H100, 1 MiB, a step of the
  /// ring, recursive or halving doubling took 26-31 us at 2 ranks, 57-67 at
  /// 4, 139-161 at 8; priced at a flat 10 us the planner chose halving
  /// doubling at 4-16 MiB where recursive doubling ran 1.5-2x faster
  /// (bench/results/gpu-h100.md).
  inline ddl::topology topology() const;
  int device() const noexcept { return ctx_.device; }
  /// Whether every rank's device reads every other's memory (one device, or
  /// peer access between all of them): `one_shot` and `two_shot` need it.
  inline bool peers_readable() const noexcept;
  /// The stream transfers and local operations go on now.
  cudaStream_t stream() const noexcept { return ctx_.stream; }

  inline request isend(int peer, const_bytes data, tag t);
  inline request irecv(int peer, mutable_bytes data, tag t);
  inline request irecv_reduce(int peer, mutable_bytes dst, const_bytes local, reduction r, tag t);
  inline void wait(request& r, deadline until);
  inline bool test(request& r);
  /// Device operations on the buffers' stream (which transfers then use too).
  inline memory_ops memory(const location& where);

  /// The largest one_shot call `flagged_all_reduce` takes (bytes per rank).
  static constexpr std::size_t flagged_bytes = cuda::kernels::flag_slot;
  /// Whether `flagged_all_reduce` is there (every rank's device reads every
  /// other's, at most `many_max` ranks): the same on every rank.
  inline bool flagged_ready() const noexcept;
  /// One one_shot all-reduce of `count` elements (at most `flagged_bytes`)
  /// through the ranks' flag regions: one kernel on the stream, no message
  /// (`cuda::kernels::flagged_all_reduce`); `avg` divided. The ranks' threads
  /// meet twice on the host (spinning on atomics, no CUDA call): before the
  /// launch, where a peer whose call differs (`stamp`: collective, dtype, op,
  /// count; or its byte count) is a `mismatch_error` on every rank and
  /// nothing is launched, and after it. A peer that does not come within
  /// `timeout` is a `timeout_error` naming it; an abort, a `transport_error`.
  /// What the kernel itself finds (a peer's kernel that never runs, within
  /// `timeout`; an abort) leaves `out` alone and is reported by this rank's
  /// next flagged call and by `cuda_peer_fabric::run` (`check_flagged`).
  inline void flagged_all_reduce(const std::byte* in, std::byte* out, std::size_t count, reduction red, tag stamp,
                                 std::chrono::nanoseconds timeout);
  /// One two_shot all-reduce of `count` elements without a message, at any
  /// size: the ranks' threads meet on the host as for `flagged_all_reduce`
  /// (comparing their calls and exchanging their buffers' addresses), then
  /// one kernel per rank (`cuda::kernels::flagged_two_shot`, as many blocks
  /// on every rank) reduces its block of every rank's input where it lies and
  /// gathers the others' reduced blocks, the kernels meeting through
  /// counters in the flag regions. Errors as `flagged_all_reduce`.
  inline void flagged_two_shot(const std::byte* in, std::byte* out, std::size_t count, reduction red, tag stamp,
                               std::chrono::nanoseconds timeout);
  /// Throws what a flagged call of this rank found, if anything (see above).
  inline void check_flagged() const;

  struct message {
    // set by the sender
    tag tg = 0;
    const std::byte* src = nullptr;
    std::size_t bytes = 0;
    int src_rank = 0, src_device = 0;
    cudaEvent_t ready = nullptr;
    int done_device = 0;  // where `done` was recorded (the receiver's device)
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
  inline void meet(std::uint64_t at, std::chrono::steady_clock::time_point until, const char* why);
  // A flagged call as `enter_flagged` opened it: the rank's call number, the
  // host-side deadline, and the kernel's error words and timeout.
  struct flagged_call {
    std::uint64_t k = 0;
    std::chrono::steady_clock::time_point until;
    volatile unsigned long long* err = nullptr;
    unsigned long long ns = 0;
  };
  inline flagged_call enter_flagged(const char* kind, const std::byte* in, std::byte* out, std::size_t bytes,
                                    std::size_t limit, tag stamp, std::chrono::nanoseconds timeout);
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
    all_direct_ = true;
    for (int a : devices_)
      for (int b : devices_) all_direct_ = all_direct_ && direct_[static_cast<std::size_t>(a * count + b)];
    sends_.resize(static_cast<std::size_t>(ranks) * ranks);
    events_.resize(static_cast<std::size_t>(count));
    // Flag regions (device memory, zeroed) and the mapped host words the
    // flagged kernels report through, where every rank reads every other.
    void* h = nullptr;
    const std::size_t words = (1 + static_cast<std::size_t>(ranks) * 8) * sizeof(std::uint64_t);
    DDL_CUDA_CHECK(cudaHostAlloc(&h, words, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(h, 0, words);
    host_words_ = static_cast<int*>(h);
    if (all_direct_ && ranks <= cuda::kernels::many_max) {
      for (int r = 0; r < ranks; ++r) {
        cuda::device_guard g(devices_[static_cast<std::size_t>(r)]);
        void* p = nullptr;
        DDL_CUDA_CHECK(cudaMalloc(&p, cuda::kernels::flag_region_bytes));
        DDL_CUDA_CHECK(cudaMemset(p, 0, cuda::kernels::flag_header));
        regions_.base[r] = static_cast<std::byte*>(p);
      }
      DDL_CUDA_CHECK(cudaDeviceSynchronize());
      // flagged_two_shot's blocks per rank: each device's multiprocessors
      // times the blocks that surely fit on one, shared by its ranks; the
      // fewest of any device, so every rank launches as many.
      for (int r = 0; r < ranks; ++r) {
        const int d = devices_[static_cast<std::size_t>(r)];
        int sms = 0;
        DDL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
        const auto on_d = static_cast<unsigned>(std::count(devices_.begin(), devices_.end(), d));
        const unsigned b = static_cast<unsigned>(sms) * cuda::kernels::two_shot_blocks_per_sm / on_d;
        two_shot_blocks_ = std::min(two_shot_blocks_, b < 1 ? 1u : b);
      }
      const char* off = std::getenv("DDL_CUDA_FLAGGED");
      flagged_ = !(off && std::string(off) == "0");
      seats_.reset(new seat[static_cast<std::size_t>(ranks)]);
    }
  }
  cuda_peer_fabric(const cuda_peer_fabric&) = delete;
  cuda_peer_fabric& operator=(const cuda_peer_fabric&) = delete;
  ~cuda_peer_fabric() {
    for (auto& pool : events_)
      for (cudaEvent_t e : pool) (void)cudaEventDestroy(e);
    for (int r = 0; r < cuda::kernels::many_max; ++r)
      if (regions_.base[r]) (void)cudaFree(regions_.base[r]);
    if (host_words_) (void)cudaFreeHost(host_words_);
  }

  int size() const noexcept { return n_; }
  int device_of(int rank) const { return devices_.at(static_cast<std::size_t>(rank)); }
  /// True when rank `a`'s device reads rank `b`'s memory directly.
  bool direct(int a, int b) const { return direct_[devices_[a] * count_ + devices_[b]]; }
  /// True when every rank's device reads every other rank's memory directly.
  bool all_direct() const noexcept { return all_direct_; }

  /// Runs `f(cuda_peer_transport&)` on one thread per rank (device set, a
  /// stream created) and joins them (`detail::run_rank_threads`): the first
  /// rank to throw makes the others' waits throw "rank k failed: ...", and
  /// its own exception is rethrown here.
  template <class F>
  void run(F&& f) {
    std::vector<cuda_peer_transport> ts(static_cast<std::size_t>(n_));
    aborted_.store(false);
    *reinterpret_cast<volatile int*>(host_words_) = 0;
    for (int r = 0; r < n_; ++r) err_of(r)[0] = 0;
    // A run that ended with the ranks' flagged calls out of step leaves the
    // counters so: later runs go without them.
    if (flagged_)
      for (int r = 1; r < n_; ++r)
        if (seats_[static_cast<std::size_t>(r)].calls != seats_[0].calls ||
            seats_[static_cast<std::size_t>(r)].two_shot_calls != seats_[0].two_shot_calls ||
            seats_[static_cast<std::size_t>(r)].one_shot_blocks != seats_[0].one_shot_blocks)
          flagged_ = false;
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
          t.check_flagged();  // a flagged call's error, found after the call had returned
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
    if (host_words_) *reinterpret_cast<volatile int*>(host_words_) = 1;  // flagged kernels stop waiting
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
  bool all_direct_ = true;
  // Flagged calls: each rank's flag region, whether they are there, and
  // mapped host words: the abort flag (an int in the first 8 bytes), then 8
  // words per rank (`kernels::flagged_all_reduce`'s `err`: code, peer).
  cuda::kernels::flag_regions regions_{};
  bool flagged_ = false;
  unsigned two_shot_blocks_ = ~0u;  // flagged_two_shot's blocks per rank (set with the regions)
  // Where the ranks' threads meet around a flagged call: per rank, how far
  // it has come (2k - 1: in call k; 2k: call k launched) and its call.
  struct alignas(64) seat {
    std::atomic<std::uint64_t> at{0};
    std::uint64_t calls = 0;  // the rank's flagged calls so far (one_shot's slot: calls % 2)
    std::uint64_t two_shot_calls = 0;  // of them, two_shot's (its device counters' value / blocks)
    std::uint64_t one_shot_blocks = 0;  // the blocks of one_shot's (its device counter's value)
    std::uint64_t bytes = 0;
    std::uint64_t stamp = 0;
    const char* kind = nullptr;  // the strategy of the call ("one_shot", "two_shot")
    const std::byte* in = nullptr;  // the call's buffers (two_shot reads its peers')
    std::byte* out = nullptr;
  };
  std::unique_ptr<seat[]> seats_;
  int* host_words_ = nullptr;
  volatile unsigned long long* err_of(int rank) const noexcept {
    auto* w = reinterpret_cast<unsigned long long*>(reinterpret_cast<char*>(host_words_) + sizeof(std::uint64_t));
    return w + static_cast<std::size_t>(rank) * 8;
  }
  std::mutex mu_;
  // Events no message holds, per device: re-recorded rather than created per
  // message (a stream that waited on one keeps the record it waited for).
  std::vector<std::vector<cudaEvent_t>> events_;
  std::mutex events_mu_;
  /// An event of `device`, the calling thread's current device.
  cudaEvent_t take_event(int device) {
    {
      std::lock_guard<std::mutex> lk(events_mu_);
      auto& pool = events_[static_cast<std::size_t>(device)];
      if (!pool.empty()) {
        cudaEvent_t e = pool.back();
        pool.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    DDL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give_event(int device, cudaEvent_t e) noexcept {
    if (!e) return;
    try {
      std::lock_guard<std::mutex> lk(events_mu_);
      events_[static_cast<std::size_t>(device)].push_back(e);
    } catch (...) {
      (void)cudaEventDestroy(e);
    }
  }
  std::vector<queue> sends_;
  std::atomic<bool> aborted_{false};
  std::mutex abort_mutex_;
  std::string abort_reason_;  // written once, before aborted_ is set
};

inline int cuda_peer_transport::size() const noexcept { return fab_->n_; }
inline bool cuda_peer_transport::peers_readable() const noexcept { return fab_->all_direct(); }
inline ddl::topology cuda_peer_transport::topology() const {
  return ddl::topology::from_env(size(),
                                 ddl::topology::uniform(size(), link_bandwidth, step_latency_per_rank * size()));
}
inline bool cuda_peer_transport::flagged_ready() const noexcept { return fab_->flagged_; }

inline void cuda_peer_transport::check_flagged() const {
  const volatile unsigned long long* e = fab_->err_of(rank_);
  const unsigned long long code = e[0];
  if (code == 0) return;
  if (code == 3) throw transport_error("cuda_peer_transport: a call through the flag regions: " + fab_->abort_reason_);
  throw timeout_error(static_cast<int>(e[1]), "a flagged call (one_shot, two_shot): the peer's kernel", "all_reduce",
                      0.0);
}

// Marks this rank at `at` and waits until every rank has come that far
// (`timeout_error` naming the first missing one at `until`; an abort ends it).
inline void cuda_peer_transport::meet(std::uint64_t at, std::chrono::steady_clock::time_point until, const char* why) {
  auto* seats = fab_->seats_.get();
  seats[rank_].at.store(at, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  detail::backoff b;
  for (int p = 0; p < size(); ++p) {
    while (seats[p].at.load(std::memory_order_acquire) < at) {
      if (fab_->aborted_.load(std::memory_order_acquire)) throw transport_error(fab_->abort_reason_);
      const auto now = std::chrono::steady_clock::now();
      if (now >= until)
        throw timeout_error(p, why, "all_reduce", std::chrono::duration<double>(now - start).count());
      b.pause();
    }
  }
}

// A flagged call's start, shared by one_shot's and two_shot's: errors found
// earlier, then the meeting where every rank is in this call with the same
// call (strategy, stamp, bytes) and has posted its buffers. Returns the
// rank's flagged call number k (the meetings at 2k - 1 and 2k), the call's
// deadline `timeout` from now, and what its kernel reports errors through.
inline cuda_peer_transport::flagged_call cuda_peer_transport::enter_flagged(const char* kind, const std::byte* in,
                                                                            std::byte* out, std::size_t bytes,
                                                                            std::size_t limit, tag stamp,
                                                                            std::chrono::nanoseconds timeout) {
  flagged_call call;
  call.until = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  call.err = fab_->err_of(rank_);
  call.ns = static_cast<unsigned long long>(timeout.count() > 0 ? timeout.count() : 0);
  const auto until = call.until;
  check_flagged();
  if (fab_->aborted_.load(std::memory_order_acquire)) throw transport_error(fab_->abort_reason_);
  auto what = [&] { return std::string("cuda_peer_transport: ") + kind + " through the flag regions: "; };
  if (!fab_->flagged_)
    throw invalid_argument(what() + "this fabric has none (devices without peer access, more than " +
                           std::to_string(cuda::kernels::many_max) + " ranks, or DDL_CUDA_FLAGGED=0)");
  if (bytes > limit)
    throw invalid_argument(what() + std::to_string(bytes) + " bytes; they take at most " + std::to_string(limit));
  auto* seats = fab_->seats_.get();
  cuda_peer_fabric::seat& me = seats[rank_];
  const std::uint64_t k = call.k = ++me.calls;
  me.bytes = bytes;
  me.stamp = stamp;
  me.kind = kind;
  me.in = in;
  me.out = out;
  meet(2 * k - 1, until, "flagged call: peers entering the call");
  for (int p = 0; p < size(); ++p) {
    const cuda_peer_fabric::seat& them = seats[p];
    const bool same_kind = std::strcmp(them.kind, kind) == 0;
    if (them.stamp == stamp && them.bytes == bytes && same_kind) continue;
    if (!same_kind)
      throw mismatch_error(what() + detail::mismatch_words + detail::describe_tag(stamp) + ": rank " +
                           std::to_string(rank_) + " runs " + kind + ", rank " + std::to_string(p) + " " + them.kind);
    if (detail::stamps_disagree(stamp, them.stamp) || them.bytes == bytes)
      throw mismatch_error(what() + detail::stamp_mismatch(rank_, stamp, p, them.stamp));
    throw mismatch_error(what() + detail::mismatch_words + detail::describe_tag(stamp) +
                         ": ranks disagree on the input count: rank " + std::to_string(rank_) + " passed " +
                         std::to_string(bytes) + " bytes, rank " + std::to_string(p) + " " +
                         std::to_string(them.bytes));
  }
  return call;
}

inline void cuda_peer_transport::flagged_all_reduce(const std::byte* in, std::byte* out, std::size_t count,
                                                    reduction red, tag stamp, std::chrono::nanoseconds timeout) {
  const std::size_t bytes = count * size_of(red.type);
  const flagged_call call = enter_flagged("one_shot", in, out, bytes, flagged_bytes, stamp, timeout);
  // A block per `one_shot_bytes_per_block`, no more than fit with the
  // other ranks' (`two_shot_blocks_`, of larger blocks) or one_shot's cap.
  const auto wanted = static_cast<unsigned>((bytes + cuda::kernels::one_shot_bytes_per_block - 1) /
                                            cuda::kernels::one_shot_bytes_per_block);
  const unsigned blocks =
      std::max(1u, std::min({wanted, cuda::kernels::one_shot_max_blocks, fab_->two_shot_blocks_}));
  const std::uint64_t target = fab_->seats_[static_cast<std::size_t>(rank_)].one_shot_blocks += blocks;
  const int n = size();
  visit_dtype(red.type, [&](auto tg) {
    using T = decltype(tg);
    visit_op(red.oper, [&](auto f) {
      cuda::kernels::flagged_all_reduce<T><<<blocks, cuda::kernels::one_shot_threads, 0, ctx_.stream>>>(
          reinterpret_cast<T*>(out), reinterpret_cast<const T*>(in), count, fab_->regions_, n, rank_, call.k, target,
          call.ns, reinterpret_cast<const volatile int*>(fab_->host_words_), call.err, red.oper == op::avg, f);
    });
  });
  DDL_CUDA_CHECK(cudaGetLastError());
  // Meet again: no rank returns (to a call that may wait for the whole
  // device) before every rank's kernel is queued.
  meet(2 * call.k, call.until, "flagged call: peers launching");
}

inline void cuda_peer_transport::flagged_two_shot(const std::byte* in, std::byte* out, std::size_t count,
                                                  reduction red, tag stamp, std::chrono::nanoseconds timeout) {
  const std::size_t es = size_of(red.type);
  const flagged_call call = enter_flagged("two_shot", in, out, count * es, ~std::size_t{0}, stamp, timeout);
  const std::uint64_t calls = ++fab_->seats_[static_cast<std::size_t>(rank_)].two_shot_calls;
  const int n = size();
  cuda::kernels::peer_buffers b{};
  std::uintptr_t bits = 0;
  for (int p = 0; p < n; ++p) {
    const auto& them = fab_->seats_[static_cast<std::size_t>(p)];
    b.in[p] = them.in;
    b.out[p] = them.out;
    bits |= reinterpret_cast<std::uintptr_t>(them.in) | reinterpret_cast<std::uintptr_t>(them.out);
  }
  // Rank r's block: [r piece, (r + 1) piece), piece a multiple of 16
  // elements so the blocks keep 16-byte vectors whole.
  std::size_t piece = (count + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  piece = (piece + 15) / 16 * 16;
  visit_dtype(red.type, [&](auto tg) {
    using T = decltype(tg);
    visit_op(red.oper, [&](auto f) {
      cuda::kernels::flagged_two_shot<T>
          <<<fab_->two_shot_blocks_, cuda::kernels::two_shot_threads, 0, ctx_.stream>>>(
              b, count, piece, fab_->regions_, n, rank_, calls, call.ns,
              reinterpret_cast<const volatile int*>(fab_->host_words_), call.err, red.oper == op::avg,
              bits % 16 == 0, f);
    });
  });
  DDL_CUDA_CHECK(cudaGetLastError());
  meet(2 * call.k, call.until, "flagged call: peers launching");
}
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
  m->ready = fab_->take_event(ctx_.device);
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

namespace detail {
// Whether `p` is host memory (pageable or pinned), not a device's.
inline bool on_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}
}  // namespace detail

inline void cuda_peer_transport::enqueue(message& r, message& s) {
  if (s.bytes != r.bytes) {
    r.error = s.error = detail::size_mismatch("cuda_peer_transport", s.src_rank, s.bytes, rank_, r.bytes, r.tg);
    s.consumed.store(true, std::memory_order_release);
    return;
  }
  cudaStream_t st = ctx_.stream;
  DDL_CUDA_CHECK(cudaStreamWaitEvent(st, s.ready, 0));
  fab_->give_event(s.src_device, s.ready);  // the wait holds the record it waits for
  s.ready = nullptr;
  if (r.bytes) {
    const bool direct = fab_->direct(rank_, s.src_rank);
    if (!r.fused && detail::on_host(r.dst) && detail::on_host(s.src)) {
      std::memcpy(r.dst, s.src, r.bytes);  // host data (an address table): ready since the send was posted
    } else if (!r.fused) {
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
  s.done = fab_->take_event(ctx_.device);
  s.done_device = ctx_.device;
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
    fab_->give_event(m.done_device, m.done);
    m.done = nullptr;
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
            t.fab_->give_event(m.src_device, m.ready);
            break;
          }
      }
    } else if (!m.recv && m.done) {
      (void)cudaStreamWaitEvent(t.ctx_.stream, m.done, 0);
      t.fab_->give_event(m.done_device, m.done);
      m.done = nullptr;
    }
  } catch (...) {
  }
}

}  // namespace ddl
