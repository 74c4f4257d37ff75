# Which torch the torch backend builds against: the one of Python_EXECUTABLE
# (Debian's /usr/bin/python3 by default, or a virtual environment's with
# PyPI's torch 2.x: -DPython_EXECUTABLE=venv/bin/python3). Sets
#   DDL_TORCH_VERSION  torch.__version__ ("" without torch)
#   DDL_TORCH_PREFIX   the environment's CMake packages (Torch, Caffe2) when it
#                      ships them (PyPI's wheels do, Debian's python3-torch
#                      does not: its Torch is libtorch-dev's, found as usual).
# One torch per build: with an environment's, ddl-train-libtorch (Debian's
# LibTorch) is left out, since both define the same cached variables.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3)  # Debian's, where python3-torch is
endif()
set(DDL_TORCH_VERSION "")
set(DDL_TORCH_PREFIX "")
if(Python_EXECUTABLE)
  execute_process(COMMAND ${Python_EXECUTABLE} -c
                          "import torch, sys; sys.stdout.write(torch.utils.cmake_prefix_path + ';' + torch.__version__)"
                  OUTPUT_VARIABLE ddl_torch_where RESULT_VARIABLE ddl_torch_rc ERROR_QUIET)
  if(ddl_torch_rc EQUAL 0)
    list(GET ddl_torch_where 0 ddl_torch_cmake)
    list(GET ddl_torch_where 1 DDL_TORCH_VERSION)
    if(EXISTS ${ddl_torch_cmake}/Torch/TorchConfig.cmake)
      set(DDL_TORCH_PREFIX ${ddl_torch_cmake})
    endif()
  endif()
endif()
