# The torch the tracer is built against: the one the build's Python imports from its own
# environment. Read from the installed package (cmake/torch_info.py), not from torch's
# find_package(Torch): that config demands a CUDA toolkit (nvcc, nvrtc) for PyPI's CUDA wheels,
# and fqntrace observes on the host, so c10, torch_cpu and the headers are all it needs. It still
# sees every op, CUDA ones included: the RecordFunction observers live in torch_cpu.
#
# The environment's torch comes first (python -E): pip's isolated build hides the environment's
# site-packages through PYTHONPATH, and -E looks past that, so `pip install .` builds against the
# user's torch, never a different one fetched into the build environment. Then the plain
# interpreter (a torch that only PYTHONPATH provides).
#
# Sets FQNTRACE_TORCH_FOUND, FQNTRACE_TORCH_ROOT, FQNTRACE_TORCH_LIB_DIR, FQNTRACE_TORCH_VERSION,
# FQNTRACE_TORCH_GIT_VERSION, FQNTRACE_TORCH_CUDA, FQNTRACE_TORCH_CXX11_ABI and the imported
# target fqntrace::torch (headers as system headers, the ABI define, c10 and torch_cpu).

set(FQNTRACE_TORCH_FOUND FALSE)
foreach(_isolation "-E" "")
  execute_process(
    COMMAND ${Python3_EXECUTABLE} ${_isolation} ${CMAKE_CURRENT_LIST_DIR}/torch_info.py
    OUTPUT_VARIABLE _torch_info RESULT_VARIABLE _torch_rc ERROR_VARIABLE _torch_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_torch_rc EQUAL 0)
    set(FQNTRACE_TORCH_FOUND TRUE)
    break()
  endif()
endforeach()
if(NOT FQNTRACE_TORCH_FOUND)
  return()
endif()

string(REPLACE "\n" ";" _torch_lines "${_torch_info}")
foreach(_line IN LISTS _torch_lines)
  if(_line MATCHES "^([A-Z0-9_]+)=(.*)$")
    set(FQNTRACE_TORCH_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()

set(_torch_libraries)
foreach(_name c10 torch_cpu)
  find_library(FQNTRACE_TORCH_${_name}_LIBRARY ${_name} PATHS ${FQNTRACE_TORCH_LIB_DIR} NO_DEFAULT_PATH)
  if(NOT FQNTRACE_TORCH_${_name}_LIBRARY)
    message(FATAL_ERROR "fqntrace: torch ${FQNTRACE_TORCH_VERSION} at ${FQNTRACE_TORCH_ROOT} has no "
                        "lib${_name}.so in ${FQNTRACE_TORCH_LIB_DIR}; reinstall torch.")
  endif()
  list(APPEND _torch_libraries ${FQNTRACE_TORCH_${_name}_LIBRARY})
endforeach()

add_library(fqntrace::torch INTERFACE IMPORTED)
set_target_properties(fqntrace::torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${FQNTRACE_TORCH_INCLUDE_DIR};${FQNTRACE_TORCH_API_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${FQNTRACE_TORCH_CXX11_ABI}"
  INTERFACE_LINK_LIBRARIES "${_torch_libraries}")
message(STATUS "fqntrace: building the tracer against torch ${FQNTRACE_TORCH_VERSION} at "
               "${FQNTRACE_TORCH_ROOT} (host libraries only: no CUDA toolkit needed)")
