// Must NOT compile: a static box with a zero extent can never match a group.
#include <ddl.hpp>

int main() {
#ifdef DDL_EXPECT_OK
  ddl::extents<2, 3> box;
#else
  ddl::extents<2, 0> box;
#endif
  return box.size() == 6 ? 0 : 1;
}
