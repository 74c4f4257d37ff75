#pragma once
/// \file
/// Topology descriptors: a list of levels, innermost first. Each level has
/// an extent (how many groups of the level below it joins), the bandwidth of
/// one link, the per-step latency, and how many links one group of the level
/// below shares to reach its peers at this level (e.g. a node of 4 GPUs with
/// 2 NICs: `links = 2` at the node level; 0 = one link per rank, no sharing).
///
/// A level may also give its exchange bandwidth: bytes/s each way while a
/// rank sends to and receives from the same peer at once (the steps of a
/// ring of two and of the doubling algorithms). On some networks it is lower
/// than the one-way figure (a TCP connection's acknowledgements and
/// handshakes queue behind its own data); 0 means the same.
///
/// A level's links may be private (`:private`): they carry only messages
/// between ranks whose lowest common level is this one, and a message that
/// leaves the unit for an outer level goes out through the outer levels'
/// links alone. A node whose GPUs are joined by NVLink but reach the network
/// through their own ports (the paper's S822LC: GPU-to-GPU NVLink, the
/// InfiniBand adapters behind the CPUs) is such a level. Without it every
/// message crosses the links of every level up to its lowest common one.
/// On the outermost level it changes nothing.
///
/// Two forms feed one planner: `ddl::topology` (a run-time value, parsed from
/// `DDL_TOPOLOGY`) and `ddl::static_topology<ddl::level_c<...>...>` (a type
/// with `constexpr` costs).
///
/// `DDL_TOPOLOGY` syntax: levels separated by commas, innermost first; each
/// `extent:bandwidth:latency[:links][:x<exchange bandwidth>][:private]`, e.g.
/// `4:20GB/s:3us,16:10GB/s:5us,4:9.5GB/s:8us`, `2:24MB/s:30us:2:x18MB/s` or
/// `4:20GB/s:3us:private,16:10GB/s:5us,4:9.5GB/s:8us`.
/// Bandwidth units: B/s KB/s MB/s GB/s (powers of 1000), KiB/s MiB/s GiB/s,
/// Kbit/s Mbit/s Gbit/s (also tc's kbit mbit gbit). Latency units: s ms us ns.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <utility>
#include <cstdlib>
#include <string>

#include "ddl/core/error.hpp"
#include "ddl/topology/extents.hpp"

namespace ddl {

/// One level of a topology.
struct level {
  int extent = 1;          ///< groups of the level below joined at this level
  double bandwidth = 1e9;  ///< bytes/s of one link, one direction
  double latency = 1e-6;   ///< seconds per communication step at this level
  int links = 0;           ///< links one group of the level below shares here; 0 = one per rank
  double exchange = 0;     ///< bytes/s each way in an exchange with one peer; 0 = `bandwidth`
  bool private_links = false;  ///< links carry only messages whose lowest common level is this one
};

/// A level as a type, for static topologies: bandwidths in bytes/s, latency in ns.
template <int Extent, long long BytesPerSecond, long long LatencyNs, int Links = 0, long long ExchangeBytesPerSecond = 0,
          bool PrivateLinks = false>
struct level_c {
  static_assert(Extent > 0, "ddl: a level's extent must be positive");
  static_assert(BytesPerSecond > 0, "ddl: a level's bandwidth must be positive");
  static_assert(LatencyNs >= 0, "ddl: a level's latency must not be negative");
  static_assert(Links >= 0, "ddl: a level's link count must not be negative");
  static_assert(ExchangeBytesPerSecond >= 0, "ddl: a level's exchange bandwidth must not be negative");
  /// The level these parameters make.
  static constexpr level value{Extent, static_cast<double>(BytesPerSecond), static_cast<double>(LatencyNs) * 1e-9,
                               Links, static_cast<double>(ExchangeBytesPerSecond), PrivateLinks};
};

/// A topology known at compile time.
/// Example: `using paper = ddl::static_topology<ddl::level_c<4, 20'000'000'000, 3000>,
///                                              ddl::level_c<16, 10'000'000'000, 5000>,
///                                              ddl::level_c<4, 9'500'000'000, 8000>>;`
template <class... Levels>
struct static_topology {
  static_assert(sizeof...(Levels) >= 1 && sizeof...(Levels) <= max_dims,
                "ddl: a topology has between 1 and ddl::max_dims levels");
  static constexpr std::size_t count = sizeof...(Levels);              ///< levels
  static constexpr std::array<level, count> levels{Levels::value...};  ///< innermost first
  static constexpr int size = (Levels::value.extent * ...);            ///< ranks
};

/// A topology known at run time.
class topology {
 public:
  topology() = default;
  /// The levels of `[first, last)`, innermost first (each checked as `add` does).
  template <class It>
  topology(It first, It last) {
    for (; first != last; ++first) add(*first);
  }
  /// The levels listed, innermost first.
  topology(std::initializer_list<level> l) : topology(l.begin(), l.end()) {}
  /// A compile-time topology's levels.
  template <class... L>
  topology(static_topology<L...>) : topology(static_topology<L...>::levels.begin(), static_topology<L...>::levels.end()) {}

  /// One level of `ranks` ranks, every link alike.
  static topology uniform(int ranks, double bandwidth, double latency) {
    return topology{level{ranks, bandwidth, latency, 0}};
  }

  /// Parses the `DDL_TOPOLOGY` syntax. Throws `topology_error` naming the
  /// level and field at fault, with a caret under it.
  static topology parse(const std::string& text, const char* source = "DDL_TOPOLOGY");

  /// `DDL_TOPOLOGY` if set (and not `auto`), else `fallback`. Throws
  /// `topology_error` if its ranks differ from `ranks` (same on every rank).
  static topology from_env(int ranks, const topology& fallback) {
    const char* s = std::getenv("DDL_TOPOLOGY");
    topology t = (s && *s && std::string(s) != "auto") ? parse(s) : fallback;
    t.check(ranks);
    return t;
  }

  /// Levels.
  std::size_t count() const noexcept { return count_; }
  /// Level `i`, innermost first.
  const level& operator[](std::size_t i) const { return levels_[i]; }
  /// Level `i`, innermost first.
  level& operator[](std::size_t i) { return levels_[i]; }
  /// The levels, `count()` of them.
  const level* data() const noexcept { return levels_.data(); }
  /// Ranks: the product of the extents.
  int size() const {
    int p = 1;
    for (std::size_t i = 0; i < count_; ++i) p *= levels_[i].extent;
    return p;
  }
  /// Link figures past these are rejected as no link's (and infinities with them).
  static constexpr double max_bandwidth = 1e15, max_latency = 1000;
  /// Ranks a topology may describe (its extents' product fits an `int`).
  static constexpr long long max_ranks = 2147483647;
  /// Appends an outer level; throws `topology_error` naming what is wrong with it.
  void add(const level& l) {
    if (count_ == max_dims) throw topology_error("a topology has at most " + std::to_string(max_dims) + " levels");
    if (l.extent >= 1 && static_cast<long long>(size()) * l.extent > max_ranks)
      throw topology_error("level " + std::to_string(count_ + 1) + " (extent " + std::to_string(l.extent) +
                           ") makes the topology hold more than 2^31-1 ranks");
    if (l.extent < 1 || !(l.bandwidth > 0 && l.bandwidth <= max_bandwidth) || !(l.latency >= 0 && l.latency <= max_latency) ||
        l.links < 0 || !(l.exchange >= 0 && l.exchange <= max_bandwidth))
      throw topology_error("level " + std::to_string(count_ + 1) +
                           " needs extent >= 1, 0 < bandwidth <= 1 PB/s, 0 <= latency <= 1000 s, links >= 0, "
                           "0 <= exchange <= 1 PB/s");
    levels_[count_++] = l;
  }
  /// Throws `topology_error` unless the levels hold exactly `ranks` ranks.
  void check(int ranks) const {
    if (size() != ranks)
      throw topology_error("topology " + str() + " describes " + std::to_string(size()) + " ranks but the group has " +
                           std::to_string(ranks));
  }
  /// `extent:bandwidth:latency[:links][:x<exchange>][:private]` per level, as `DDL_TOPOLOGY` takes it.
  std::string str() const {
    std::string s;
    for (std::size_t i = 0; i < count_; ++i) {
      const auto& l = levels_[i];
      s += (i ? "," : "") + std::to_string(l.extent) + ":" + format_number(l.bandwidth / 1e9) + "GB/s:" +
           format_number(l.latency * 1e6) + "us" + (l.links ? ":" + std::to_string(l.links) : "") +
           (l.exchange > 0 ? ":x" + format_number(l.exchange / 1e9) + "GB/s" : "") + (l.private_links ? ":private" : "");
    }
    return s;
  }

 private:
  static std::string format_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  std::array<level, max_dims> levels_{};
  std::size_t count_ = 0;
};

namespace detail {

// Splits "a:b:c" keeping each piece's offset in the whole string.
struct field {
  std::string text;
  std::size_t at;
};

/// At most `most` characters of a piece of the input for an error message,
/// "..." standing for the rest.
inline std::string clip(const std::string& s, std::size_t most = 40) {
  return s.size() <= most ? s : s.substr(0, most) + "...";
}

/// Throws the parse error `why` with the input quoted and a caret line under
/// `len` characters from `at`: at most `window` characters of a long input,
/// around the caret ("..." where it is cut).
[[noreturn]] inline void topology_parse_error(const char* source, const std::string& whole, std::size_t at,
                                              std::size_t len, const std::string& why) {
  constexpr std::size_t window = 200;
  std::size_t begin = 0, end = whole.size();
  if (whole.size() > window) {
    begin = at > window / 2 ? std::min(at - window / 2, whole.size() - window) : 0;
    end = begin + window;
  }
  const std::string head = begin > 0 ? "..." : "", tail = end < whole.size() ? "..." : "";
  const std::size_t col = head.size() + (at - std::min(at, begin));
  len = std::min(len ? len : 1, std::max<std::size_t>(1, end > at ? end - at : 1));
  std::string caret(col, ' ');
  caret += std::string(len, '^');
  // Control bytes (a NUL would cut the message short) show as '?', one for
  // one, so the caret stays under its field.
  std::string m = std::string(source) + ": " + why + "\n  " + head + whole.substr(begin, end - begin) + tail +
                  "\n  " + caret;
  for (char& ch : m)
    if ((static_cast<unsigned char>(ch) < 32 && ch != '\n') || ch == 127) ch = '?';
  throw topology_error(m);
}

inline double parse_quantity(const char* source, const std::string& whole, const field& f, const char* what,
                             const std::pair<const char*, double>* units, std::size_t nunits, const char* unit_list) {
  const std::string& s = f.text;
  std::size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.' || s[pos] == 'e' ||
                            s[pos] == 'E' || ((s[pos] == '-' || s[pos] == '+') && pos > 0 && (s[pos - 1] == 'e' || s[pos - 1] == 'E'))))
    ++pos;
  if (pos == 0) topology_parse_error(source, whole, f.at, s.size(), std::string(what) + " '" + clip(s) + "' does not start with a number");
  char* end = nullptr;
  const std::string num = s.substr(0, pos);
  errno = 0;
  const double v = std::strtod(num.c_str(), &end);
  const bool out_of_range = errno == ERANGE;
  if (*end != '\0') topology_parse_error(source, whole, f.at, pos, std::string(what) + " '" + clip(num) + "' is not a number");
  // Too small for a double (1e-400): strtod returns 0 or a denormal, a
  // value nobody wrote; too large (1e400) is caught as not finite below.
  if (out_of_range && std::isfinite(v))
    topology_parse_error(source, whole, f.at, pos, std::string(what) + " '" + clip(num) + "' is too small for a double (it would read as 0)");
  const std::string unit = s.substr(pos);
  for (std::size_t i = 0; i < nunits; ++i)
    if (unit == units[i].first) {
      const double q = v * units[i].second;
      if (!std::isfinite(q)) topology_parse_error(source, whole, f.at, s.size(), std::string(what) + " '" + clip(s) + "' is not finite");
      if (q == 0 && v != 0)
        topology_parse_error(source, whole, f.at, s.size(), std::string(what) + " '" + clip(s) + "' is too small for a double (it would read as 0)");
      return q;
    }
  topology_parse_error(source, whole, f.at + pos, unit.size(),
                       std::string(what) + " '" + clip(s) + "': unknown unit '" + clip(unit) + "' (use " + unit_list + ")");
}

}  // namespace detail

inline topology topology::parse(const std::string& text, const char* source) {
  static const std::pair<const char*, double> bw_units[] = {
      {"B/s", 1.0},        {"KB/s", 1e3},       {"MB/s", 1e6},       {"GB/s", 1e9},          {"TB/s", 1e12},
      {"KiB/s", 1024.0},   {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
      {"bit/s", 0.125},    {"Kbit/s", 125.0},   {"Mbit/s", 125e3},   {"Gbit/s", 125e6},      {"Gb/s", 125e6},
      {"Mb/s", 125e3},     {"kbit", 125.0},     {"mbit", 125e3},     {"gbit", 125e6}};
  static const std::pair<const char*, double> lat_units[] = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  topology t;
  if (text.empty()) detail::topology_parse_error(source, text, 0, 1, "empty topology");
  // No field holds a space: one before a number would pass strtol unseen.
  for (std::size_t i = 0; i < text.size(); ++i)
    if (std::isspace(static_cast<unsigned char>(text[i])))
      detail::topology_parse_error(source, text, i, 1,
                                   "whitespace at offset " + std::to_string(i) + " (a topology has none: 4:20GB/s:3us,16:10GB/s:5us)");
  std::size_t start = 0;
  int lvl = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t stop = comma == std::string::npos ? text.size() : comma;
    ++lvl;
    std::array<detail::field, 7> f{};
    std::size_t nf = 0, p = start;
    while (p <= stop) {
      const std::size_t colon = text.find(':', p);
      const std::size_t e = (colon == std::string::npos || colon > stop) ? stop : colon;
      if (nf == f.size())
        detail::topology_parse_error(source, text, p, stop - p, "level " + std::to_string(lvl) + " has too many fields (extent:bandwidth:latency[:links][:x<exchange>][:private])");
      f[nf++] = {text.substr(p, e - p), p};
      p = e + 1;
    }
    const std::string where = "level " + std::to_string(lvl) + " ('" + detail::clip(text.substr(start, stop - start)) + "')";
    if (nf < 3)
      detail::topology_parse_error(source, text, start, stop - start,
                                   where + " needs extent:bandwidth:latency[:links][:x<exchange>][:private], got " + std::to_string(nf) + " field(s)");
    level l;
    char* end = nullptr;
    const long ext = std::strtol(f[0].text.c_str(), &end, 10);
    if (f[0].text.empty() || *end != '\0' || ext < 1 || ext > 1 << 24)
      detail::topology_parse_error(source, text, f[0].at, f[0].text.size(), where + ": extent '" + detail::clip(f[0].text) + "' is not a positive integer");
    l.extent = static_cast<int>(ext);
    l.bandwidth = detail::parse_quantity(source, text, f[1], (where + ": bandwidth").c_str(), bw_units,
                                         sizeof bw_units / sizeof bw_units[0], "B/s, KB/s, MB/s, GB/s, GiB/s, Mbit/s, Gbit/s");
    if (!(l.bandwidth > 0)) detail::topology_parse_error(source, text, f[1].at, f[1].text.size(), where + ": bandwidth must be positive");
    if (l.bandwidth > max_bandwidth)
      detail::topology_parse_error(source, text, f[1].at, f[1].text.size(), where + ": bandwidth above 1 PB/s is not a link's");
    l.latency = detail::parse_quantity(source, text, f[2], (where + ": latency").c_str(), lat_units,
                                       sizeof lat_units / sizeof lat_units[0], "s, ms, us, ns");
    if (l.latency < 0) detail::topology_parse_error(source, text, f[2].at, f[2].text.size(), where + ": latency must not be negative");
    if (l.latency > max_latency)
      detail::topology_parse_error(source, text, f[2].at, f[2].text.size(), where + ": latency above 1000 s is not a link's");
    // Optional fields after the latency: a link count, an exchange bandwidth ('x...'), `private`, once each.
    bool have_links = false;
    for (std::size_t k = 3; k < nf; ++k) {
      if (f[k].text == "private") {
        if (l.private_links)
          detail::topology_parse_error(source, text, f[k].at, f[k].text.size(), where + " says 'private' twice");
        l.private_links = true;
      } else if (!f[k].text.empty() && f[k].text[0] == 'x') {
        if (l.exchange > 0)
          detail::topology_parse_error(source, text, f[k].at, f[k].text.size(), where + " gives the exchange bandwidth twice");
        const detail::field bw{f[k].text.substr(1), f[k].at + 1};
        l.exchange = detail::parse_quantity(source, text, bw, (where + ": exchange bandwidth").c_str(), bw_units,
                                            sizeof bw_units / sizeof bw_units[0], "B/s, KB/s, MB/s, GB/s, GiB/s, Mbit/s, Gbit/s");
        if (!(l.exchange > 0))
          detail::topology_parse_error(source, text, f[k].at, f[k].text.size(), where + ": exchange bandwidth must be positive");
        if (l.exchange > max_bandwidth)
          detail::topology_parse_error(source, text, f[k].at, f[k].text.size(), where + ": exchange bandwidth above 1 PB/s is not a link's");
      } else if (!have_links) {
        const long links = std::strtol(f[k].text.c_str(), &end, 10);
        if (f[k].text.empty() || *end != '\0' || links < 1 || links > 1 << 24)
          detail::topology_parse_error(source, text, f[k].at, f[k].text.size(), where + ": links '" + detail::clip(f[k].text) + "' is not a positive integer");
        l.links = static_cast<int>(links);
        have_links = true;
      } else {
        detail::topology_parse_error(source, text, f[k].at, f[k].text.size(), where + " has too many fields");
      }
    }
    if (t.count_ == max_dims) detail::topology_parse_error(source, text, start, stop - start, "more than 8 levels");
    if (static_cast<long long>(t.size()) * l.extent > max_ranks)
      detail::topology_parse_error(source, text, f[0].at, f[0].text.size(),
                                   where + ": the extents' product passes 2^31-1 ranks");
    t.levels_[t.count_++] = l;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return t;
}

}  // namespace ddl
