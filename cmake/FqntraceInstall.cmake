# What `pip install` (scikit-build-core) puts into the wheel besides python/fqntrace, which
# pyproject.toml's wheel.packages copies: the native libraries beside the modules that load them,
# the start-up hook at the top of site-packages, and fqntrace/_build_info.py, the record of what
# was built against which torch (read by fqntrace._build and `python -m fqntrace doctor`).
if(NOT SKBUILD)
  return()
endif()

# Python's True / False for what was built.
set(FQNTRACE_INFO_TRACER False)
if(TARGET fqntrace)
  set(FQNTRACE_INFO_TRACER True)
endif()
set(FQNTRACE_INFO_ENGINES False)
if(TARGET fqntrace_analysis_native)
  set(FQNTRACE_INFO_ENGINES True)
endif()
if(NOT FQNTRACE_TORCH_FOUND)
  set(FQNTRACE_TORCH_VERSION "")
  set(FQNTRACE_TORCH_GIT_VERSION "")
  set(FQNTRACE_TORCH_CUDA "")
  set(FQNTRACE_TORCH_CXX11_ABI 1)
endif()
set(FQNTRACE_INFO_COMPILER "none")
if(CMAKE_CXX_COMPILER_ID)
  set(FQNTRACE_INFO_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.py.in ${CMAKE_BINARY_DIR}/_build_info.py @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/_build_info.py DESTINATION fqntrace)

# `FQNTRACE=… python train.py` with no code change: the .pth runs at every interpreter start.
install(FILES python/fqntrace-autostart.pth DESTINATION .)

if(TARGET fqntrace)
  # RPATH $ORIGIN/../torch/lib (set on the targets): torch's libraries beside us in site-packages;
  # a torch elsewhere is found as already loaded, since fqntrace is loaded after `import torch`.
  install(TARGETS fqntrace fqntrace_C LIBRARY DESTINATION fqntrace)
endif()
foreach(_engine fqntrace_analysis_native fqntrace_merge_native)
  if(TARGET ${_engine})
    install(TARGETS ${_engine} LIBRARY DESTINATION fqntrace/analysis)
  endif()
endforeach()
