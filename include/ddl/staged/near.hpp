#pragma once
/// \file
/// Device memory shared between the processes of one host
/// (`detail::near_peers`, inside `staged_transport`): a peer whose device
/// memory this rank's device maps (CUDA IPC) is *near*, and a message to
/// it is not staged through host memory at all. The sender, once its
/// stream has produced the data, sends a *note* naming the allocation (the
/// device's handle for it, its id, the offset); the receiver maps the
/// allocation once (`Device::open`, cached per peer and allocation id, as
/// NCCL's buffer registration), copies or reduces straight out of the
/// peer's memory on its own stream, and when that is done notes back that
/// the sender's buffer is free. One device copy or reduction per message,
/// no host round trip of the data.
///
/// Notes are small inner messages of fixed size with the message's own tag,
/// so a mismatched call is still told apart by its stamp. A rank posts one
/// note receive per message it sends (for the reply) and per message it
/// receives, and sorts what arrives by kind: pairs that exchange in both
/// directions under one tag never take one kind for the other. A sender
/// whose buffer the device cannot share (host memory, such as the
/// strategies' small tables; device memory the device's IPC refuses, such
/// as a `cudaMallocAsync` pool's) sends up to `note_inline` bytes inside
/// its note, and copies a larger message on its stream into a block of
/// `shared_scratch` first, which it shares instead: one device copy more,
/// never a wrong result.
///
/// Which peers are near is settled once, at construction, with every rank
/// taking part: each shares a small probe allocation, each opens its
/// candidates' (the peers its host transport shares memory with, or every
/// peer of a transport in one process), and a pair is near when both
/// opened the other's. A rank that cannot map a candidate says so once on
/// stderr and their messages go through host memory as before.
/// `DDL_CUDA_IPC=0` turns it off. What `Device` offers for it:
/// `staged/device_region.hpp`.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ddl/core/error.hpp"
#include "ddl/core/op.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/staged/device_region.hpp"
#include "ddl/staged/message.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/request.hpp"

namespace ddl {
namespace detail {

template <class Inner, class Device>
class near_peers {
  using inner_request = typename Inner::request;
  using event = typename Device::event;

 public:
  /// Bytes of data a note carries inline (host buffers to a near peer).
  static constexpr std::size_t note_inline = 1024;
  /// Tag of the probe exchange at construction (a program tag, not a call's).
  static constexpr tag probe_tag = 0x3a11;

  /// Settles which peers are near: collective over `inner` (every rank
  /// constructs at the same point). \param wanted false: none is (this rank
  /// opens nothing and offers nothing, so its peers agree).
  near_peers(Inner& inner, Device& dev, bool wanted, std::chrono::duration<double> patience)
      : inner_(&inner), dev_(&dev), scratch_(dev) {
    const int n = inner.size(), r = inner.rank();
    near_.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(n), 0);
    if (n < 2) return;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(patience);
    device_region mine{};
    if (wanted) mine = dev.probe();
    std::vector<device_region> theirs(static_cast<std::size_t>(n));
    exchange(reinterpret_cast<const std::byte*>(&mine), reinterpret_cast<std::byte*>(theirs.data()), sizeof mine,
             until);
    std::vector<unsigned char> row(static_cast<std::size_t>(n), 0), rows(static_cast<std::size_t>(n) * n, 0);
    for (int q = 0; q < n; ++q) {
      const device_region& at = theirs[static_cast<std::size_t>(q)];
      if (q == r || !wanted || at.id == 0 || !candidate(q)) continue;
      try {
        (void)dev.open(q, at);
        row[static_cast<std::size_t>(q)] = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ddl: rank %d cannot map rank %d's device memory (%s); their messages go through host "
                             "memory\n", r, q, e.what());
      }
    }
    exchange(reinterpret_cast<const std::byte*>(row.data()), reinterpret_cast<std::byte*>(rows.data()),
             static_cast<std::size_t>(n), until);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        near_[idx(a, b)] = a != b && rows[idx(a, b)] && rows[idx(b, a)];
  }
  near_peers(const near_peers&) = delete;
  near_peers& operator=(const near_peers&) = delete;
  ~near_peers() {
    // Replies still on their way out finish (bounded); everything else is
    // withdrawn with its request.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (auto& o : ops_) {
      try {
        if (o.st == stage::landing)
          while (!dev_->ready(o.ev) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        release_slot(o);
        if (o.st == stage::replying)
          while (!inner_->test(o.note_req) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      } catch (...) {
      }
    }
  }

  /// Whether messages to and from `peer` go device to device.
  bool near(int peer) const noexcept { return near_[idx(inner_->rank(), peer)] != 0; }
  /// Whether ranks `a` and `b` are near each other (the same answer on every rank).
  bool near(int a, int b) const noexcept { return near_[idx(a, b)] != 0; }
  /// Device memory `Device::share` accepts, taken and given back per message
  /// or call (`staged_transport::take_scratch`).
  shared_scratch<Device>& scratch() noexcept { return scratch_; }
  /// Whether any pair of the group is near (the same answer on every rank).
  bool any() const noexcept { return std::find(near_.begin(), near_.end(), 1) != near_.end(); }
  /// g > 1 when the near ranks are blocks of g consecutive ranks (the ranks
  /// of a host, as MPI numbers them), near inside a block and not across;
  /// else 1. The same answer on every rank.
  int block() const noexcept {
    const int n = inner_->size();
    int g = 1;
    while (g < n && near(0, g)) ++g;
    if (g == 1 || n % g != 0) return 1;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && near(a, b) != (a / g == b / g)) return 1;
    return g;
  }

  /// Posts message `m` to or from a near peer (its id is this object's
  /// own); returns its id.
  std::uint64_t post(const staged_message& m) {
    op o;
    static_cast<staged_message&>(o) = m;
    o.id = ++next_id_;
    const std::size_t bytes = m.bytes;
    if (o.k == kind::send) {
      o.shared = bytes > 0 && dev_->share(o.data, bytes, o.at);
      if (o.shared) {
        o.ev = dev_->mark();  // the data is what the stream has produced by now
      } else if (bytes > note_inline) {  // copied in stream order into memory the device shares
        o.scratch = scratch_.take(bytes);
        o.ev = dev_->copy(o.scratch, o.data, bytes);
        if (!dev_->share(o.scratch, bytes, o.at))
          throw transport_error("staged transport: the device refused to share its own scratch memory");
        o.shared = true;
      } else {  // read through the device (it may be device memory IPC cannot share), in stream order
        o.held.resize(bytes);
        o.ev = dev_->copy(o.held.data(), o.data, bytes);
      }
      o.st = stage::marking;
    } else {
      o.st = stage::awaiting;
    }
    ops_.push_back(std::move(o));
    const std::uint64_t id = ops_.back().id;
    listen(m.peer, m.tg);  // the reply to a send, or the note of a receive
    progress();
    return id;
  }
  /// Whether message `id` is done (then forgotten).
  bool finished(std::uint64_t id) {
    for (auto it = ops_.begin(); it != ops_.end(); ++it)
      if (it->id == id) {
        if (it->st != stage::done) return false;
        scratch_.give(it->scratch);
        ops_.erase(it);
        return true;
      }
    return true;
  }
  /// The peer of message `id` (for a timeout's text).
  int peer_of(std::uint64_t id) const {
    for (const auto& o : ops_)
      if (o.id == id) return o.peer;
    return -1;
  }
  /// Gives message `id` up (its request was dropped unfinished).
  void abandon(std::uint64_t id) noexcept {
    for (auto it = ops_.begin(); it != ops_.end(); ++it)
      if (it->id == id) {
        if (it->st != stage::landing) release_slot(*it);  // else its device work may still read it: kept
        if (it->replied) scratch_.give(it->scratch);      // else the peer may still read it: kept
        ops_.erase(it);
        return;
      }
  }

  /// Advances every message as far as it goes.
  void progress() {
    // Notes are taken in the order they arrived: the inner transport fills
    // the receives of one (peer, tag) in posting order, but a test of one
    // may fill an earlier one too, so a receive is sorted only once every
    // earlier one of its (peer, tag) has been.
    for (auto& m : inbox_)
      if (!m.filled) m.filled = inner_->test(m.req);
    for (auto it = inbox_.begin(); it != inbox_.end();) {
      if (!it->filled || earlier_unfilled(*it)) {
        ++it;
        continue;
      }
      sort(*it);
      it = inbox_.erase(it);
    }
    bool sends_blocked = false;  // notes go out in the order the sends were posted
    for (auto& o : ops_) {
      switch (o.st) {
        case stage::marking:
          if (sends_blocked || !dev_->ready(o.ev)) {
            sends_blocked = true;
            break;
          }
          send_notes(o);
          o.st = stage::noted;
          [[fallthrough]];
        case stage::noted:
          if (o.replied && inner_->test(o.note_req)) o.st = stage::done;
          break;
        case stage::awaiting: take(o); break;
        case stage::landing:
          if (dev_->ready(o.ev)) {
            release_slot(o);
            o.reply = note{};
            o.reply.magic = note_magic;
            o.reply.kind = reply_kind;
            o.reply.id = o.sender_id;
            o.note_req = inner_->isend(o.peer, const_bytes{reinterpret_cast<const std::byte*>(&o.reply), sizeof(note)}, o.tg);
            o.st = stage::replying;
          }
          break;
        case stage::replying:
          if (inner_->test(o.note_req)) o.st = stage::done;
          break;
        case stage::done: break;
      }
    }
  }

 private:
  using kind = staged_message::kind;
  enum class stage : std::uint8_t { marking, noted, awaiting, landing, replying, done };
  static constexpr std::uint32_t note_magic = 0x64646c4e;  // "ddlN"
  static constexpr std::uint32_t shared_kind = 1, inline_kind = 2, reply_kind = 3;
  struct note {
    std::uint32_t magic = 0, kind = 0;
    std::uint64_t id = 0;     // the sender's message (a reply: the message it answers)
    std::uint64_t bytes = 0;  // the message's bytes
    device_region at{};       // shared: where the bytes lie
    std::byte data[note_inline];  // inline: the bytes
  };
  struct mail {  // a note receive, posted for (peer, tag)
    int peer = 0;
    tag tg = 0;
    bool filled = false;
    note buf{};
    inner_request req;
  };
  struct arrived {  // a note taken in, not yet claimed
    int peer = 0;
    tag tg = 0;
    note n;
  };
  struct op : staged_message {
    stage st = stage::marking;
    event ev{};
    bool shared = false;   // send: the bytes go as a region (else inline)
    device_region at{};    // send: the region
    std::byte* scratch = nullptr;  // send: the bytes copied into shared scratch (else in place)
    bool replied = false;  // send: the receiver is done with the bytes
    std::uint64_t sender_id = 0;  // receive: the sender's message
    std::vector<std::byte> held;  // inline: the message's bytes in host memory
    std::vector<std::byte> notes;  // send: the note (sent from here)
    std::byte* slot = nullptr;    // receive, inline, reduced on the device: the bytes, pinned
    std::size_t slot_bytes = 0;
    note reply{};                 // receive: the reply (sent from here)
    inner_request note_req;       // send: the note; receive: the reply
  };

  std::size_t idx(int a, int b) const noexcept {
    return static_cast<std::size_t>(a) * static_cast<std::size_t>(inner_->size()) + static_cast<std::size_t>(b);
  }
  bool candidate(int q) const {
    if constexpr (has_stages_among_v<Inner>) {
      const int r = inner_->rank();
      return inner_->stages_shared_among(std::min(r, q), std::abs(q - r), 2);
    }
    (void)q;
    return true;  // one process: the device says whether it maps
  }

  // Every rank's `bytes` at `mine` into `all` (rank q's at q * bytes), over
  // the inner transport's messages.
  void exchange(const std::byte* mine, std::byte* all, std::size_t bytes, deadline until) {
    const int n = inner_->size(), r = inner_->rank();
    std::memcpy(all + static_cast<std::size_t>(r) * bytes, mine, bytes);
    std::vector<inner_request> reqs;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      reqs.push_back(inner_->irecv(q, mutable_bytes{all + static_cast<std::size_t>(q) * bytes, bytes}, probe_tag));
      reqs.push_back(inner_->isend(q, const_bytes{mine, bytes}, probe_tag));
    }
    for (auto& q : reqs) inner_->wait(q, until);
  }

  void listen(int peer, tag t) {
    inbox_.emplace_back();
    mail& m = inbox_.back();
    m.peer = peer;
    m.tg = t;
    m.req = inner_->irecv(peer, mutable_bytes{reinterpret_cast<std::byte*>(&m.buf), sizeof(note)}, t);
  }

  bool earlier_unfilled(const mail& m) const {
    for (const auto& e : inbox_) {
      if (&e == &m) return false;
      if (!e.filled && e.peer == m.peer && e.tg == m.tg) return true;
    }
    return false;
  }

  // A note that arrived: a reply finishes its send; data waits to be claimed.
  void sort(mail& m) {
    if (m.buf.magic != note_magic)
      throw transport_error("staged transport: rank " + std::to_string(inner_->rank()) + " got a message from rank " +
                            std::to_string(m.peer) + " that is no note (" + describe_tag(m.tg) +
                            "): the two disagree on whether they are near");
    if (m.buf.kind == reply_kind) {
      for (auto& o : ops_)
        if (o.k == kind::send && o.peer == m.peer && o.id == m.buf.id) o.replied = true;
      return;
    }
    arrived a;
    a.peer = m.peer;
    a.tg = m.tg;
    a.n = m.buf;
    notes_.push_back(std::move(a));
  }

  void send_notes(op& o) {
    o.notes.resize(sizeof(note));
    note* n = new (o.notes.data()) note{};
    n->magic = note_magic;
    n->kind = o.shared ? shared_kind : inline_kind;
    n->id = o.id;
    n->bytes = o.bytes;
    if (o.shared) n->at = o.at;
    else if (o.bytes) std::memcpy(n->data, o.held.data(), o.bytes);  // at most note_inline
    o.note_req = inner_->isend(o.peer, const_bytes{o.notes.data(), sizeof(note)}, o.tg);
  }

  // A receive takes the next data note of its (peer, tag). Receives of
  // one (peer, tag) take notes in the order they were posted (the earliest
  // awaiting one is `o` when called in order).
  void take(op& o) {
    for (auto it = notes_.begin(); it != notes_.end(); ++it) {
      if (it->peer != o.peer || it->tg != o.tg) continue;
      if (earlier_awaits(o)) return;
      if (it->n.bytes != o.bytes)
        throw mismatch_error(size_mismatch("staged transport", o.peer, it->n.bytes, inner_->rank(), o.bytes, o.tg));
      o.sender_id = it->n.id;
      if (it->n.kind == shared_kind) {
        land(o, dev_->open(o.peer, it->n.at) + it->n.at.offset);
      } else {
        if (o.bytes > note_inline)
          throw transport_error("staged transport: rank " + std::to_string(o.peer) + " sent " +
                                std::to_string(o.bytes) + " bytes inline, past a note's " +
                                std::to_string(note_inline));
        o.held.assign(it->n.data, it->n.data + o.bytes);
        land_inline(o);
      }
      notes_.erase(it);
      return;
    }
  }
  // Whether a receive posted before `o` on its (peer, tag) still awaits its first note.
  bool earlier_awaits(const op& o) const {
    for (const auto& e : ops_) {
      if (&e == &o) return false;
      if (e.st == stage::awaiting && e.k != kind::send && e.peer == o.peer && e.tg == o.tg)
        return true;
    }
    return false;
  }
  // The bytes at `src` (the peer's memory, mapped) into the receive's buffer.
  void land(op& o, const std::byte* src) {
    if (o.k == kind::recv) {
      o.ev = dev_->copy(o.data, src, o.bytes);
    } else {
      const std::size_t count = o.bytes / size_of(o.red.type);
      o.ev = o.red.received_first ? dev_->reduce(o.data, src, o.local, count, o.red)
                                  : dev_->reduce(o.data, o.local, src, count, o.red);
    }
    o.st = stage::landing;
  }
  // Bytes that came inline (memory the sender's device could not share).
  // A copy lands them from host memory; a reduction into device memory
  // reads them from a staging slot (pinned and mapped for the device),
  // one into host memory reduces here.
  void land_inline(op& o) {
    if (o.k == kind::recv) {
      o.ev = dev_->copy(o.data, o.held.data(), o.bytes);
    } else if (o.bytes > 0 && dev_->on_device(o.data)) {
      o.slot_bytes = std::max<std::size_t>(o.bytes, 64);
      o.slot = dev_->allocate_slot(o.slot_bytes);
      std::memcpy(o.slot, o.held.data(), o.bytes);
      land(o, o.slot);
      return;
    } else {
      const std::size_t count = o.bytes / size_of(o.red.type);
      if (o.red.received_first) host::reduce(o.data, o.held.data(), o.local, count, o.red);
      else host::reduce(o.data, o.local, o.held.data(), count, o.red);
      o.ev = dev_->mark();
    }
    o.st = stage::landing;
  }
  void release_slot(op& o) noexcept {
    if (o.slot) dev_->release_slot(o.slot, o.slot_bytes);
    o.slot = nullptr;
  }

  Inner* inner_;
  Device* dev_;
  shared_scratch<Device> scratch_;   // sends whose own memory the device does not share
  std::vector<unsigned char> near_;  // near_[a * n + b]: ranks a and b are near
  std::uint64_t next_id_ = 0;
  std::list<op> ops_;       // in posting order
  std::list<mail> inbox_;   // note receives posted (their buffers must not move)
  std::list<arrived> notes_;  // data notes taken in, in arrival order
};

}  // namespace detail
}  // namespace ddl
