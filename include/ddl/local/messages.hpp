#pragma once
/// \file
/// `local_transport`'s messages: a send posts a descriptor into the pair's
/// mailbox (small ones copied eagerly); the receiver, progressing, copies
/// or reduces straight out of the sender's memory; requests are tested,
/// waited for, retired or cancelled; a stamp that disagrees is a
/// `mismatch_error`.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>

#include "ddl/local/fabric.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/transport/request.hpp"
#include "ddl/transport/threads.hpp"

namespace ddl {

inline local_transport::request local_transport::isend(int peer, const_bytes data, tag t) {
  if (peer < 0 || peer >= size())
    throw invalid_argument("isend: peer " + std::to_string(peer) + " out of range");
  if (!data.data && data.size) throw invalid_argument("isend: null data with non-zero size");
  refuse_if_aborted();
  auto& ch = fabric_->make_channel(rank_, peer);
  int free_slot = -1, busy = 0, owned = 0;  // owned: slots held by this rank's requests (not eager)
  for (int i = 0; i < local_fabric::slots_per_channel; ++i) {
    if ((ch.slots[i].state.load(std::memory_order_acquire) & local_fabric::s_mask) != local_fabric::s_free) {
      ++busy;
      owned += !ch.slots[i].eager;
    } else if (free_slot < 0) {
      free_slot = i;
    }
  }
  if (free_slot >= 0 && owned < local_fabric::K) {
    const int i = free_slot;
    auto& s = ch.slots[i];
    s.t.store(t, std::memory_order_relaxed);
    s.seq.store(ch.next_seq++, std::memory_order_relaxed);
    // Eager only while the mailbox is at most half full: a sender far ahead
    // of its receiver gets ordinary requests again (complete when taken),
    // so it waits instead of filling the mailbox.
    s.eager = data.size <= eager_bytes && busy < local_fabric::K / 2;
    if (s.eager) {
      if (data.size) std::memcpy(s.inline_data, data.data, data.size);
      s.data = s.inline_data;
    } else {
      s.data = data.data;
    }
    s.size = data.size;
    const std::uint64_t gen = ++ch.generation;
    s.state.store((gen << 3) | local_fabric::s_posted, std::memory_order_release);
    ch.published.store(ch.next_seq, std::memory_order_release);
    fabric_->ranks_[peer].bell.notify();
    request r;
    if (s.eager) return r;  // complete already: the receiver frees the slot
    r.owner_ = this;
    r.kind_ = request_fields::kind::send;
    r.peer_ = peer;
    r.index_ = i;
    return r;
  }
  throw transport_error("isend: more than " + std::to_string(local_fabric::K) +
                        " sends in flight from rank " + std::to_string(rank_) + " to rank " +
                        std::to_string(peer));
}

inline local_transport::request local_transport::irecv(int peer, mutable_bytes data, tag t) {
  return irecv_reduce(peer, data, const_bytes{}, reduction{}, t);
}

inline local_transport::request local_transport::irecv_reduce(int peer, mutable_bytes dst, const_bytes local,
                                                               reduction red, tag t) {
  if (peer < 0 || peer >= size())
    throw invalid_argument("irecv: peer " + std::to_string(peer) + " out of range");
  return post_recv(peer, dst, local, red, t);
}

inline local_transport::request local_transport::irecv_any(mutable_bytes data, tag t) {
  return post_recv(-1, data, const_bytes{}, reduction{}, t);
}

inline local_transport::request local_transport::post_recv(int peer, mutable_bytes dst, const_bytes local,
                                                           reduction red, tag t) {
  if (!dst.data && dst.size) throw invalid_argument("irecv: null buffer with non-zero size");
  refuse_if_aborted();
  auto& me = fabric_->ranks_[rank_];
  for (int i = 0; i < local_fabric::K; ++i) {
    if (me.used[i]) continue;
    me.used[i] = true;
    auto& e = me.recvs[i];
    e.done = false;
    e.fused = local.data != nullptr;
    e.peer = peer;
    e.from = -1;
    e.t = t;
    e.dst = dst;
    e.local = local;
    e.red = red;
    me.order[me.active++] = i;
    request r;
    r.owner_ = this;
    r.kind_ = request_fields::kind::recv;
    r.peer_ = peer;
    r.index_ = i;
    return r;
  }
  throw transport_error("irecv: more than " + std::to_string(local_fabric::K) +
                        " receives in flight on rank " + std::to_string(rank_));
}

// Pulls every posted receive that has a matching send. Receives from one peer
// with one tag match sends in posting order (as MPI's non-overtaking rule);
// a receive from any rank (`irecv_any`) takes its place in that order: it
// looks at the senders no older pending receive under its tag waits on (so
// an older receive from rank p, or from any rank, gets p's message first),
// from the rank after this one round, and takes the oldest message it finds.
inline bool local_transport::progress() {
  auto& me = fabric_->ranks_[rank_];
  bool any = false;
  for (int k = 0; k < me.active; ++k) {
    auto& e = me.recvs[me.order[k]];
    if (e.done) continue;
    // An older pending receive under the same tag that would take a message of `src`.
    const auto earlier_takes = [&](int src) {
      for (int j = 0; j < k; ++j) {
        const auto& o = me.recvs[me.order[j]];
        if (!o.done && o.t == e.t && (o.peer == src || o.peer < 0)) return true;
      }
      return false;
    };
    if (e.peer >= 0) {
      if (!earlier_takes(e.peer) && take(me.order[k], e.peer, true)) any = true;
      continue;
    }
    const int n = size();
    for (int d = 1; d <= n && !e.done; ++d) {
      const int src = (rank_ + d) % n;
      if (!earlier_takes(src) && take(me.order[k], src, false)) any = true;
    }
  }
  return any;
}

// Receive `entry` takes the oldest message of `src` under its tag, if one is
// posted: true when it did (the entry is done). `look_for_stamps`: the awaited
// peer's message of this very call under another stamp, and none that
// matches, is a mismatch (a receive from any rank awaits no one peer).
inline bool local_transport::take(int entry, int src, bool look_for_stamps) {
  auto& e = fabric_->ranks_[rank_].recvs[entry];
  local_fabric::channel* ch = fabric_->channel_of(src, rank_);
  if (!ch) return false;
  for (;;) {
    int best = -1;
    std::uint64_t best_word = 0, best_seq = 0;
    tag other = 0;  // a message of this call under another stamp, if no match is found
    const std::uint64_t published = ch->published.load(std::memory_order_acquire);
    for (int i = 0; i < local_fabric::slots_per_channel; ++i) {
      DDL_LOCAL_TEST_POINT(scan_slot, i);
      const std::uint64_t w = ch->slots[i].state.load(std::memory_order_acquire);
      if ((w & local_fabric::s_mask) != local_fabric::s_posted) continue;
      const tag st = ch->slots[i].t.load(std::memory_order_relaxed);
      const std::uint64_t seq = ch->slots[i].seq.load(std::memory_order_relaxed);
      if (seq >= published) continue;  // newer than the snapshot: an older one may not be visible yet
      if (st != e.t) {
        if (DDL_UNLIKELY(look_for_stamps && detail::stamps_disagree(e.t, st)) &&
            ch->slots[i].state.load(std::memory_order_acquire) == w)  // still that message
          other = st;
        continue;
      }
      if (best < 0 || seq < best_seq) {
        best = i;
        best_word = w;
        best_seq = seq;
      }
    }
    // The awaited peer's message of this very call under another stamp,
    // and none that matches: the ranks called different collectives
    // (transport/stamp.hpp). Not a false alarm when communicators share
    // this transport: a peer already in the same-numbered call of another
    // communicator has finished this one, so everything this call awaits
    // from it is here (and matched first). Only the awaited peer's
    // messages are looked at: any other rank's could be such a newer call
    // while the awaited one is late.
    if (DDL_UNLIKELY(best < 0 && other != 0)) throw mismatch_error(detail::stamp_mismatch(rank_, e.t, src, other));
    if (best < 0) return false;
    auto& s = ch->slots[best];
    DDL_LOCAL_TEST_POINT(before_claim, best);
    std::uint64_t expect = best_word;
    const std::uint64_t claimed = (best_word & ~local_fabric::s_mask) | local_fabric::s_claimed;
    if (!s.state.compare_exchange_strong(expect, claimed, std::memory_order_acq_rel)) continue;
    const bool size_ok = s.size == e.dst.size;
    if (size_ok && e.dst.size) {
      if (e.fused && e.red.received_first)
        host::reduce(e.dst.data, s.data, e.local.data, e.dst.size / size_of(e.red.type), e.red);
      else if (e.fused)
        host::reduce(e.dst.data, e.local.data, s.data, e.dst.size / size_of(e.red.type), e.red);
      else
        host::copy(e.dst.data, s.data, e.dst.size);
    }
    const std::size_t sent = s.size;
    s.state.store((best_word & ~local_fabric::s_mask) | (s.eager ? local_fabric::s_free : local_fabric::s_done),
                  std::memory_order_release);
    fabric_->ranks_[src].bell.notify();
    e.done = true;
    e.from = src;
    if (!size_ok) throw transport_error(detail::size_mismatch("local_transport", src, sent, rank_, e.dst.size, e.t));
    return true;
  }
}

inline bool local_transport::complete(const request_fields& req) const {
  if (req.kind_ == request_fields::kind::recv) return fabric_->ranks_[rank_].recvs[req.index_].done;
  const auto* ch = fabric_->channel_of(rank_, req.peer_);
  return (ch->slots[req.index_].state.load(std::memory_order_acquire) & local_fabric::s_mask) ==
         local_fabric::s_done;
}

// A send still untaken while its peer has posted this rank a message of the
// same call under another stamp (`transport/stamp.hpp`): the two called
// different collectives, e.g. a broadcast with different roots, where each
// sends down its own tree to a rank that does not receive from it. Only the
// send's own peer is looked at, and the send is looked at again before the
// throw: a peer already in the same-numbered call of another communicator
// has finished this one, and so taken this send. Every 16th poll of a
// waiting send, as MPI's `look_around`, so the scan stays off the hot path.
inline void local_transport::check_send_stamp(request_fields& req) {
  if (req.kind_ != request_fields::kind::send || ++send_polls_ % 16 != 0) return;
  const tag mine = fabric_->channel_of(rank_, req.peer_)->slots[req.index_].t.load(std::memory_order_relaxed);
  if (!detail::is_stamped(mine)) return;
  const tag theirs = posted_against(req.peer_, mine);
  if (theirs == 0 || complete(req)) return;  // none, or taken after all
  const int peer = req.peer_;
  cancel(req);
  throw mismatch_error(detail::stamp_mismatch(rank_, mine, peer, theirs));
}

// The tag of a message `peer` posted this rank in the call of `mine` under
// another stamp, or 0 if there is none.
inline tag local_transport::posted_against(int peer, tag mine) const {
  const local_fabric::channel* in = fabric_->channel_of(peer, rank_);
  if (!in) return 0;
  for (int i = 0; i < local_fabric::slots_per_channel; ++i) {
    const std::uint64_t w = in->slots[i].state.load(std::memory_order_acquire);
    if ((w & local_fabric::s_mask) != local_fabric::s_posted) continue;
    const tag theirs = in->slots[i].t.load(std::memory_order_relaxed);
    if (detail::stamps_disagree(mine, theirs) && in->slots[i].state.load(std::memory_order_acquire) == w)
      return theirs;  // still that message
  }
  return 0;
}

inline void local_transport::retire(request_fields& req) noexcept {
  if (req.kind_ == request_fields::kind::recv) {
    auto& me = fabric_->ranks_[rank_];
    me.used[req.index_] = false;
    if (me.recvs[req.index_].done) req.peer_ = me.recvs[req.index_].from;  // `irecv_any`'s sender
    int w = 0;
    for (int k = 0; k < me.active; ++k)
      if (me.order[k] != req.index_) me.order[w++] = me.order[k];
    me.active = w;
  } else if (req.kind_ == request_fields::kind::send) {
    auto& s = fabric_->channel_of(rank_, req.peer_)->slots[req.index_];
    const std::uint64_t w = s.state.load(std::memory_order_acquire);
    s.state.store(w & ~local_fabric::s_mask, std::memory_order_release);  // free, same generation
  }
  req.kind_ = request_fields::kind::none;
}

// Withdraws an incomplete request. A posted send is taken back unless the
// receiver has claimed it, in which case the copy in progress is awaited (it
// is bounded), so no one reads the caller's memory after this returns.
inline void local_transport::cancel(request_fields& req) noexcept {
  if (req.kind_ == request_fields::kind::send) {
    auto& s = fabric_->channel_of(rank_, req.peer_)->slots[req.index_];
    for (;;) {
      std::uint64_t w = s.state.load(std::memory_order_acquire);
      const auto st = w & local_fabric::s_mask;
      if (st == local_fabric::s_posted) {
        if (s.state.compare_exchange_strong(w, w & ~local_fabric::s_mask, std::memory_order_acq_rel)) break;
        continue;
      }
      if (st == local_fabric::s_claimed) {
        std::this_thread::yield();
        continue;
      }
      s.state.store(w & ~local_fabric::s_mask, std::memory_order_release);
      break;
    }
    req.kind_ = request_fields::kind::none;
    return;
  }
  retire(req);
}

inline bool local_transport::test(request& req) {
  if (!req.active()) return true;
  progress();
  if (complete(req)) {
    retire(req);
    return true;
  }
  check_send_stamp(req);
  if (DDL_UNLIKELY(fabric_->aborted())) {  // as `wait`: a broken group ends every pending request
    const int peer = req.peer_;
    cancel(req);
    throw transport_error("rank " + std::to_string(rank_) + " gave up waiting for rank " + std::to_string(peer) + ": " +
                          fabric_->abort_reason());
  }
  return false;
}

inline void local_transport::await_progress() {
  auto& me = fabric_->ranks_[rank_];
  const std::uint64_t ticket = me.bell.prepare();
  if (progress() || fabric_->aborted()) return;
  me.bell.wait(ticket, std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
}

inline void local_transport::wait(request& req, deadline until) {
  if (!req.active()) return;
  auto& me = fabric_->ranks_[rank_];
  const auto start = std::chrono::steady_clock::now();
  detail::backoff pause;
  for (;;) {
    const std::uint64_t ticket = me.bell.prepare();
    if (progress()) pause.reset();
    if (complete(req)) {
      retire(req);
      return;
    }
    check_send_stamp(req);
    if (DDL_UNLIKELY(fabric_->aborted())) {
      const int peer = req.peer_;
      cancel(req);
      gave_up(peer);
    }
    const auto now = std::chrono::steady_clock::now();
    if (DDL_UNLIKELY(now >= until)) {
      const int peer = req.peer_;
      cancel(req);
      timed_out(peer, start, now);
    }
    pause(me.bell, ticket, until);
  }
}

}  // namespace ddl
