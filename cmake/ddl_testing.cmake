# ddl_label_tests(<quick regex> [MANY_RANKS <regex>]): labels every test of
# the calling directory "quick" (the inner loop, `ctest -L quick`, about 2.5
# minutes on two cores) when its name matches <quick regex>, else "full" (the
# rest of `ctest`). Tests matching the MANY_RANKS regex run more ranks
# (threads, or MPI processes) than cores, handing off to each other all the
# time: they ask for every core, 8 at most (PROCESSORS; most run up to 8 or 9
# ranks), so on a small machine `ctest -jN` runs them alone and pairs the
# single-threaded ones (the simulator, compiles; the longer MPI runs are
# RUN_SERIAL).
# Beside another busy test such ranks wait for a core at every hand-off: on
# 2 cores the suite took 750 s at -j2, the times of its tests but the
# consumer builds summing to 1112 s; one at a time those took 700 s
# (bench/results/ci-build.md).
cmake_host_system_information(RESULT ddl_many_ranks_slots QUERY NUMBER_OF_LOGICAL_CORES)
if(ddl_many_ranks_slots GREATER 8)
  set(ddl_many_ranks_slots 8)
endif()
function(ddl_label_tests quick_regex)
  cmake_parse_arguments(arg "" "MANY_RANKS" "" ${ARGN})
  get_directory_property(tests TESTS)
  foreach(t IN LISTS tests)
    if(t MATCHES "${quick_regex}")
      set_property(TEST ${t} APPEND PROPERTY LABELS quick)
    else()
      set_property(TEST ${t} APPEND PROPERTY LABELS full)
    endif()
    if(arg_MANY_RANKS AND t MATCHES "${arg_MANY_RANKS}")
      set_property(TEST ${t} PROPERTY PROCESSORS ${ddl_many_ranks_slots})
    endif()
  endforeach()
endfunction()

# ddl_mpiexec_command(<out var> <ranks>): the command line that starts <ranks>
# MPI processes on this machine. Open MPI needs leave to oversubscribe and to
# yield while idle (2 cores, more ranks); MPICH oversubscribes by default and
# rejects those flags. Tests add OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 to their
# environment so CI may run them as root.
function(ddl_mpiexec_command out ranks)
  if(NOT DEFINED CACHE{DDL_MPIEXEC_IS_OPENMPI})
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE v ERROR_VARIABLE v)
    if(v MATCHES "Open MPI|OpenRTE")
      set(DDL_MPIEXEC_IS_OPENMPI ON CACHE INTERNAL "")
    else()
      set(DDL_MPIEXEC_IS_OPENMPI OFF CACHE INTERNAL "")
    endif()
  endif()
  set(cmd ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${MPIEXEC_PREFLAGS})
  if(DDL_MPIEXEC_IS_OPENMPI)
    list(APPEND cmd --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader)
  endif()
  set(${out} ${cmd} PARENT_SCOPE)
endfunction()
