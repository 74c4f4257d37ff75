#pragma once
// The size sweep every ddl benchmark takes: -b MIN -e MAX -f FACTOR (sizes
// take K, M, G suffixes, powers of 1024) and -n ITERS, with the same checks
// and the same sizes everywhere.
#include <ddl/core/config.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace ddl_bench {

struct sweep_flags {
  std::size_t min_bytes = 4096, max_bytes = 256u << 20;
  double factor = 2;
  int iters = 20;

  // Whether `a` is one of the sweep's flags (each takes a value).
  static bool names(const std::string& a) { return a == "-b" || a == "-e" || a == "-f" || a == "-n"; }

  // Takes flag `a` with its value `v` when it is a sweep flag (false when it
  // is not). A bad value throws (std::invalid_argument, ddl::error).
  bool take(const std::string& a, const std::string& v) {
    if (a == "-b") min_bytes = ddl::detail::parse_bytes("-b", v);
    else if (a == "-e") max_bytes = ddl::detail::parse_bytes("-e", v);
    else if (a == "-f") factor = std::stod(v);
    else if (a == "-n") iters = std::stoi(v);
    else return false;
    return true;
  }

  // What is wrong with the sweep, or "" (`smallest`: the least size the
  // benchmark takes; one size needs no factor).
  std::string problem(std::size_t smallest) const {
    if (min_bytes < smallest) return "-b must be at least " + std::to_string(smallest);
    if (max_bytes < min_bytes) return "-e must be >= -b";
    if (!(factor > 1) && min_bytes != max_bytes) return "-f must be > 1";
    if (iters < 1) return "-n must be >= 1";
    return "";
  }

  // MIN, MIN * FACTOR, ... up to MAX, each rounded down to a whole number of
  // `unit` bytes (at least one), without repeats.
  std::vector<std::size_t> sizes(std::size_t unit) const {
    std::vector<std::size_t> out;
    for (double b = static_cast<double>(min_bytes); b <= static_cast<double>(max_bytes) * 1.0000001; b *= factor) {
      const std::size_t bytes = std::max(unit, static_cast<std::size_t>(b) / unit * unit);
      if (out.empty() || out.back() != bytes) out.push_back(bytes);
      if (!(factor > 1)) break;
    }
    return out;
  }
};

}  // namespace ddl_bench
