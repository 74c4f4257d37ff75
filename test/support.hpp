#pragma once
// Shared helpers for the ddl test suites: the verifiable inputs and exact
// references of <ddl/testing.hpp> (host and device code: the CUDA tests fill
// and check device buffers with them through Thrust), ddl::thread_barrier,
// a failure log that worker threads fill and the test thread asserts on, and
// one rank's part of an all-gather check (threads and MPI processes alike).
#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ddl.hpp>
#include <ddl/testing.hpp>

namespace ddl_test {

using namespace ddl::testing;
using ddl::thread_barrier;

// Failures found by worker threads; the test thread asserts it is empty.
class failure_log {
 public:
  void add(std::string msg) {
    std::lock_guard<std::mutex> lock(m_);
    if (msgs_.size() < 20) msgs_.push_back(std::move(msg));
    ++count_;
  }
  std::size_t count() const { return count_; }
  std::string summary() const {
    std::string s;
    for (const auto& m : msgs_) s += m + "\n";
    return s;
  }

 private:
  std::mutex m_;
  std::vector<std::string> msgs_;
  std::size_t count_ = 0;
};

// One rank's part of an all-gather check: `calls` all-gathers of `per`
// elements a rank through `comm`, out of place, then as many in place; every
// element compared with `value(rank, i, call)`, the first wrong one of a call
// logged under `where`.
template <class T, class Comm, class Value>
void check_all_gathers(Comm& comm, int r, int n, std::size_t per, int calls, Value value, failure_log& log,
                       const std::string& where) {
  const std::size_t count = per * static_cast<std::size_t>(n);
  std::vector<T> own(per), out(count);
  for (bool ip : {false, true})
    for (int call = 0; call < calls; ++call) {
      std::fill(out.begin(), out.end(), T(-1));
      for (std::size_t i = 0; i < per; ++i) (ip ? out[r * per + i] : own[i]) = value(r, i, call);
      if (ip) comm.all_gather(ddl::host_view(std::as_const(out).data() + r * per, per), ddl::host_view(out));
      else comm.all_gather(ddl::host_view(std::as_const(own)), ddl::host_view(out));
      for (std::size_t i = 0; i < count; ++i)
        if (out[i] != value(static_cast<int>(i / per), i % per, call)) {
          log.add(where + " rank " + std::to_string(r) + (ip ? " in place" : " out of place") + " call " +
                  std::to_string(call) + ": element " + std::to_string(i) + " is " + std::to_string(out[i]));
          break;
        }
    }
}

}  // namespace ddl_test
