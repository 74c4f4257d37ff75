// Must NOT compile: a view of an element type ddl does not carry.
#include <ddl.hpp>

int main() {
#ifdef DDL_EXPECT_OK
  float data[4] = {};
#else
  char data[4] = {};
#endif
  auto v = ddl::host_view(data, 4);
  return static_cast<int>(v.count) - 4;
}
