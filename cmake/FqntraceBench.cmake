# P4's exporter benchmark (scripts/bench.sh runs it): built only when Google Benchmark is
# installed (Debian: libbenchmark-dev, which scripts/setup.sh installs), in a build with the tests
# (it uses their event mix); nothing else needs it.
find_package(benchmark QUIET)
if(benchmark_FOUND)
  add_executable(fqntrace_exporter_bench bench/exporter_bench/exporter_bench.cpp)
  target_link_libraries(fqntrace_exporter_bench PRIVATE fqntrace_event_mix benchmark::benchmark)
  target_compile_options(fqntrace_exporter_bench PRIVATE ${FQNTRACE_WARNINGS})
  set_target_properties(fqntrace_exporter_bench PROPERTIES
    BUILD_RPATH "${FQNTRACE_TORCH_LIB_DIR};${CMAKE_BINARY_DIR}")
else()
  message(STATUS "fqntrace: Google Benchmark not found (libbenchmark-dev): "
                 "fqntrace_exporter_bench is not built")
endif()
