#pragma once
/// \file
/// `cuda_peer_transport`'s messages: posting sends and receives, matching
/// them (per peer and tag, in posting order), queuing the copy or the
/// reduction on the receiver's stream between the two events, and waiting.
#if !defined(__CUDACC__)
#error "ddl/cuda/peer_messages.hpp: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
#endif
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "ddl/cuda/peer_fabric.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/transport/threads.hpp"

namespace ddl {

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
