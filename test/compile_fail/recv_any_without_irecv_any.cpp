// Must NOT compile: communicator::recv_any over a transport that cannot
// receive from any rank (no `irecv_any`). The diagnostic must say what is
// missing. With DDL_EXPECT_OK the transport forwards `irecv_any` and the
// file compiles (the control that proves the failure's cause).
#include <ddl.hpp>

// Forwards to a local_transport, sends, receives and tests only.
struct plain_transport {
  using request = ddl::local_transport::request;
  ddl::local_transport* inner;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  request isend(int peer, ddl::const_bytes b, ddl::tag t) { return inner->isend(peer, b, t); }
  request irecv(int peer, ddl::mutable_bytes b, ddl::tag t) { return inner->irecv(peer, b, t); }
#ifdef DDL_EXPECT_OK
  request irecv_any(ddl::mutable_bytes b, ddl::tag t) { return inner->irecv_any(b, t); }
#endif
  bool test(request& r) { return inner->test(r); }
  void wait(request& r, ddl::deadline d) { inner->wait(r, d); }
};

int main() {
  ddl::local_fabric::run(2, [](ddl::local_transport& t) {
    plain_transport p{&t};
    ddl::communicator<ddl::ring, plain_transport> comm(p);
    float x = 0;
    if (t.rank() == 0) (void)comm.recv_any(ddl::host_view(&x, 1), 0);
  });
}
