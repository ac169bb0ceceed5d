# cmake -P cmake/list_targets.cmake: prints every call of
# cmake/dlock_targets.cmake, one per line (for tools/check_cmake_sources):
#   <kind>|<name>|<bazel labels>|<srcs>|<hdrs>     (lists space-separated)
cmake_minimum_required(VERSION 3.16)

function(_dlock_print kind name)
  cmake_parse_arguments(PARSE_ARGV 2 A "INSTALL;TESTONLY" ""
                        "BAZEL;SRCS;HDRS;PUBLIC_DEPS;PRIVATE_DEPS;DEPS;REQUIRES")
  list(JOIN A_BAZEL " " bazel)
  list(JOIN A_SRCS " " srcs)
  list(JOIN A_HDRS " " hdrs)
  message(NOTICE "${kind}|${name}|${bazel}|${srcs}|${hdrs}")
endfunction()

function(dlock_library name)
  _dlock_print(library ${name} ${ARGN})
endfunction()
function(dlock_test name)
  _dlock_print(test ${name} ${ARGN})
endfunction()
function(dlock_binary name)
  _dlock_print(binary ${name} ${ARGN})
endfunction()
function(dlock_bazel_only)
  # Labels or //pkg/... patterns, then REASON "why".
  cmake_parse_arguments(PARSE_ARGV 0 A "" "REASON" "")
  if(NOT A_REASON)
    message(FATAL_ERROR "dlock_bazel_only(${ARGN}): give a REASON")
  endif()
  list(JOIN A_UNPARSED_ARGUMENTS " " joined)
  message(NOTICE "bazel_only|-|${joined}||")
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/dlock_targets.cmake")
