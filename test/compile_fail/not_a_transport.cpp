// Must NOT compile: a type without isend handed to a communicator. The
// diagnostic must name the missing member. With DDL_EXPECT_OK the member is
// there and the file compiles (the control that proves the failure's cause).
#include <ddl.hpp>

struct almost_transport {
  using request = ddl::local_transport::request;
  int rank() const { return 0; }
  int size() const { return 1; }
#ifdef DDL_EXPECT_OK
  request isend(int, ddl::const_bytes, ddl::tag) { return {}; }
#endif
  request irecv(int, ddl::mutable_bytes, ddl::tag) { return {}; }
  void wait(request&, ddl::deadline) {}
};

int main() {
  almost_transport t;
  ddl::communicator<ddl::ring, almost_transport> comm(t);
  return comm.size() == 1 ? 0 : 1;
}
