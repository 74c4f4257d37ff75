#pragma once
/// \file
/// `ddl::bucketer`: gradient buckets that reduce while the backward pass is
/// still producing gradients (PyTorch DDP's buckets, Horovod's fusion).
///
/// The training loop:
///   1. register every gradient tensor once, in the order the backward pass
///      produces them (last layer first): `add(view)`;
///   2. in each backward pass, `mark_ready(i)` as gradient i is computed: a
///      bucket is reduced asynchronously the moment all its tensors are
///      ready (and every bucket before it has been launched, so all ranks
///      launch the same buckets in the same order);
///   3. `wait_all()` before the optimizer step: the gradients are reduced in
///      their own memory.
///
/// Layout: tensors are grouped, in registration order, into buckets of one
/// dtype and one memory location, each up to `bucket_bytes` (the first up to
/// `first_bucket_bytes`, so reduction starts early). The layout is fixed at
/// the first `mark_ready` (or `layout()`); registering after that is an
/// error. A bucket whose tensors tile one contiguous range (any order: the
/// reduction is element-wise) is reduced in place with no copy; otherwise
/// its tensors are packed into a staging buffer owned by the bucketer
/// (allocated once; host memory over MPI a `ddl::shared_buffer`, which
/// peers on the machine read in place) and unpacked after the reduction.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <exception>
#include <string>
#include <vector>

#include "ddl/comm/progress.hpp"
#include "ddl/core/buffer.hpp"
#include "ddl/core/config.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/shm/shared_buffer.hpp"

namespace ddl {

/// Bucket sizes: `DDL_BUCKET_BYTES` (default 25 MiB, as DDP), the first
/// bucket's 1 MiB, so reduction starts early, and the last one's 1 MiB
/// (neither above `bucket_bytes`). The last bucket is reduced after the
/// backward pass has ended, so all of it is exposed: its tensors (the last
/// registered, up to `last_bucket_bytes` in all) get buckets of their own.
/// 0 turns the tail split off (DDP's layout).
struct bucket_options {
  std::size_t bucket_bytes = std::size_t(25) << 20;
  std::size_t first_bucket_bytes = std::size_t(1) << 20;
  std::size_t last_bucket_bytes = std::size_t(1) << 20;

  static bucket_options from_env() {
    bucket_options o;
    if (const char* b = std::getenv("DDL_BUCKET_BYTES")) o.bucket_bytes = detail::parse_bytes("DDL_BUCKET_BYTES", b);
    o.first_bucket_bytes = std::min(o.first_bucket_bytes, o.bucket_bytes);
    o.last_bucket_bytes = std::min(o.last_bucket_bytes, o.bucket_bytes);
    o.validate();
    return o;
  }
  void validate() const {
    if (bucket_bytes == 0) throw invalid_argument("bucket_options.bucket_bytes must be positive");
    if (first_bucket_bytes == 0) throw invalid_argument("bucket_options.first_bucket_bytes must be positive");
  }
};

/// \tparam Communicator a `ddl::communicator<Strategy, Transport>`.
/// Example:
/// \code
///   ddl::bucketer<decltype(comm)> buckets(comm, ddl::op::avg);
///   for (auto& g : grads_in_backward_order) buckets.add(ddl::host_view(g));
///   for (step...) {
///     for (i in backward order) { compute gradient i; buckets.mark_ready(i); }
///     buckets.wait_all();   // every gradient averaged over the ranks
///     optimizer_step();
///   }
/// \endcode
template <class Communicator>
class bucketer {
 public:
  /// What one bucket holds (see `layout()`).
  struct bucket {
    dtype type = dtype::float32;
    location where{};
    std::vector<std::size_t> tensors;  ///< indices, in registration order
    std::size_t count = 0;             ///< elements
    bool in_place = false;             ///< reduced where the tensors lie (no packing)
    std::byte* data = nullptr;         ///< the range reduced: the tensors' own or the staging buffer
  };

  /// \param comm must outlive the bucketer; every rank registers the same
  ///        tensors (count and dtype) in the same order.
  /// \param o the reduction (`op::avg` averages the gradients).
  explicit bucketer(Communicator& comm, op o = op::avg, bucket_options b = bucket_options::from_env())
      : comm_(&comm), op_(o), opts_(b) {
    opts_.validate();
  }
  bucketer(const bucketer&) = delete;
  bucketer& operator=(const bucketer&) = delete;
  /// Waits for buckets still in flight (their errors are dropped).
  ~bucketer() {
    for (auto& r : requests_) r = collective_request();
    for (auto& s : staging_) release(s);
  }

  /// Registers a gradient tensor; returns its index for `mark_ready`.
  /// \pre the layout is not fixed yet; the memory stays valid and in place.
  std::size_t add(buffer_view grad) {
    if (fixed_)
      throw invalid_argument("bucketer::add: the bucket layout is fixed (after the first mark_ready or layout()); "
                             "register every tensor before the first backward pass");
    if (!grad.data && grad.count)
      throw invalid_argument("bucketer::add: tensor " + std::to_string(tensors_.size()) + " has null data and " +
                             std::to_string(grad.count) + " elements");
    tensors_.push_back(grad);
    return tensors_.size() - 1;
  }
  std::size_t tensor_count() const noexcept { return tensors_.size(); }

  /// Fixes the layout (if not yet) and returns it, buckets in launch order.
  const std::vector<bucket>& layout() {
    fix_layout();
    return buckets_;
  }

  /// Gradient `i` is computed: launches every bucket that is now complete.
  void mark_ready(std::size_t i) {
    fix_layout();
    if (i >= tensors_.size())
      throw invalid_argument("bucketer::mark_ready: tensor " + std::to_string(i) + " of " +
                             std::to_string(tensors_.size()) + " registered");
    if (ready_[i])
      throw invalid_argument("bucketer::mark_ready: tensor " + std::to_string(i) +
                             " marked ready twice in one step (call wait_all() between steps)");
    ready_[i] = 1;
    ++ready_in_[bucket_of_[i]];
    while (next_ < buckets_.size() && ready_in_[next_] == buckets_[next_].tensors.size()) launch(next_++);
  }
  /// Marks every tensor not yet marked (e.g. parameters that got no gradient).
  void mark_all_ready() {
    fix_layout();
    for (std::size_t i = 0; i < tensors_.size(); ++i)
      if (!ready_[i]) mark_ready(i);
  }

  /// Waits for every bucket of this step and leaves the reduced gradients in
  /// the registered tensors; then the next step may begin. Re-throws the
  /// first bucket's error (after all have finished).
  /// \pre every tensor was marked ready this step.
  void wait_all() {
    fix_layout();
    std::exception_ptr error;
    for (auto& r : requests_) {
      try {
        r.wait();
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    requests_.clear();
    const std::size_t launched = next_;
    for (std::size_t b = 0; b < launched; ++b) unpack(buckets_[b]);
    std::string missing;
    if (launched < buckets_.size())
      for (std::size_t i = 0; i < tensors_.size(); ++i)
        if (!ready_[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(ready_in_.begin(), ready_in_.end(), 0);
    next_ = 0;
    if (error) std::rethrow_exception(error);
    if (!missing.empty())
      throw invalid_argument("bucketer::wait_all: tensors " + missing +
                             " were not marked ready this step; their buckets were not reduced");
  }

  /// Buckets launched so far in this step.
  std::size_t launched() const noexcept { return next_; }

 private:
  void fix_layout() {
    if (fixed_) return;
    fixed_ = true;
    // One open bucket per (dtype, place); a tensor that would overflow its
    // open bucket starts the next one (a tensor above the cap gets its own).
    struct open_bucket {
      std::size_t index, bytes;
    };
    std::vector<open_bucket> open;
    bucket_of_.resize(tensors_.size());
    // The tail: the last tensors, up to last_bucket_bytes, start new buckets.
    std::size_t tail = tensors_.size(), tail_bytes = 0;
    while (tail > 1 && tail_bytes + tensors_[tail - 1].bytes() <= opts_.last_bucket_bytes)
      tail_bytes += tensors_[--tail].bytes();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const buffer_view& t = tensors_[i];
      if (i == tail && i > 0) open.clear();
      auto it = std::find_if(open.begin(), open.end(), [&](const open_bucket& o) {
        return buckets_[o.index].type == t.type && same_place(buckets_[o.index].where, t.where);
      });
      const bool found = it != open.end();
      const std::size_t cap = found && it->index == 0 ? opts_.first_bucket_bytes : opts_.bucket_bytes;
      if (!found || (it->bytes > 0 && it->bytes + t.bytes() > cap)) {
        bucket nb;
        nb.type = t.type;
        nb.where = t.where;
        buckets_.push_back(nb);
        if (found) *it = open_bucket{buckets_.size() - 1, 0};
        else it = open.insert(open.end(), open_bucket{buckets_.size() - 1, 0});
      }
      bucket& b = buckets_[it->index];
      b.tensors.push_back(i);
      b.count += t.count;
      it->bytes += t.bytes();
      bucket_of_[i] = it->index;
    }
    staging_.resize(buckets_.size());
    for (std::size_t k = 0; k < buckets_.size(); ++k) place(buckets_[k], staging_[k]);
    ready_.assign(tensors_.size(), 0);
    ready_in_.assign(buckets_.size(), 0);
  }

  static bool same_place(const location& a, const location& b) {
    return a.space == b.space && a.device == b.device && a.stream == b.stream;
  }

  struct staging {
    std::byte* data = nullptr;
    std::size_t bytes = 0;
    shared_buffer shared;  // host memory over a transport whose peers map it: `data` lies here
    memory_ops mem{};
  };

  // In place when the tensors tile one contiguous range; else a staging buffer.
  void place(bucket& b, staging& s) {
    std::vector<std::size_t> by_address;
    for (std::size_t i : b.tensors)
      if (tensors_[i].count) by_address.push_back(i);
    std::sort(by_address.begin(), by_address.end(),
              [&](std::size_t x, std::size_t y) { return tensors_[x].byte_data() < tensors_[y].byte_data(); });
    bool tiles = true;
    for (std::size_t k = 1; k < by_address.size() && tiles; ++k) {
      const buffer_view& prev = tensors_[by_address[k - 1]];
      tiles = prev.byte_data() + prev.bytes() == tensors_[by_address[k]].byte_data();
    }
    s.mem = memory_for(comm_->transport(), b.where);
    if (tiles) {
      b.in_place = true;
      b.data = by_address.empty() ? nullptr : tensors_[by_address.front()].byte_data();
      return;
    }
    s.bytes = b.count * size_of(b.type);
    using transport_type = std::decay_t<decltype(comm_->transport())>;
    if (has_peer_buffer_v<transport_type> && std::strcmp(s.mem.name, "host") == 0) {
      // Peers on this machine read the packed bucket where it lies rather
      // than a copy in the rank's stage (`shared_buffer`).
      s.shared = shared_buffer(s.bytes);
      b.data = s.shared.data();
      return;
    }
    s.data = s.mem.allocate(s.mem.ctx, s.bytes);
    b.data = s.data;
  }
  void release(staging& s) noexcept {
    if (s.data) s.mem.release(s.mem.ctx, s.data, s.bytes);
    s.data = nullptr;
  }

  void launch(std::size_t k) {
    bucket& b = buckets_[k];
    if (!b.in_place) {
      const memory_ops& m = staging_[k].mem;
      std::byte* at = b.data;
      for (std::size_t i : b.tensors) {
        m.copy(m.ctx, at, tensors_[i].byte_data(), tensors_[i].bytes());
        at += tensors_[i].bytes();
      }
    }
    buffer_view all{b.data, b.count, b.type, b.where};
    requests_.push_back(comm_->all_reduce_async(all, op_));
  }
  void unpack(const bucket& b) {
    if (b.in_place) return;
    const memory_ops& m = staging_[&b - buckets_.data()].mem;
    const std::byte* at = b.data;
    for (std::size_t i : b.tensors) {
      m.copy(m.ctx, tensors_[i].byte_data(), at, tensors_[i].bytes());
      at += tensors_[i].bytes();
    }
  }

  Communicator* comm_;
  op op_;
  bucket_options opts_;
  std::vector<buffer_view> tensors_;
  bool fixed_ = false;
  std::vector<bucket> buckets_;
  std::vector<staging> staging_;
  std::vector<std::size_t> bucket_of_;
  std::vector<char> ready_;
  std::vector<std::size_t> ready_in_;
  std::size_t next_ = 0;  ///< next bucket to launch
  std::vector<collective_request> requests_;
};

}  // namespace ddl
