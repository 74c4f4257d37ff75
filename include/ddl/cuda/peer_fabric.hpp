#pragma once
/// \file
/// `cuda_peer_fabric`: the ranks of a `cuda_peer_transport` job (threads of
/// one process), their devices and streams, the event pools, the flag
/// regions of the flagged calls, and the mailboxes between the ranks; and
/// the transport's members that only read it. Messages are in
/// `cuda/peer_messages.hpp`, the flagged calls in `cuda/peer_flagged.hpp`.
#if !defined(__CUDACC__)
#error "ddl/cuda/peer_fabric.hpp: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
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
#include "ddl/cuda/peer_transport.hpp"

namespace ddl {

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

}  // namespace ddl

// The transport's flagged calls and messages.
#include "ddl/cuda/peer_flagged.hpp"
#include "ddl/cuda/peer_messages.hpp"
