// Must NOT compile: a strategy without all_gather handed to a communicator.
// The diagnostic must name the missing member. With DDL_EXPECT_OK the member
// is there and the file compiles (the control that proves the failure's cause).
#include <ddl.hpp>

struct almost_strategy {
  static constexpr const char* name = "almost";
  void validate(int) const {}
  static std::size_t all_reduce_workspace(std::size_t, ddl::dtype, int) { return 0; }
  static std::size_t reduce_scatter_workspace(std::size_t, ddl::dtype, int) { return 0; }
  template <class T>
  void all_reduce(T&, const std::byte*, std::byte*, std::size_t, const ddl::call_context&) {}
  template <class T>
  void reduce_scatter(T&, const std::byte*, std::byte*, std::byte*, std::size_t, const ddl::call_context&) {}
#ifdef DDL_EXPECT_OK
  template <class T>
  void all_gather(T&, const std::byte*, std::byte*, std::size_t, const ddl::call_context&) {}
#endif
};

int main() {
  ddl::local_fabric::run(1, [](ddl::local_transport& t) {
    ddl::communicator<almost_strategy, ddl::local_transport> comm(t);
    (void)comm;
  });
}
