#pragma once
// What the "ddl" backend hands torch for a call in flight (`work`: ddl's
// request, torch's future, what to do once it has finished), and the scratch
// buffers the list forms pack into, kept from call to call.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ddl.hpp>

namespace ddl_torch {

// A collective in flight: ddl's request, torch's future, and what to do
// when the collective has finished (copy a gathered buffer out, ...).
class work : public c10d::Work {
 public:
  work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  // Runs on the thread that ran the collective, before ddl's wait returns.
  // `then_` goes with it: what it holds (a scratch buffer) is free again.
  void complete(std::exception_ptr e) {
    if (!e && then_) {
      try {
        then_();
      } catch (...) {
        e = std::current_exception();
      }
    }
    then_ = nullptr;
    finish(e);
    if (e) future_->setError(e);
    else future_->markCompleted(c10::IValue(outputs_));
  }

  bool wait(std::chrono::milliseconds /*timeout: ddl's own deadline (DDL_TIMEOUT) bounds every wait*/) override {
    {
      std::lock_guard<std::mutex> lock(request_mutex_);
      if (request_.valid()) {
        try {
          request_.wait();
        } catch (...) {
          // also delivered through complete(): re-thrown below
        }
      }
    }
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return completed_; });
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // The sender of a receive from any source (torch's `recv` without `src`
  // asks it after `wait`); the peer of any other send or receive.
  int sourceRank() const override {
    std::lock_guard<std::mutex> lock(request_mutex_);
    const int peer = request_.peer();
    TORCH_CHECK(peer >= 0, "ddl backend: sourceRank of a call that is not a send or receive, or has not completed "
                           "(wait for it first)");
    return peer;
  }

  ddl::collective_request request_;
  mutable std::mutex request_mutex_;
  std::function<void()> then_;

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Flat buffers for the list forms of allgather and reduce_scatter, kept
// from call to call: a fresh allocation of many MiB is fresh pages, whose
// first writes cost more than the collective (bench/results/torch-backend.md,
// 2026-11-29). A buffer is free again once no tensor views its storage (the
// call's `then_` holds its view until the call completes), so calls in
// flight at once get buffers of their own.
class scratch_pool {
 public:
  at::Tensor get(int64_t numel, const at::TensorOptions& options) {
    const at::ScalarType type = options.dtype().toScalarType();
    const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(type));
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t pick = buffers_.size();
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (unused(buffers_[i]) && buffers_[i].numel() >= bytes &&
          (pick == buffers_.size() || buffers_[i].numel() < buffers_[pick].numel()))
        pick = i;
    if (pick == buffers_.size()) {
      if (buffers_.size() >= keep)  // free ones were too small: the new one replaces them
        buffers_.erase(std::remove_if(buffers_.begin(), buffers_.end(), [](const at::Tensor& b) { return unused(b); }),
                       buffers_.end());
      buffers_.push_back(at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte)));
      pick = buffers_.size() - 1;
    }
    return buffers_[pick].narrow(0, 0, bytes).view(type);
  }

 private:
  static constexpr std::size_t keep = 4;
  static bool unused(const at::Tensor& b) { return b.storage().use_count() == 1; }
  std::mutex mutex_;
  std::vector<at::Tensor> buffers_;
};

}  // namespace ddl_torch
