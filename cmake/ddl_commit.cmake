# Writes OUT (a header defining DDL_BENCH_COMMIT) from `git describe` of SRC,
# run at every build so recorded benchmark runs name the code they ran.
# usage: cmake -DSRC=<source dir> -DOUT=<header> [-DGIT=<git>] -P ddl_commit.cmake
set(commit "unknown")
if(GIT)
  execute_process(COMMAND ${GIT} describe --always --dirty WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND described)
    set(commit "${described}")
  endif()
endif()
set(text "#pragma once\n#define DDL_BENCH_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")  # only when it changed: no needless rebuild
endif()
