# The functions cmake/dlock_targets.cmake is written in. tools/check_cmake_sources
# replaces them with printing versions (cmake/list_targets.cmake) to compare
# the lists with Bazel's, so each call must name its files literally.
#
#   dlock_library(<name> [INSTALL] [TESTONLY] BAZEL <labels...>
#                 [SRCS <.cc...>] [HDRS <.h...>]
#                 [PUBLIC_DEPS <targets...>] [PRIVATE_DEPS <targets...>])
#     Target dlock_<name> (alias dlock::<name>), mirroring the union of the
#     Bazel cc_library targets BAZEL. INSTALL: installed and exported as
#     dlock::<name>, headers under include/dlock/<dir>/. TESTONLY: built only
#     with DLOCK_BUILD_TESTS. No SRCS: an INTERFACE (header-only) library.
#   dlock_test(<name> BAZEL <label> SRCS <...> DEPS <targets...>)
#     A GoogleTest binary run by CTest (only with DLOCK_BUILD_TESTS).
#   dlock_binary(<name> [INSTALL] BAZEL <label> SRCS <...> DEPS <targets...>)
include_guard(GLOBAL)

function(_dlock_prefix_sources out)
  set(result "")
  foreach(f IN LISTS ARGN)
    list(APPEND result "${PROJECT_SOURCE_DIR}/${f}")
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(dlock_library name)
  cmake_parse_arguments(PARSE_ARGV 1 A "INSTALL;TESTONLY"
                        "" "BAZEL;SRCS;HDRS;PUBLIC_DEPS;PRIVATE_DEPS;REQUIRES")
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dlock_library(${name}): unknown arguments ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(A_TESTONLY AND NOT DLOCK_BUILD_TESTS)
    return()
  endif()
  # REQUIRES <targets>: an optional component, built only when they exist
  # (e.g. PkgConfig::dlock_libpq for dlock::fenced_pg).
  foreach(required IN LISTS A_REQUIRES)
    if(NOT TARGET ${required})
      message(STATUS "dlock: not building dlock::${name} (${required} not found)")
      return()
    endif()
  endforeach()
  set(target dlock_${name})
  _dlock_prefix_sources(srcs ${A_SRCS})
  _dlock_prefix_sources(hdrs ${A_HDRS})
  if(A_SRCS)
    if(A_INSTALL)
      add_library(${target} ${srcs} ${hdrs})
    else()
      add_library(${target} STATIC ${srcs} ${hdrs})
    endif()
    set(scope PUBLIC)
    target_link_libraries(${target} PRIVATE ${A_PRIVATE_DEPS})
    target_compile_options(${target} PRIVATE ${DLOCK_WARNINGS})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
    if(A_PRIVATE_DEPS)
      message(FATAL_ERROR "dlock_library(${name}): PRIVATE_DEPS without SRCS")
    endif()
  endif()
  add_library(dlock::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_link_libraries(${target} ${scope} ${A_PUBLIC_DEPS})
  target_compile_features(${target} ${scope} cxx_std_17)
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${DLOCK_GENERATED_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(A_INSTALL)
    install(TARGETS ${target} EXPORT dlockTargets
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
      RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    foreach(h IN LISTS A_HDRS)
      get_filename_component(dir "${h}" DIRECTORY)
      install(FILES "${PROJECT_SOURCE_DIR}/${h}"
              DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/dlock/${dir}")
    endforeach()
  endif()
endfunction()

function(dlock_test name)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "" "BAZEL;SRCS;DEPS")
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dlock_test(${name}): unknown arguments ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT DLOCK_BUILD_TESTS)
    return()
  endif()
  _dlock_prefix_sources(srcs ${A_SRCS})
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gmock_main)
  target_compile_options(${name} PRIVATE ${DLOCK_WARNINGS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        "${PROJECT_BINARY_DIR}/tests")
  add_test(NAME ${name} COMMAND ${name})
  # Like Bazel's TEST_TMPDIR: a private scratch directory per test.
  set(tmp "${PROJECT_BINARY_DIR}/test_tmp/${name}")
  file(MAKE_DIRECTORY "${tmp}")
  set_tests_properties(${name} PROPERTIES TIMEOUT 300
    ENVIRONMENT "TEST_TMPDIR=${tmp}")
endfunction()

function(dlock_binary name)
  cmake_parse_arguments(PARSE_ARGV 1 A "INSTALL" "" "BAZEL;SRCS;DEPS")
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dlock_binary(${name}): unknown arguments ${A_UNPARSED_ARGUMENTS}")
  endif()
  _dlock_prefix_sources(srcs ${A_SRCS})
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  target_compile_options(${name} PRIVATE ${DLOCK_WARNINGS})
  if(A_INSTALL)
    install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endfunction()

# dlock_bazel_only(<labels or //pkg/... patterns> REASON "why"): Bazel
# targets CMake deliberately does not build (tools/check_cmake_sources reads
# the labels; the reason is for the reader).
function(dlock_bazel_only)
endfunction()
