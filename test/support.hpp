#pragma once
// Shared helpers for the ddl test suites: the verifiable inputs and exact
// references of <ddl/testing.hpp> (host and device code: the CUDA tests fill
// and check device buffers with them through Thrust), ddl::thread_barrier,
// and a failure log that worker threads fill and the test thread asserts on.
#include <cstddef>
#include <mutex>
#include <string>
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

}  // namespace ddl_test
