# ddl_warnings(<target>): the warnings every ddl-owned target builds with.
# Applied per target, never through CMAKE_CXX_FLAGS, so consumers are untouched.
option(DDL_WARNINGS_AS_ERRORS "Treat warnings in ddl's own targets as errors" OFF)
function(ddl_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>)
    # nvcc: the host compiler's warnings on host code, and nvcc's own.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
    if(DDL_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                               $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
    endif()
  elseif(MSVC)
    target_compile_options(${target} PRIVATE /W4)
  endif()
endfunction()
