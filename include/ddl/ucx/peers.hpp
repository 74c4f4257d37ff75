#pragma once
/// \file
/// The peers of one `ucx_transport`: what each rank published at the
/// rendezvous (its process, host and CPUs, its worker's address), the
/// endpoint to it, and whether that endpoint failed. UCX's shared-memory
/// wires take no part in its peer error handling (an endpoint that asks for
/// it goes over TCP, several times slower on one host), so a peer of this host
/// whose process can be watched (`shm/process.hpp`) gets an endpoint
/// without it; every other peer one with it, whose failure UCX reports.
/// `DDL_UCX_PEER_ERRORS=1` asks for it on every endpoint.
#include <sched.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/shm/process.hpp"
#include "ddl/ucx/context.hpp"

namespace ddl::detail {

class ucx_peers {
 public:
  std::vector<ucp_ep_h> eps;        // per rank: the endpoint (null once closed)
  std::vector<std::string> failed;  // per rank: why its endpoint is gone ("" while it works)
  std::vector<char> peer_errors;    // per rank: its endpoint has UCX's peer error handling
  std::vector<process_id> procs;    // per rank: its process (machine 0: not on this one, not watched)
  std::vector<std::string> hosts;   // per rank: its host name
  std::uint64_t machine = 0;        // this process's machine
  int cores = 1;                    // the CPUs of the union of the ranks' affinity masks

  ucx_peers() = default;
  ucx_peers(const ucx_peers&) = delete;
  ucx_peers& operator=(const ucx_peers&) = delete;

  /// What this process publishes at the rendezvous: its process, host name
  /// and affinity mask, then `w`'s address.
  static std::string record(const ucx_worker& w) {
    process_record r;
    r.proc = this_process();
    ::gethostname(r.host, sizeof r.host - 1);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) r.cpus[c / 64] |= std::uint64_t{1} << (c % 64);
    return std::string(reinterpret_cast<const char*>(&r), sizeof r) + w.address();
  }

  /// Reads every rank's record and connects an endpoint of `w` to each
  /// (this process is rank `me`).
  void connect(ucx_worker& w, const std::vector<std::string>& records, int me_rank) {
    self_ = static_cast<std::size_t>(me_rank);
    const std::size_t n = records.size();
    eps.assign(n, nullptr);
    failed.assign(n, std::string());
    peer_errors.assign(n, 1);
    procs.resize(n);
    hosts.resize(n);
    slots_.resize(n);
    const process_id me = this_process();
    machine = me.machine;
    char host[64] = {};
    ::gethostname(host, sizeof host - 1);
    const char* env = std::getenv("DDL_UCX_PEER_ERRORS");
    const bool everywhere = env && std::strcmp(env, "1") == 0;
    std::uint64_t cpus[16] = {};
    for (std::size_t q = 0; q < n; ++q) {
      process_record r;
      if (records[q].size() <= sizeof r)
        throw transport_error("ucx_transport: rank " + std::to_string(q) + "'s rendezvous record is too short");
      std::memcpy(&r, records[q].data(), sizeof r);
      procs[q] = r.proc;
      if (procs[q].machine != me.machine) procs[q].machine = 0;
      hosts[q] = std::string(r.host, strnlen(r.host, sizeof r.host));
      for (int i = 0; i < 16; ++i) cpus[i] |= r.cpus[i];
      slots_[q] = {this, q};
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep.address = reinterpret_cast<const ucp_address_t*>(records[q].data() + sizeof r);
      ucs_status_t made = UCS_ERR_UNREACHABLE;
      if (procs[q].machine != 0 && hosts[q] == host && !everywhere) {
        made = ucp_ep_create(w.get(), &ep, &eps[q]);
        if (made == UCS_OK) peer_errors[q] = 0;
      }
      if (made != UCS_OK) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep.err_handler.cb = &ucx_peers::on_error;
        ep.err_handler.arg = &slots_[q];
        ucx_check(ucp_ep_create(w.get(), &ep, &eps[q]), "ucp_ep_create");
      }
    }
    cores = 0;
    for (std::uint64_t word : cpus) cores += __builtin_popcountll(word);
    if (cores < 1) cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }

  /// Keeps send `r` to rank `peer`, which `ucx_transport::withdraw` could
  /// not cancel, until `end_stranded`.
  void strand(void* r, int peer) { stranded_.push_back({r, peer}); }
  bool stranding() const noexcept { return !stranded_.empty(); }
  /// Ends the stranded sends, once this rank's notices had a moment to
  /// leave (a flush of at most 200 ms): a send to a rank whose endpoint has
  /// peer error handling fails with that endpoint, closed by force; one to a
  /// rank without it (shared memory: no force) is held until `free_held`.
  /// Either way the rank is marked failed.
  void end_stranded(ucx_worker& w) noexcept {
    if (stranded_.empty()) return;
    w.flush(std::chrono::milliseconds(200));
    for (auto& [r, peer] : stranded_) {
      const auto q = static_cast<std::size_t>(peer);
      if (!peer_errors[q]) {
        if (failed[q].empty()) failed[q] = "a send to it could not be withdrawn after a failed call";
        held_.push_back(r);
        continue;
      }
      if (eps[q]) {
        if (failed[q].empty()) failed[q] = "its endpoint was closed after a send to it could not be withdrawn";
        close(w, q, true);
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until) w.progress();
      ucp_request_free(r);
    }
    stranded_.clear();
  }
  /// Hands the held sends back to UCX (at the end, before the worker goes).
  void free_held() noexcept {
    for (void* r : held_) ucp_request_free(r);
    held_.clear();
  }

  /// Whether rank `q` lives on another host (another machine, or another host name on this one).
  bool remote(std::size_t q) const noexcept { return procs[q].machine != machine || hosts[q] != hosts[self_]; }

  /// "rank 2 (pid 4242 on node1)".
  std::string process_of(int q) const {
    const auto i = static_cast<std::size_t>(q);
    return "rank " + std::to_string(q) + " (pid " + std::to_string(procs[i].pid) + " on " + hosts[i] + ")";
  }

  /// Closes the endpoint to rank `q`: flushing what it still sends (at most
  /// 5 s), or by `force` (2 s; only with peer error handling: it fails what
  /// is queued on it).
  void close(ucx_worker& w, std::size_t q, bool force) noexcept {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* r = ucp_ep_close_nbx(eps[q], &p);
    eps[q] = nullptr;
    if (!r || UCS_PTR_IS_ERR(r)) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(force ? 2 : 5);
    while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
      if (!w.progress()) std::this_thread::yield();
    ucp_request_free(r);
  }

 private:
  struct process_record {
    process_id proc;
    std::uint64_t cpus[16] = {};  // affinity mask, CPUs 0-1023
    char host[64] = {};
  };
  struct slot {
    ucx_peers* self = nullptr;
    std::size_t peer = 0;
  };
  static void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* s = static_cast<slot*>(arg);
    auto& f = s->self->failed[s->peer];
    if (f.empty()) f = std::string("UCX reported its endpoint failed (") + ucs_status_string(status) + ")";
  }
  std::vector<slot> slots_;  // the error callbacks' arguments, one per peer
  std::size_t self_ = 0;     // this process's rank
  std::vector<std::pair<void*, int>> stranded_;  // sends that could not be withdrawn, and their ranks
  std::vector<void*> held_;                      // stranded sends to ranks without peer error handling
};

}  // namespace ddl::detail
