#pragma once
/// \file
/// The call check (`options::check_calls`, `DDL_CHECK=1`): before each
/// collective every rank trades a fingerprint of its call (collective,
/// counts, dtype, op, root, strategy, and whether its own argument check
/// rejected it), so ranks that disagree all get the same `mismatch_error`
/// naming the field, both values and both ranks, and a rank that rejected
/// its arguments makes every rank fail naming it, instead of a wrong result
/// or a hang. The communicator trades the fingerprints; what they mean is
/// decided here, the same way on every rank.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ddl/core/dtype.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/op.hpp"

namespace ddl {
namespace detail {

/// What every rank must agree on for one call; traded before the call.
struct fingerprint {
  char collective[16] = {};
  std::uint64_t count_in = 0, count_out = 0;
  std::int32_t type = 0, oper = 0, root = -1;
  std::int32_t rejected = 0;  // this rank's argument check failed: `reason`
  char reason[160] = {};
  char strategy[32] = {};  // `Strategy::name`
};

inline fingerprint fingerprint_of(const char* collective, const char* strategy, std::size_t in, std::size_t out,
                                  dtype t, op o, int root = -1) {
  fingerprint f;
  std::snprintf(f.collective, sizeof f.collective, "%s", collective);
  std::snprintf(f.strategy, sizeof f.strategy, "%s", strategy);
  f.count_in = in;
  f.count_out = out;
  f.type = static_cast<std::int32_t>(t);
  f.oper = static_cast<std::int32_t>(o);
  f.root = root;
  return f;
}

/// Every rank's fingerprint of call `call` (`all[me]` this rank's): returns
/// when they agree, or when this rank rejected its own arguments (it
/// rethrows its own error); else throws the same error on every rank: the
/// first rank that rejected its arguments (`invalid_argument`), or the first
/// field in which a rank differs from rank 0 (`mismatch_error`).
inline void judge_fingerprints(const std::vector<fingerprint>& all, std::size_t me, const std::string& call) {
  for (std::size_t r = 0; r < all.size(); ++r) {
    const fingerprint& f = all[r];
    if (!f.rejected) continue;
    if (all[me].rejected) return;
    throw invalid_argument(call + ": rank " + std::to_string(r) + " rejected its arguments: " + f.reason +
                           " (DDL_CHECK)");
  }
  const fingerprint& a = all[0];
  for (std::size_t r = 1; r < all.size(); ++r) {
    const fingerprint& b = all[r];
    auto differ = [&](const char* field, const std::string& x, const std::string& y) {
      throw mismatch_error(call + ": ranks disagree on the " + field + ": rank 0 passed " + x + ", rank " +
                           std::to_string(r) + " passed " + y + " (DDL_CHECK)");
    };
    if (std::strncmp(a.collective, b.collective, sizeof a.collective) != 0)
      differ("collective", a.collective, b.collective);
    if (a.count_in != b.count_in) differ("input count", std::to_string(a.count_in), std::to_string(b.count_in));
    if (a.count_out != b.count_out) differ("output count", std::to_string(a.count_out), std::to_string(b.count_out));
    if (a.type != b.type) differ("dtype", name_of(static_cast<dtype>(a.type)), name_of(static_cast<dtype>(b.type)));
    if (a.oper != b.oper) differ("op", name_of(static_cast<op>(a.oper)), name_of(static_cast<op>(b.oper)));
    if (a.root != b.root) differ("root", std::to_string(a.root), std::to_string(b.root));
    if (std::strncmp(a.strategy, b.strategy, sizeof a.strategy) != 0) differ("strategy", a.strategy, b.strategy);
  }
}

/// An all-to-all's counts checked pair by pair: `theirs[2p]` is what rank p
/// sends this rank (`r`), `theirs[2p + 1]` what it expects from it. The
/// first pair that disagrees, in words, or "" when all agree.
inline std::string parts_disagreement(const std::vector<std::size_t>& sends, const std::vector<std::size_t>& recvs,
                                      const std::vector<std::uint64_t>& theirs, std::size_t r) {
  for (std::size_t p = 0; p < sends.size(); ++p) {
    if (p == r) continue;
    if (theirs[2 * p] != recvs[p])
      return "rank " + std::to_string(p) + " sends rank " + std::to_string(r) + " " + std::to_string(theirs[2 * p]) +
             " elements, rank " + std::to_string(r) + " expects " + std::to_string(recvs[p]);
    if (theirs[2 * p + 1] != sends[p])
      return "rank " + std::to_string(r) + " sends rank " + std::to_string(p) + " " + std::to_string(sends[p]) +
             " elements, rank " + std::to_string(p) + " expects " + std::to_string(theirs[2 * p + 1]);
  }
  return "";
}

}  // namespace detail
}  // namespace ddl
