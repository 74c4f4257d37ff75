// Bounded random-input tests ("fuzzing" without a fuzzer): DDL_TOPOLOGY
// strings and byte sizes built from the grammar's own tokens mixed with
// garbage. Every input either parses into something valid or is rejected
// with the library's error naming where; nothing else (no crash, no other
// exception, no undefined behaviour: the sanitizer tier runs this too).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>

#include <ddl.hpp>

namespace {

// A string of `pieces` tokens: numbers (plain, huge, tiny, signed, with
// exponents), units, separators, and random bytes.
std::string random_input(std::mt19937_64& g, const std::vector<std::string>& words) {
  std::uniform_int_distribution<int> pieces(0, 24), pick(0, 99);
  std::string s;
  const int n = pieces(g);
  for (int i = 0; i < n; ++i) {
    const int k = pick(g);
    if (k < 35) s += words[static_cast<std::size_t>(g() % words.size())];
    else if (k < 60) s += std::to_string(static_cast<long long>(g() % 100000) - (k < 40 ? 50000 : 0));
    else if (k < 70) s += (k % 2 ? ":" : ",");
    else if (k < 80) {
      std::uniform_real_distribution<double> e(-330, 330);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", std::pow(10.0, e(g)));
      s += buf;
    } else if (k < 90) s += static_cast<char>(32 + g() % 95);
    else s += static_cast<char>(g() % 256);
  }
  return s;
}

}  // namespace

TEST_CASE("fuzz: 100000 DDL_TOPOLOGY strings parse into valid topologies or a topology_error with a caret") {
  const std::vector<std::string> words{"GB/s", "MB/s", "KB/s", "B/s", "TB/s", "GiB/s", "MiB/s", "Gbit/s", "Mbit/s",
                                       "gbit", "mbit", "kbit", "bit/s", "s", "ms", "us", "ns", "x", "e", "E", "e+",
                                       "e-", ".", "-", "+", "nan", "inf", "0x10", "1e400", "16777216", "2147483648",
                                       "4:10GB/s:2us", "2:1Gbit/s:20us:2", ":x5GB/s", "", " "};
  std::mt19937_64 g(20261124);
  long parsed = 0, rejected = 0, wrong = 0;
  std::string first_wrong;
  for (int i = 0; i < 100000; ++i) {
    const std::string text = random_input(g, words);
    try {
      const ddl::topology t = ddl::topology::parse(text);
      ++parsed;
      bool ok = t.count() >= 1 && t.count() <= 8;
      for (std::size_t l = 0; l < t.count(); ++l) {
        const ddl::level& v = t[l];
        ok = ok && v.extent >= 1 && std::isfinite(v.bandwidth) && v.bandwidth > 0 &&
             v.bandwidth <= ddl::topology::max_bandwidth && std::isfinite(v.latency) && v.latency >= 0 &&
             v.latency <= ddl::topology::max_latency && std::isfinite(v.exchange) && v.exchange >= 0 &&
             v.exchange <= ddl::topology::max_bandwidth && v.links >= 0;
      }
      ok = ok && !t.str().empty();
      ok = ok && t.size() >= 1;  // the extents' product fits an int (the parser checks)
      if (!ok && wrong++ == 0) first_wrong = "accepted but invalid: '" + text + "'";
    } catch (const ddl::topology_error& e) {
      ++rejected;
      const std::string m = e.what();
      if ((m.find('^') == std::string::npos || m.find("DDL_TOPOLOGY") == std::string::npos) && wrong++ == 0)
        first_wrong = "rejected without a caret: '" + text + "': " + m;
    } catch (const std::exception& e) {
      if (wrong++ == 0) first_wrong = "other exception for '" + text + "': " + e.what();
    }
  }
  CAPTURE(parsed);
  CAPTURE(rejected);
  CHECK_MESSAGE(wrong == 0, first_wrong);
  CHECK(parsed > 100);  // the generator reaches valid strings too
}

TEST_CASE("fuzz: 100000 byte sizes parse or are an invalid_argument naming the flag") {
  const std::vector<std::string> words{"K", "M", "G", "k", "m", "g", "B", "b", "KB", "e", "e+", "e-", ".", "-", "+",
                                       "nan", "inf", "infinity", "0x1p70", "1e19", "1e400", "18446744073709551616", ""};
  std::mt19937_64 g(7);
  long parsed = 0, wrong = 0;
  std::string first_wrong;
  for (int i = 0; i < 100000; ++i) {
    const std::string text = random_input(g, words);
    try {
      const std::size_t v = ddl::detail::parse_bytes("-b", text);
      ++parsed;
      if (v > (std::size_t{1} << 62) && wrong++ == 0) first_wrong = "accepted an absurd size: '" + text + "'";
    } catch (const ddl::invalid_argument& e) {
      if (std::string(e.what()).find("-b") == std::string::npos && wrong++ == 0)
        first_wrong = "rejected without naming the flag: '" + text + "': " + e.what();
    } catch (const std::exception& e) {
      if (wrong++ == 0) first_wrong = "other exception for '" + text + "': " + e.what();
    }
  }
  CAPTURE(parsed);
  CHECK_MESSAGE(wrong == 0, first_wrong);
  CHECK(parsed > 100);
}
