// Must NOT compile: ddl::one_shot (which reads peers' buffers in place) over a
// transport whose ranks do not declare shared memory. The diagnostic must say
// what is missing. With DDL_EXPECT_OK the transport declares `peer_memory`
// and the file compiles (the control that proves the failure's cause).
#include <ddl.hpp>

// Forwards to a local_transport without saying that its ranks share memory.
struct plain_transport {
  using request = ddl::local_transport::request;
#ifdef DDL_EXPECT_OK
  static constexpr bool peer_memory = true;
#endif
  ddl::local_transport* inner;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  request isend(int peer, ddl::const_bytes b, ddl::tag t) { return inner->isend(peer, b, t); }
  request irecv(int peer, ddl::mutable_bytes b, ddl::tag t) { return inner->irecv(peer, b, t); }
  void wait(request& r, ddl::deadline d) { inner->wait(r, d); }
};

int main() {
  ddl::local_fabric::run(1, [](ddl::local_transport& t) {
    plain_transport p{&t};
    ddl::communicator<ddl::one_shot, plain_transport> comm(p);
    (void)comm;
  });
}
