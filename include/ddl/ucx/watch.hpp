#pragma once
/// \file
/// `ucx_transport`'s control messages (failure and timeout notices, under
/// the control bit of the wire tag) and how a wait looks around while its
/// request is open (every 16th poll): a peer's notice, a failed endpoint,
/// an awaited peer of this machine whose process exited or stopped, the
/// peer's message of this call under another stamp (a mismatch).
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "ddl/ucx/transport.hpp"

namespace ddl {

inline void ucx_transport::send_control(int p, ucp_tag_t kind, const void* data, std::size_t bytes) {
  if (!peers_.eps[static_cast<std::size_t>(p)] || !peers_.failed[static_cast<std::size_t>(p)].empty()) return;
  ucp_request_param_t prm{};
  void* q = ucp_tag_send_nbx(peers_.eps[static_cast<std::size_t>(p)], data, bytes,
                             ucp_tag_t(static_cast<std::uint64_t>(rank_)) << rank_shift | control_bit | kind, &prm);
  if (q && !UCS_PTR_IS_ERR(q)) control_sends_.push_back(q);
}

// Keeps a receive of the peers' notices posted (always a request).
inline void ucx_transport::post_notice_receive() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  void* q = ucp_tag_recv_nbx(worker_.get(), notice_in_, notice_bytes, control_bit, control_bit | setup_bit, &p);
  detail::ucx_check(UCS_PTR_IS_ERR(q) ? UCS_PTR_STATUS(q) : UCS_OK, "posting the notice receive");
  notice_recv_ = q;
}

// A peer's notice: a timeout report (noted; true: post the next receive)
// or why it gave the group up (the group is broken; false).
inline bool ucx_transport::take_notice(const ucp_tag_recv_info_t& info) {
  const int from = sender_of(info.sender_tag);
  if ((info.sender_tag & 1u) == timeout_kind) {
    if (from >= 0 && from < size_) reported_[static_cast<std::size_t>(from)] = detail::steady_seconds();
    return true;
  }
  broken_.assign(notice_in_, std::min<std::size_t>(info.length, notice_bytes));
  return false;
}

// --- Waiting ----------------------------------------------------------------
// While `req` waits: a peer's notice, a failed endpoint, an awaited peer
// of this machine that exited, a message of this call under another stamp.
template <class Ready>
void ucx_transport::look_around(request& req, Ready&& ready) {
  const int peer = req.peer_;
  if (broken()) {
    req.release();
    throw transport_error("ucx_transport: rank " + std::to_string(rank_) + " stopped waiting for " +
                          (peer >= 0 ? "rank " + std::to_string(peer) : std::string("any rank")) + ": " + broken_);
  }
  for (int q = 0; q < size_; ++q) {
    if ((peer >= 0 && q != peer) || peers_.failed[static_cast<std::size_t>(q)].empty()) continue;
    if constexpr (!std::is_null_pointer_v<std::decay_t<Ready>>)
      if (ready()) return;
    const bool send = req.send_;
    req.release();
    failed_at_once(q, send, UCS_ERR_CONNECTION_RESET);
  }
  if (peer >= 0) check_alive(req, ready);
  if (peer >= 0) check_stamp(req, ready);
}

// Every 0.1 s of a wait on a peer of this machine: has its process exited
// (seen gone twice, 0.1 s apart)?
template <class Ready>
void ucx_transport::check_alive(request& req, Ready&& ready) {
  const auto peer = static_cast<std::size_t>(req.peer_);
  if (peers_.procs[peer].machine == 0) return;
  const double now = detail::steady_seconds();
  if (now < next_look_) return;
  next_look_ = now + 0.1;
  const bool gone = detail::state_of(peers_.procs[peer], peers_.machine) == detail::process_state::gone;
  if (!gone || gone_peer_ != req.peer_) {
    gone_peer_ = gone ? req.peer_ : -1;
    return;
  }
  if constexpr (!std::is_null_pointer_v<std::decay_t<Ready>>)
    if (ready()) return;
  peers_.failed[peer] = "its process has exited";
  const char* doing = !req.active() ? "see its stage" : req.send_ ? "send to it" : "receive from it";
  req.release();
  throw transport_error("ucx_transport: rank " + std::to_string(rank_) + ": " + process_of(static_cast<int>(peer)) +
                        " has exited while this rank waited to " + doing);
}

// The peer's oldest unexpected message, if of this call under another stamp: a mismatch.
template <class Ready>
void ucx_transport::check_stamp(request& req, Ready&& ready) {
  if (!detail::is_stamped(req.tag_)) return;
  ucp_tag_recv_info_t info{};
  const ucp_tag_t from = ucp_tag_t(static_cast<std::uint64_t>(req.peer_)) << rank_shift;
  if (!ucp_tag_probe_nb(worker_.get(), from, ~payload_mask | control_bit, 0, &info)) return;
  const tag found = narrow_.unpack(info.sender_tag & (control_bit - 1));
  if (!detail::stamps_disagree(narrow_.unpack(narrow_.pack(req.tag_)), found)) return;
  if (req.send_ && req.active() && ucp_request_check_status(req.r_) != UCS_INPROGRESS) return;  // taken after all
  if constexpr (!std::is_null_pointer_v<std::decay_t<Ready>>)
    if (ready()) return;
  const int peer = req.peer_;
  const tag mine = req.tag_;
  req.release();
  throw mismatch_error("ucx_transport: " + detail::stamp_mismatch(rank_, mine, peer, found));
}

}  // namespace ddl
