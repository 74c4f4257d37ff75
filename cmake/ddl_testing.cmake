# ddl_label_tests(<quick regex>): labels every test of the calling directory
# "quick" (the inner loop, `ctest -L quick`, under two minutes on two cores)
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
