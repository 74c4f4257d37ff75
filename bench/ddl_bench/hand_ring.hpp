#pragma once
// `--baseline ring`: the ring all-reduce a framework engineer writes by hand
// (Baidu's ring all-reduce, Horovod's first): a reduce-scatter of n-1
// steps, each rank sending one block to the next rank and receiving one from
// the previous into a block-sized buffer, combined with a plain loop, then
// an all-gather of n-1 steps in place. One blocking exchange a step
// (`MPI_Sendrecv` over MPI; isend, irecv and two waits on the in-process
// transport), no pipelining inside a step, no shared memory. Out of place it
// reads its input where it lies (no copy of it first). It measures what
// ddl's compile-time strategies cost, or save, beside the code they replace
// (docs/design.md §4: "zero overhead over hand-written code").
//
// Blocks are ddl's (`ddl::block_of`): the bench checks every rank's
// reduce-scatter block where ddl puts it. Int32, int64, float and double;
// sum, prod, min and max (a hand-written loop has no half type, and an
// average is a sum and a division the caller writes).
#include <ddl.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "measure.hpp"

namespace ddl_bench {

// One step's exchange: `send_bytes` at `send` to the next rank, `recv_bytes`
// from the previous one into `recv`; returns when both are done.
using ring_exchange = std::function<void(const std::byte* send, std::size_t send_bytes, std::byte* recv,
                                         std::size_t recv_bytes)>;

// Why `--baseline ring` cannot run this setting ("" when it can).
inline std::string hand_ring_refusal(const settings& s) {
  if (s.coll != collective::all_reduce && s.coll != collective::reduce_scatter && s.coll != collective::all_gather)
    return "all_reduce, reduce_scatter and all_gather only";
  const bool type_ok = s.type == ddl::dtype::int32 || s.type == ddl::dtype::int64 || s.type == ddl::dtype::float32 ||
                       s.type == ddl::dtype::float64;
  if (!type_ok) return "int32, int64, float and double only";
  if (s.coll != collective::all_gather && s.oper == ddl::op::avg) return "sum, prod, min and max only";
  return "";
}

template <class T>
class hand_ring {
 public:
  hand_ring(int rank, int size, ddl::op o, ring_exchange x) : r_(rank), n_(size), op_(o), x_(std::move(x)) {}

  // Room for the largest block of `count` elements (untimed, before a size).
  void prepare(std::size_t count) {
    const std::size_t most = (count + static_cast<std::size_t>(n_) - 1) / static_cast<std::size_t>(n_);
    for (auto* b : {&recv_, &acc_[0], &acc_[1]})
      if (b->size() < most) b->resize(most);
  }

  // Rank r ends with block r of the reduction of every rank's `in` at
  // `mine`. `all` (count elements, may be `in`) takes the partial blocks on
  // the way; without it they go through two block buffers in turn.
  void reduce_scatter(const T* in, T* all, T* mine, std::size_t count) {
    if (n_ == 1) {
      if (mine != in) std::memcpy(mine, in, count * sizeof(T));
      return;
    }
    const T* send = in + blk(r_ - 1, count).offset;
    std::size_t send_n = blk(r_ - 1, count).size;
    for (int s = 0; s < n_ - 1; ++s) {
      const ddl::block k = blk(r_ - s - 2, count);
      x_(bytes(send), send_n * sizeof(T), reinterpret_cast<std::byte*>(recv_.data()), k.size * sizeof(T));
      T* dst = s == n_ - 2 ? mine : all ? all + k.offset : acc_[s % 2].data();
      combine(dst, in + k.offset, recv_.data(), k.size);
      send = dst;
      send_n = k.size;
    }
  }
  // Every rank's block r, in place in `all`, to every rank.
  void all_gather(T* all, std::size_t count) {
    for (int s = 0; s < n_ - 1; ++s) {
      const ddl::block out = blk(r_ - s, count), in = blk(r_ - s - 1, count);
      x_(bytes(all + out.offset), out.size * sizeof(T), reinterpret_cast<std::byte*>(all + in.offset),
         in.size * sizeof(T));
    }
  }
  void all_reduce(const T* in, T* out, std::size_t count) {
    reduce_scatter(in, out, out + blk(r_, count).offset, count);
    all_gather(out, count);
  }

 private:
  ddl::block blk(int b, std::size_t count) const { return ddl::block_of(count, n_, ((b % n_) + n_) % n_); }
  static const std::byte* bytes(const T* p) { return reinterpret_cast<const std::byte*>(p); }
  // dst = a (op) b, as a plain loop (the compiler vectorises it).
  void combine(T* dst, const T* a, const T* b, std::size_t m) const {
    switch (op_) {
      case ddl::op::prod:
        for (std::size_t i = 0; i < m; ++i) dst[i] = a[i] * b[i];
        break;
      case ddl::op::min:
        for (std::size_t i = 0; i < m; ++i) dst[i] = b[i] < a[i] ? b[i] : a[i];
        break;
      case ddl::op::max:
        for (std::size_t i = 0; i < m; ++i) dst[i] = a[i] < b[i] ? b[i] : a[i];
        break;
      default:
        for (std::size_t i = 0; i < m; ++i) dst[i] = a[i] + b[i];
        break;
    }
  }

  int r_, n_;
  ddl::op op_;
  ring_exchange x_;
  std::vector<T> recv_, acc_[2];
};

// The `hand:ring` row: the collective `s.coll` by `hand_ring`, in place and
// out of place, as ddl-bench's ddl rows lay out their buffers.
// \pre hand_ring_refusal(s) is empty.
inline impl hand_ring_impl(const settings& s, int rank, int size, ring_exchange x) {
  impl m;
  m.label = "hand:ring";
  const collective coll = s.coll;
  const ddl::op o = s.oper;
  ddl::visit_dtype(s.type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      auto ring = std::make_shared<hand_ring<T>>(rank, size, o, x);
      const int n = size, r = rank;
      m.prepare = [ring](std::byte*, std::size_t count) { ring->prepare(count); };
      auto t = [](auto* p) { return reinterpret_cast<T*>(const_cast<std::byte*>(p)); };
      switch (coll) {
        case collective::all_reduce:
          m.oop = [ring, t](const std::byte* in, std::byte* out, std::size_t c) { ring->all_reduce(t(in), t(out), c); };
          m.ip = [ring, t](std::byte* buf, std::size_t c) { ring->all_reduce(t(buf), t(buf), c); };
          break;
        case collective::reduce_scatter:
          m.oop = [ring, t](const std::byte* in, std::byte* out, std::size_t c) {
            ring->reduce_scatter(t(in), nullptr, t(out), c);
          };
          m.ip = [ring, t, n, r](std::byte* buf, std::size_t c) {
            ring->reduce_scatter(t(buf), t(buf), t(buf) + ddl::block_of(c, n, r).offset, c);
          };
          break;
        case collective::all_gather:
          m.oop = [ring, t, n, r](const std::byte* in, std::byte* out, std::size_t c) {
            const ddl::block b = ddl::block_of(c, n, r);
            std::memcpy(t(out) + b.offset, t(in) + b.offset, b.size * sizeof(T));
            ring->all_gather(t(out), c);
          };
          m.ip = [ring, t](std::byte* buf, std::size_t c) { ring->all_gather(t(buf), c); };
          break;
        default: break;
      }
    }
  });
  return m;
}

// `--baseline ring` on one rank: the `hand:ring` row appended to `impls`, or,
// where it cannot run this setting, why in `found` (rank 0 writes it).
inline void add_hand_ring(std::vector<impl>& impls, std::string& found, const settings& s, int rank, int size,
                          ring_exchange x) {
  if (const std::string no = hand_ring_refusal(s); !no.empty()) {
    if (rank == 0) found += std::string(found.empty() ? "" : "; ") + "hand:ring not compared: " + no;
    return;
  }
  impls.push_back(hand_ring_impl(s, rank, size, std::move(x)));
}

// The in-process transport's exchange for `hand_ring`: an isend, an irecv
// and their waits (a program's own tag: never a ddl call's).
inline ring_exchange local_ring_exchange(ddl::local_transport& t) {
  const ring_peers peers(t.rank(), t.size());
  return [&t, peers](const std::byte* send, std::size_t sn, std::byte* recv, std::size_t rn) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto rq = t.irecv(peers.prev, ddl::mutable_bytes{recv, rn}, 1);
    auto sq = t.isend(peers.next, ddl::const_bytes{send, sn}, 1);
    t.wait(rq, until);
    t.wait(sq, until);
  };
}

}  // namespace ddl_bench
