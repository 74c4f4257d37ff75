// A transport written here, used by a stock strategy. Ranks are threads; a
// send copies its bytes into the receiver's mailbox and completes at once
// (a buffered send); a receive completes when a message from its peer with
// its tag is in the mailbox. That is the whole Transport concept
// (transport/concept.hpp): rank, size, isend, irecv, wait with a deadline,
// and a move-only request whose destruction withdraws an unfinished receive.
#include <ddl.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

class mailbox_transport {
 public:
  struct message {
    int from;
    ddl::tag t;
    std::vector<std::byte> bytes;
  };
  struct pending_recv {
    int from;
    ddl::tag t;
    ddl::mutable_bytes into;
    bool done = false;
  };
  // What the ranks share: one mailbox per rank, and receives in posting order.
  struct fabric {
    explicit fabric(int n) : boxes(static_cast<std::size_t>(n)) {}
    struct box {
      std::mutex m;
      std::condition_variable cv;
      std::deque<message> messages;
      std::deque<std::shared_ptr<pending_recv>> posted;
    };
    std::vector<box> boxes;
  };

  // A receive's handle (a send is complete when isend returns: no state).
  class request {
   public:
    request() = default;
    request(request&&) noexcept = default;
    request& operator=(request&& o) noexcept {
      withdraw();
      box_ = o.box_;
      recv_ = std::move(o.recv_);
      return *this;
    }
    ~request() { withdraw(); }

   private:
    friend class mailbox_transport;
    void withdraw() {  // an unfinished receive must not be written into later
      if (!recv_) return;
      std::lock_guard<std::mutex> lock(box_->m);
      for (auto it = box_->posted.begin(); it != box_->posted.end(); ++it)
        if (*it == recv_) {
          box_->posted.erase(it);
          break;
        }
      recv_.reset();
    }
    fabric::box* box_ = nullptr;
    std::shared_ptr<pending_recv> recv_;
  };

  mailbox_transport(fabric& f, int rank) : f_(&f), rank_(rank) {}
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(f_->boxes.size()); }

  request isend(int peer, ddl::const_bytes data, ddl::tag t) {
    auto& box = f_->boxes[static_cast<std::size_t>(peer)];
    {
      std::lock_guard<std::mutex> lock(box.m);
      box.messages.push_back({rank_, t, std::vector<std::byte>(data.data, data.data + data.size)});
      match(box);
    }
    box.cv.notify_all();
    return {};
  }
  request irecv(int peer, ddl::mutable_bytes data, ddl::tag t) {
    auto& box = f_->boxes[static_cast<std::size_t>(rank_)];
    request r;
    r.box_ = &box;
    r.recv_ = std::make_shared<pending_recv>(pending_recv{peer, t, data});
    std::lock_guard<std::mutex> lock(box.m);
    box.posted.push_back(r.recv_);
    match(box);
    return r;
  }
  void wait(request& r, ddl::deadline until) {
    if (!r.recv_) return;
    std::unique_lock<std::mutex> lock(r.box_->m);
    if (!r.box_->cv.wait_until(lock, until, [&] { return r.recv_->done; })) {
      lock.unlock();
      throw ddl::timeout_error(r.recv_->from, "", "", 0);
    }
    lock.unlock();
    r.recv_.reset();
  }

 private:
  // Each posted receive, oldest first, takes the oldest message from its
  // peer with its tag (FIFO per peer and tag, as the concept requires).
  static void match(fabric::box& box) {
    for (auto pit = box.posted.begin(); pit != box.posted.end();) {
      auto& p = **pit;
      auto mit = box.messages.begin();
      while (mit != box.messages.end() && (mit->from != p.from || mit->t != p.t)) ++mit;
      if (mit == box.messages.end()) {
        ++pit;
        continue;
      }
      if (mit->bytes.size() != p.into.size)
        throw ddl::transport_error("mailbox: message of " + std::to_string(mit->bytes.size()) + " bytes for a " +
                                   std::to_string(p.into.size) + "-byte receive");
      std::memcpy(p.into.data, mit->bytes.data(), p.into.size);
      p.done = true;
      box.messages.erase(mit);
      pit = box.posted.erase(pit);
    }
  }
  fabric* f_;
  int rank_;
};
static_assert(ddl::check_transport<mailbox_transport>());

int main() {
  constexpr int ranks = 5;
  constexpr std::size_t count = 100003;
  mailbox_transport::fabric fabric(ranks);
  std::vector<std::vector<std::int64_t>> ours(ranks), reference(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      mailbox_transport t(fabric, r);
      ddl::communicator<ddl::ring, mailbox_transport> comm(t);  // a stock strategy on our transport
      ours[r].resize(count);
      for (std::size_t i = 0; i < count; ++i) ours[r][i] = static_cast<std::int64_t>(i % 1000) * (r + 1);
      comm.all_reduce(ddl::host_view(ours[r]), ddl::op::sum);
      comm.broadcast(ddl::host_view(ours[r].data(), 10), 3);
    });
  for (auto& th : threads) th.join();
  // The same on the stock in-process transport, as the reference.
  ddl::local_fabric::run(ranks, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::ring, ddl::local_transport> comm(t);
    reference[t.rank()].resize(count);
    for (std::size_t i = 0; i < count; ++i) reference[t.rank()][i] = static_cast<std::int64_t>(i % 1000) * (t.rank() + 1);
    comm.all_reduce(ddl::host_view(reference[t.rank()]), ddl::op::sum);
  });
  int wrong = 0;
  for (int r = 0; r < ranks; ++r) wrong += ours[r] != reference[0];
  std::printf("custom transport: ring all-reduce over %d ranks on mailbox_transport, %d rank(s) differ from "
              "local_transport\n",
              ranks, wrong);
  return wrong ? 1 : 0;
}
