# The tracer: libfqntrace.so and its Python binding fqntrace._C, built against the torch that
# cmake/FqntraceTorch.cmake found (fqntrace::torch). Included by the root CMakeLists.txt only then.

# gzip outputs' CRC-32: libdeflate's when its headers are here (Debian: libdeflate-dev), else our
# own table-driven loop (exporters/crc32.h); the deflate encoder is our own either way.
find_library(LIBDEFLATE_LIBRARY NAMES deflate)
find_path(LIBDEFLATE_INCLUDE_DIR libdeflate.h)
if(NOT LIBDEFLATE_LIBRARY OR NOT LIBDEFLATE_INCLUDE_DIR)
  message(STATUS "fqntrace: libdeflate not found: gzip traces use fqntrace's own CRC-32 "
                 "(install libdeflate-dev for the faster one)")
endif()

# The core library, one folder per stage (docs/architecture.md): buffer/ (event types, rings,
# interning, ticks), plugin/ (observer, config, session), drain/ (rings → exporters), exporters/,
# record_function/ (module scopes). A C++ user sees only include/ (PUBLIC); the source root is
# PRIVATE: internal headers are not part of the API.
add_library(fqntrace SHARED
  buffer/buffer_registry.cpp
  buffer/event.cpp
  buffer/event_ring.cpp
  buffer/intern.cpp
  buffer/module_table.cpp
  buffer/ticks.cpp
  plugin/autostart.cpp
  plugin/collectives.cpp
  plugin/compiled_graph.cpp
  plugin/config.cpp
  plugin/flops.cpp
  plugin/log.cpp
  plugin/memory_reporter.cpp
  plugin/name_cache.cpp
  plugin/schema_names.cpp
  plugin/observer.cpp
  plugin/sampled_observer.cpp
  plugin/param_owners.cpp
  plugin/seq_map.cpp
  plugin/session.cpp
  plugin/session_state.cpp
  plugin/shapes_encoder.cpp
  plugin/step_window.cpp
  plugin/steps.cpp
  plugin/captures.cpp
  plugin/demand.cpp
  plugin/device_use.cpp
  plugin/json_reader.cpp
  drain/drainer.cpp
  drain/module_spans.cpp
  drain/shapes_assembler.cpp
  drain/tick_converter.cpp
  exporters/chrome_trace_exporter.cpp
  exporters/crc32.cpp
  exporters/device_json.cpp
  exporters/event_lines.cpp
  exporters/gzip_stream.cpp
  exporters/json_lines_exporter.cpp
  exporters/json_text.cpp
  exporters/memory_json.cpp
  exporters/module_span_json.cpp
  exporters/output_file.cpp
  record_function/module_scope.cpp
  record_function/module_tree.cpp
  record_function/step.cpp
)
target_include_directories(fqntrace
  PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(fqntrace PUBLIC fqntrace::torch PRIVATE pthread dl)
if(LIBDEFLATE_LIBRARY AND LIBDEFLATE_INCLUDE_DIR)
  target_include_directories(fqntrace PRIVATE ${LIBDEFLATE_INCLUDE_DIR})
  target_link_libraries(fqntrace PRIVATE ${LIBDEFLATE_LIBRARY})
  set_source_files_properties(exporters/crc32.cpp
    PROPERTIES COMPILE_DEFINITIONS FQNTRACE_HAVE_LIBDEFLATE)
endif()
target_compile_options(fqntrace PRIVATE ${FQNTRACE_WARNINGS})
target_compile_definitions(fqntrace PRIVATE FQNTRACE_VERSION="${PROJECT_VERSION}")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  # TLS descriptors: the callbacks' thread_local reads skip __tls_get_addr's general path
  # (this library is dlopen'ed, so its TLS is otherwise reached the slow, general-dynamic way).
  target_compile_options(fqntrace PRIVATE -mtls-dialect=gnu2)
endif()
# libtorch's headers are most of the build: a file that includes autograd's or nn::Module's takes
# ~10-30 s, nearly all of it in those headers. The files that gain share one precompiled header
# (measured: the library's files 240 -> 163 CPU-s with it); the others skip it: loading the
# ~0.5 GB header costs a light file more than it takes, and session.cpp or the tests that build
# a model spend their time in their own templates. FQNTRACE_PCH=OFF builds without it.
option(FQNTRACE_PCH "precompile libtorch's headers for the files that include them" ON)
if(FQNTRACE_PCH)
  target_precompile_headers(fqntrace PRIVATE
    <ATen/record_function.h> <torch/nn/module.h> <torch/csrc/autograd/function.h>
    <torch/csrc/autograd/functions/accumulate_grad.h> <torch/csrc/autograd/graph_task.h>)
  get_target_property(_fqntrace_sources fqntrace SOURCES)
  foreach(_source IN LISTS _fqntrace_sources)
    if(NOT _source MATCHES "^(record_function/module_|plugin/(collectives|observer|sampled_observer|param_owners|flops|memory_reporter)\\.cpp)")
      set_source_files_properties(${_source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endif()
# Find libtorch beside us in site-packages (the .so is installed into the fqntrace package).
set_target_properties(fqntrace PROPERTIES
  BUILD_RPATH "${FQNTRACE_TORCH_LIB_DIR}"
  INSTALL_RPATH "$ORIGIN/../torch/lib")

# The Python binding (fqntrace._C): a CPython extension that links the core. Internal headers:
# it is part of the project, not a user of the API.
Python3_add_library(fqntrace_C MODULE WITH_SOABI
  binding/module.cpp
  binding/compiled_code_methods.cpp
  binding/module_scope_methods.cpp
  binding/session_methods.cpp
  binding/device_methods.cpp
  binding/unprofiled_calls.cpp)
set_target_properties(fqntrace_C PROPERTIES OUTPUT_NAME "_C"
  BUILD_RPATH "$ORIGIN;${FQNTRACE_TORCH_LIB_DIR}"
  INSTALL_RPATH "$ORIGIN;$ORIGIN/../torch/lib")
target_include_directories(fqntrace_C PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(fqntrace_C PRIVATE fqntrace)
target_compile_options(fqntrace_C PRIVATE ${FQNTRACE_WARNINGS})
