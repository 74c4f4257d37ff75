#pragma once
// Shared helpers for the ddl test suites: the verifiable inputs and exact
// references of <ddl/testing.hpp> (host and device code: the CUDA tests fill
// and check device buffers with them through Thrust), ddl::thread_barrier,
// a failure log that worker threads fill and the test thread asserts on, and
// one rank's part of an all-gather, an all-to-all, a point-to-point and a
// rooted check (threads and MPI processes alike).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// All-to-all input: element i of what rank `from` sends rank `to`; exact in
// every dtype, different for every pair.
template <class T>
T all_to_all_value(int from, int to, std::size_t i) {
  return to_element<T>(static_cast<std::int64_t>((i * 5 + static_cast<std::size_t>(from) * 11 +
                                                  static_cast<std::size_t>(to) * 3) % 97) - 48);
}

// Rank a sends rank b `per` elements, or (`varied`) a count that differs
// between pairs, zero for some, `per` at most.
inline std::vector<std::vector<std::size_t>> all_to_all_parts(int n, std::size_t per, bool varied) {
  std::vector<std::vector<std::size_t>> parts(static_cast<std::size_t>(n), std::vector<std::size_t>(static_cast<std::size_t>(n), per));
  if (varied)
    for (std::size_t a = 0; a < parts.size(); ++a)
      for (std::size_t b = 0; b < parts.size(); ++b) parts[a][b] = per * ((a * 3 + b * 5 + 1) % 4) / 3;
  return parts;
}

// What an all-to-all check varies: the form with counts (else the even one),
// in place, asynchronous.
struct all_to_all_case {
  bool counts = false, in_place = false, async = false;
  std::string str() const {
    return std::string(counts ? "with counts" : "even") + (in_place ? ", in place" : ", out of place") +
           (async ? ", asynchronous" : ", blocking");
  }
};

// One rank's part of an all-to-all check: rank a sends rank b `parts[a][b]`
// elements (`all_to_all_value`); the output compared bit for bit with what
// every rank sent this one, the first wrong element logged under `where`.
// The buffers are host memory said to lie `at` (a fake device's).
template <class T, class Comm>
void check_all_to_all(Comm& comm, int r, const std::vector<std::vector<std::size_t>>& parts, all_to_all_case k,
                      failure_log& log, const std::string& where, ddl::location space = {}) {
  const auto n = parts.size(), me = static_cast<std::size_t>(r);
  std::vector<std::size_t> sends = parts[me], recvs(n);
  for (std::size_t j = 0; j < n; ++j) recvs[j] = parts[j][me];
  std::size_t in_count = 0, out_count = 0;
  for (std::size_t j = 0; j < n; ++j) {
    in_count += sends[j];
    out_count += recvs[j];
  }
  // In place: one buffer, as long as the longer of the two.
  std::vector<T> in(k.in_place ? std::max(in_count, out_count) : in_count), out(k.in_place ? 0 : out_count);
  for (std::size_t j = 0, at = 0; j < n; at += sends[j], ++j)
    for (std::size_t i = 0; i < sends[j]; ++i) in[at + i] = all_to_all_value<T>(r, static_cast<int>(j), i);
  if (!out.empty()) std::memset(static_cast<void*>(out.data()), 0x5a, out.size() * sizeof(T));
  const T* result = k.in_place ? in.data() : out.data();
  ddl::const_buffer_view src = ddl::host_view(std::as_const(in).data(), in_count);
  ddl::buffer_view dst = ddl::host_view(k.in_place ? in.data() : out.data(), out_count);
  src.where = dst.where = space;
  if (k.counts) {
    if (k.async) comm.all_to_all_async(src, sends, dst, recvs).wait();
    else comm.all_to_all(src, sends, dst, recvs);
  } else {
    if (k.async) comm.all_to_all_async(src, dst).wait();
    else comm.all_to_all(src, dst);
  }
  for (std::size_t j = 0, at = 0; j < n; at += recvs[j], ++j)
    for (std::size_t i = 0; i < recvs[j]; ++i) {
      const T want = all_to_all_value<T>(static_cast<int>(j), r, i);
      if (std::memcmp(&result[at + i], &want, sizeof(T)) != 0) {
        log.add(where + " rank " + std::to_string(r) + " " + k.str() + ": element " + std::to_string(i) +
                " from rank " + std::to_string(j) + " is wrong");
        return;
      }
    }
}

// Point-to-point input: element i of message `k` that rank `from` sends;
// exact in every dtype, different for every sender and message.
template <class T>
T transfer_value(int from, int k, std::size_t i) {
  return to_element<T>(static_cast<std::int64_t>((i * 3 + static_cast<std::size_t>(from) * 13 +
                                                  static_cast<std::size_t>(k) * 29) % 89) - 44);
}

// One rank's part of a point-to-point check around a ring of `n` ranks:
// each sends its successor three messages of `per` elements, under tags 1,
// 2 and 1 again, and receives its predecessor's three with the receives
// posted in another order (tag 2 first): transfers match by tag, and in
// issue order within one. `async`: the sends asynchronous too, everything
// waited for at the end; else each send blocks (every rank sends before its
// successor has taken anything, so a blocking send must leave the parked
// receives moving). Every element compared bit for bit, the first wrong one
// logged under `where`.
template <class T, class Comm>
void check_transfers(Comm& comm, int r, int n, std::size_t per, bool async, failure_log& log,
                     const std::string& where) {
  if (n < 2) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n, tags[3] = {1, 2, 1};
  std::vector<std::vector<T>> out(3, std::vector<T>(per)), in(3, std::vector<T>(per));
  for (int k = 0; k < 3; ++k) {
    for (std::size_t i = 0; i < per; ++i) out[static_cast<std::size_t>(k)][i] = transfer_value<T>(r, k, i);
    if (per) std::memset(static_cast<void*>(in[static_cast<std::size_t>(k)].data()), 0x5a, per * sizeof(T));
  }
  std::vector<ddl::collective_request> pending;
  for (int k : {1, 0, 2}) pending.push_back(comm.recv_async(ddl::host_view(in[static_cast<std::size_t>(k)]), prev, tags[k]));
  for (int k = 0; k < 3; ++k) {
    const auto data = ddl::host_view(std::as_const(out[static_cast<std::size_t>(k)]));
    if (async) pending.push_back(comm.send_async(data, next, tags[k]));
    else comm.send(data, next, tags[k]);
  }
  ddl::wait_all(pending.begin(), pending.end());
  for (int k = 0; k < 3; ++k)
    for (std::size_t i = 0; i < per; ++i) {
      const T want = transfer_value<T>(prev, k, i);
      if (std::memcmp(&in[static_cast<std::size_t>(k)][i], &want, sizeof(T)) != 0) {
        log.add(where + " rank " + std::to_string(r) + (async ? " asynchronous" : " blocking sends") + ": message " +
                std::to_string(k) + " (tag " + std::to_string(tags[k]) + ") element " + std::to_string(i) +
                " is wrong");
        return;
      }
    }
}

// One rank's part of a broadcast of `count` doubles from `root` (asynchronous
// for odd roots, blocking for even ones): every rank must end with the
// root's values; the first wrong element is logged under `where`.
template <class Comm>
void check_broadcast(Comm& comm, int r, std::size_t count, int root, failure_log& log, const std::string& where) {
  std::vector<double> v(count, -1.0);
  if (r == root)
    for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<double>(i % 977) + root;
  if (root % 2) comm.broadcast_async(ddl::host_view(v), root).wait();
  else comm.broadcast(ddl::host_view(v), root);
  for (std::size_t i = 0; i < count; ++i)
    if (v[i] != static_cast<double>(i % 977) + root) {
      log.add(where + " count " + std::to_string(count) + " root " + std::to_string(root) + " wrong at " +
              std::to_string(i));
      return;
    }
}

// One rank's part of a check of `sendrecv` (`MPI_Sendrecv`) around a ring of
// `n` ranks, the sizes differing by sender (rank f's message k has
// `per + (f + k) % 3` elements, so a receive sized from the wrong sender
// fails): a blocking shift (message 0); then an asynchronous one (1) issued
// before a `recv_async` and a blocking `send` under the same tag (2): each
// half matches the peer's plain calls in issue order; then ranks 2j and
// 2j + 1 exchange (3: `dest == source`, blocking on even `per`, else
// asynchronous; the last rank of an odd count sits it out). Bit for bit,
// the first wrong element logged under `where`.
template <class T, class Comm>
void check_sendrecv(Comm& comm, int r, int n, std::size_t per, failure_log& log, const std::string& where) {
  if (n < 2) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n, partner = r ^ 1;
  auto size_of = [per](int from, int k) { return per + static_cast<std::size_t>(from + k) % 3; };
  std::vector<std::vector<T>> out(4), in(4);
  const int from[4] = {prev, prev, prev, partner};
  for (int k = 0; k < 4; ++k) {
    auto& o = out[static_cast<std::size_t>(k)];
    o.resize(size_of(r, k));
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = transfer_value<T>(r, k, i);
    auto& g = in[static_cast<std::size_t>(k)];
    g.resize(size_of(from[k], k));
    if (!g.empty()) std::memset(static_cast<void*>(g.data()), 0x5a, g.size() * sizeof(T));
  }
  auto view_out = [&](int k) { return ddl::host_view(std::as_const(out[static_cast<std::size_t>(k)])); };
  auto view_in = [&](int k) { return ddl::host_view(in[static_cast<std::size_t>(k)]); };
  comm.sendrecv(view_out(0), next, view_in(0), prev, 4);
  auto a = comm.sendrecv_async(view_out(1), next, view_in(1), prev, 4);
  auto b = comm.recv_async(view_in(2), prev, 4);
  comm.send(view_out(2), next, 4);
  a.wait();
  b.wait();
  const bool pairs = partner < n;
  if (pairs) {
    if (per % 2 == 0) comm.sendrecv(view_out(3), partner, view_in(3), partner, 6);
    else comm.sendrecv_async(view_out(3), partner, view_in(3), partner, 6).wait();
  }
  for (int k = 0; k < (pairs ? 4 : 3); ++k) {
    const auto& g = in[static_cast<std::size_t>(k)];
    for (std::size_t i = 0; i < g.size(); ++i) {
      const T want = transfer_value<T>(from[k], k, i);
      if (std::memcmp(&g[i], &want, sizeof(T)) != 0) {
        log.add(where + " rank " + std::to_string(r) + ": sendrecv message " + std::to_string(k) + " element " +
                std::to_string(i) + " is wrong");
        return;
      }
    }
  }
}

// One rank's part of a check of receives from any rank (`recv_any`): every
// rank but 0 sends rank 0 a message of `per` elements under tag 4; rank 0
// takes the n - 1 of them with receives from any rank (blocking and
// asynchronous in turn) and must get each rank's message once, the request
// naming its sender, bit for bit. Then ranks 0 and 1: rank 1 sends three
// messages under tag 9, which rank 0 takes with a receive from rank 1, one
// from any rank and one from rank 1 again, posted in that order: a message
// goes to the oldest receive it fits, so message k lands in receive k. And a
// receive from any rank under tag 10 leaves a message under tag 11, sent
// before, to the receive that names it. Ends with a barrier, so a rank's
// next round cannot meet this round's receives from any rank.
template <class T, class Comm>
void check_any_source(Comm& comm, int r, int n, std::size_t per, failure_log& log, const std::string& where) {
  if (n < 2) return;
  const auto fill = [per](int from, int k) {
    std::vector<T> v(per);
    for (std::size_t i = 0; i < per; ++i) v[i] = transfer_value<T>(from, k, i);
    return v;
  };
  const auto same = [per](const std::vector<T>& a, const std::vector<T>& b) {
    return per == 0 || std::memcmp(a.data(), b.data(), per * sizeof(T)) == 0;
  };
  const std::string at = where + " rank " + std::to_string(r) + ": ";
  if (r == 0) {
    std::vector<int> seen(static_cast<std::size_t>(n), 0);
    std::vector<T> got(per);
    for (int k = 1; k < n; ++k) {
      int from = -1;
      if (k % 2) {
        from = comm.recv_any(ddl::host_view(got), 4);
      } else {
        auto q = comm.recv_any_async(ddl::host_view(got), 4);
        q.wait();
        from = q.peer();
      }
      if (from < 1 || from >= n) {
        log.add(at + "a receive from any rank names sender " + std::to_string(from));
        return;
      }
      if (seen[static_cast<std::size_t>(from)]++)
        log.add(at + "rank " + std::to_string(from) + "'s message taken twice");
      if (!same(got, fill(from, 3))) log.add(at + "the message named rank " + std::to_string(from) + " is not its");
    }
  } else {
    const std::vector<T> mine = fill(r, 3);
    comm.send(ddl::host_view(mine), 0, 4);
  }
  // Rank 0's three receives are all posted before rank 1 sends (the
  // barrier runs after them in rank 0's queue), so each message finds them
  // all waiting.
  std::vector<std::vector<T>> in(3, std::vector<T>(per));
  ddl::collective_request a, b, c;
  if (r == 0) {
    a = comm.recv_async(ddl::host_view(in[0]), 1, 9);
    b = comm.recv_any_async(ddl::host_view(in[1]), 9);
    c = comm.recv_async(ddl::host_view(in[2]), 1, 9);
  }
  comm.barrier();
  if (r == 0) {
    a.wait();
    b.wait();
    c.wait();
    for (int k = 0; k < 3; ++k)
      if (!same(in[static_cast<std::size_t>(k)], fill(1, 10 + k)))
        log.add(at + "receive " + std::to_string(k) + " of three under one tag did not get message " +
                std::to_string(k));
    if (b.peer() != 1 || a.peer() != 1)
      log.add(at + "the requests name senders " + std::to_string(a.peer()) + " and " + std::to_string(b.peer()));
    std::vector<T> ten(per), eleven(per);
    if (comm.recv_any(ddl::host_view(ten), 10) != 1 || !same(ten, fill(1, 20)))
      log.add(at + "the receive from any rank under tag 10 did not get tag 10's message");
    comm.recv(ddl::host_view(eleven), 1, 11);
    if (!same(eleven, fill(1, 21))) log.add(at + "tag 11's message is wrong");
  } else if (r == 1) {
    for (int k = 0; k < 3; ++k) {
      const std::vector<T> m = fill(1, 10 + k);
      comm.send(ddl::host_view(m), 0, 9);
    }
    const std::vector<T> eleven = fill(1, 21), ten = fill(1, 20);
    auto e = comm.send_async(ddl::host_view(eleven), 0, 11);
    comm.send(ddl::host_view(ten), 0, 10);
    e.wait();
  }
  // A fast rank's next round must not meet this round's receives from any rank.
  comm.barrier();
}

// What a gather or scatter check varies.
struct rooted_case {
  bool scatter = false, in_place = false, async = false;
  std::string str() const {
    return std::string(scatter ? "scatter" : "gather") + (in_place ? ", in place" : ", out of place") +
           (async ? ", asynchronous" : ", blocking");
  }
};

// One rank's part of a gather or scatter check of `per` elements a rank
// from or to `root` over `n` ranks: rank r's part is `all_to_all_value(r,
// root, i)` (gather), the root's part for rank k `all_to_all_value(root, k,
// i)` (scatter); what lands is compared bit for bit, the first wrong element
// logged under `where` (and a root's own part, in place, left alone). The
// buffers are host memory said to lie `at` (a fake device's); the ranks that
// are not the root pass `{}` for the buffer they do not use.
template <class T, class Comm>
void check_rooted(Comm& comm, int r, int n, std::size_t per, int root, rooted_case k, failure_log& log,
                  const std::string& where, ddl::location space = {}) {
  const bool mine = r == root;
  const auto un = static_cast<std::size_t>(n), uroot = static_cast<std::size_t>(root);
  // The root's n parts (`whole`) and every rank's one (`part`: in `whole` when in place).
  std::vector<T> whole(mine ? un * per : 0), part(k.in_place && mine ? 0 : per);
  T* own = k.in_place && mine ? whole.data() + uroot * per : part.data();
  const std::uint64_t junk = 0x5a5a5a5a5a5a5a5aull;
  auto fill_junk = [&](T* p, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) std::memcpy(&p[i], &junk, sizeof(T));
  };
  if (k.scatter) {
    for (std::size_t j = 0; j < (mine ? un : 0); ++j)
      for (std::size_t i = 0; i < per; ++i) whole[j * per + i] = all_to_all_value<T>(root, static_cast<int>(j), i);
    if (!(k.in_place && mine)) fill_junk(own, per);
  } else {
    fill_junk(whole.data(), whole.size());
    for (std::size_t i = 0; i < per; ++i) own[i] = all_to_all_value<T>(r, root, i);
  }
  ddl::buffer_view w = mine ? ddl::host_view(whole.data(), whole.size()) : ddl::buffer_view{};
  ddl::buffer_view p = ddl::host_view(own, per);
  w.type = p.type;
  w.where = p.where = space;
  if (k.scatter) {
    if (k.async) comm.scatter_async(w, p, root).wait();
    else comm.scatter(w, p, root);
  } else {
    if (k.async) comm.gather_async(p, w, root).wait();
    else comm.gather(p, w, root);
  }
  auto wrong = [&](const T* got, int from, int to, std::size_t count, const char* what) {
    for (std::size_t i = 0; i < count; ++i) {
      const T want = all_to_all_value<T>(from, to, i);
      if (std::memcmp(&got[i], &want, sizeof(T)) != 0) {
        log.add(where + " rank " + std::to_string(r) + " " + k.str() + ", root " + std::to_string(root) + ": " +
                what + " element " + std::to_string(i) + " from rank " + std::to_string(from) + " is wrong");
        return true;
      }
    }
    return false;
  };
  if (k.scatter) {
    wrong(own, root, r, per, "its");
  } else if (mine) {
    for (int j = 0; j < n; ++j)
      if (wrong(whole.data() + static_cast<std::size_t>(j) * per, j, root, per, "gathered")) return;
  }
}

// One rank's part of a reduce check: `count` elements of
// `ddl::testing::input_value` reduced with `o` to `root`, in place there or
// not, compared bit for bit with `expected_value` on the root; the other
// ranks' input must be left as it was. Buffers said to lie `at` `space`.
template <class T, class Comm>
void check_reduce(Comm& comm, int r, int n, std::size_t count, int root, ddl::op o, bool in_place, bool async,
                  failure_log& log, const std::string& where, ddl::location space = {}) {
  const ddl::dtype t = ddl::dtype_of_v<T>;
  std::vector<T> in(count), before(count), out(r == root && !in_place ? count : 0);
  for (std::size_t i = 0; i < count; ++i) in[i] = ddl::testing::to_element<T>(ddl::testing::input_value(t, o, r, i));
  before = in;
  if (!out.empty()) std::memset(static_cast<void*>(out.data()), 0x5a, out.size() * sizeof(T));
  ddl::const_buffer_view src = ddl::host_view(std::as_const(in).data(), count);
  ddl::buffer_view dst = r != root ? ddl::buffer_view{} : ddl::host_view(in_place ? in.data() : out.data(), count);
  src.where = dst.where = space;
  if (async) comm.reduce_async(src, dst, o, root).wait();
  else comm.reduce(src, dst, o, root);
  const std::string what = where + " rank " + std::to_string(r) + " " + ddl::name_of(o) + (in_place ? " in place" : "") +
                           ", root " + std::to_string(root) + ": ";
  for (std::size_t i = 0; i < count; ++i) {
    if (r == root) {
      const T want = ddl::testing::expected_value<T>(o, n, i);
      if (!ddl::testing::same_bits((in_place ? in : out)[i], want)) {
        log.add(what + "element " + std::to_string(i) + " is wrong");
        return;
      }
    } else if (!ddl::testing::same_bits(in[i], before[i])) {
      log.add(what + "its input changed at " + std::to_string(i));
      return;
    }
  }
}

// The text of the `E` that `call` ends in; empty when it returns (another
// error propagates to the test case).
template <class E = ddl::error, class F>
std::string error_of(F&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return {};
}

}  // namespace ddl_test
