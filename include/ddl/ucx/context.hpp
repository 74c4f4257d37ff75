#pragma once
/// \file
/// The UCX objects one `ucx_transport` owns: a UCP context with the tag
/// feature (its transports from UCX's own settings, `UCX_TLS` and the like)
/// and one worker, driven by one thread at a time. Link `ddl::ucx`.
#include <ucp/api/ucp.h>

#include <chrono>
#include <string>
#include <thread>

#include "ddl/core/error.hpp"

namespace ddl::detail {

/// Throws `transport_error` naming `what` and UCX's text for `s` unless it is `UCS_OK`.
inline void ucx_check(ucs_status_t s, const char* what) {
  if (s != UCS_OK) throw transport_error(std::string("ucx_transport: ") + what + " failed: " + ucs_status_string(s));
}

/// A UCP context and its worker (`UCS_THREAD_MODE_SERIALIZED`: a
/// communicator's progress thread may drive it, one thread at a time).
class ucx_worker {
 public:
  ucx_worker() {
    ucp_config_t* config = nullptr;
    ucx_check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG;
    params.mt_workers_shared = 0;
    const ucs_status_t s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    ucx_check(s, "ucp_init");
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if (const ucs_status_t w = ucp_worker_create(context_, &wp, &worker_); w != UCS_OK) {
      ucp_cleanup(context_);
      ucx_check(w, "ucp_worker_create");
    }
  }
  ~ucx_worker() {
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
  }
  ucx_worker(const ucx_worker&) = delete;
  ucx_worker& operator=(const ucx_worker&) = delete;

  ucp_worker_h get() const noexcept { return worker_; }
  /// The worker's address, as peers connect to it.
  std::string address() const {
    ucp_address_t* a = nullptr;
    std::size_t len = 0;
    ucx_check(ucp_worker_get_address(worker_, &a, &len), "ucp_worker_get_address");
    std::string s(reinterpret_cast<const char*>(a), len);
    ucp_worker_release_address(worker_, a);
    return s;
  }
  /// Waits (at most `limit`) until what this worker sent has reached its peers.
  void flush(std::chrono::milliseconds limit) noexcept {
    ucp_request_param_t p{};
    void* r = ucp_worker_flush_nbx(worker_, &p);
    if (!r || UCS_PTR_IS_ERR(r)) return;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
      if (!progress()) std::this_thread::yield();
    ucp_request_cancel(worker_, r);
    ucp_request_free(r);
  }
  /// Runs UCX's progress until it has nothing more to do now; true if anything moved.
  bool progress() noexcept {
    bool moved = false;
    while (ucp_worker_progress(worker_) != 0) moved = true;
    return moved;
  }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
};

}  // namespace ddl::detail
