# ddl_label_tests(<quick regex>): labels every test of the calling directory
# "quick" (the inner loop, `ctest -L quick`, about two minutes on two cores)
# when its name matches <quick regex>, else "full" (the rest of `ctest`).
function(ddl_label_tests quick_regex)
  get_directory_property(tests TESTS)
  foreach(t IN LISTS tests)
    if(t MATCHES "${quick_regex}")
      set_property(TEST ${t} APPEND PROPERTY LABELS quick)
    else()
      set_property(TEST ${t} APPEND PROPERTY LABELS full)
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
