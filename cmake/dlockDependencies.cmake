# The system libraries dlock builds against, found with pkg-config (the same
# Debian packages as //third_party:*). Included by dlock's own CMakeLists.txt
# and by the installed dlockConfig.cmake, so a consumer's imported targets
# resolve to the same PkgConfig::dlock_* targets.
#
# Defines (all IMPORTED, GLOBAL in dlock's own build):
#   PkgConfig::dlock_absl     Abseil modules used by the libraries
#   PkgConfig::dlock_absl_flags  Abseil flags (the CLI only)
#   PkgConfig::dlock_crypto   OpenSSL libcrypto (SHA-1, RAND_bytes)
#   PkgConfig::dlock_ssl      OpenSSL libssl (TlsTransport, rediss://)
#   PkgConfig::dlock_hiredis  hiredis 0.14 (dlock::uv)
#   PkgConfig::dlock_libuv    libuv 1.x (dlock::uv)
#   PkgConfig::dlock_lua      Lua 5.1 (dlock::fake only)
#   PkgConfig::dlock_libpq    libpq (dlock::fenced_pg only; optional)
#   Threads::Threads
if(NOT COMMAND pkg_check_modules)
  find_package(PkgConfig REQUIRED)
endif()
find_package(Threads REQUIRED)

# Keep in sync with DLOCK_PC_ABSL in CMakeLists.txt (dlock.pc's Requires).
set(DLOCK_ABSL_MODULES
  absl_algorithm_container absl_any_invocable absl_flat_hash_map
  absl_flat_hash_set absl_function_ref absl_inlined_vector absl_random_random absl_span absl_status
  absl_statusor absl_str_format absl_strings absl_synchronization absl_time)
set(DLOCK_ABSL_FLAGS_MODULES
  absl_flags absl_flags_parse absl_flags_reflection absl_flags_commandlineflag)

if(NOT TARGET PkgConfig::dlock_absl)
  pkg_check_modules(dlock_absl REQUIRED IMPORTED_TARGET GLOBAL ${DLOCK_ABSL_MODULES})
endif()
if(NOT TARGET PkgConfig::dlock_crypto)
  pkg_check_modules(dlock_crypto REQUIRED IMPORTED_TARGET GLOBAL libcrypto)
endif()
if(NOT TARGET PkgConfig::dlock_ssl)
  pkg_check_modules(dlock_ssl REQUIRED IMPORTED_TARGET GLOBAL libssl)
endif()
if(NOT TARGET PkgConfig::dlock_hiredis)
  pkg_check_modules(dlock_hiredis REQUIRED IMPORTED_TARGET GLOBAL hiredis)
endif()
if(NOT TARGET PkgConfig::dlock_libuv)
  pkg_check_modules(dlock_libuv REQUIRED IMPORTED_TARGET GLOBAL libuv)
endif()
# Only the fake (and the CLI) need these; a consumer that never links
# dlock::fake does not need Lua installed.
if(NOT TARGET PkgConfig::dlock_lua)
  pkg_check_modules(dlock_lua QUIET IMPORTED_TARGET GLOBAL lua5.1)
endif()
if(NOT TARGET PkgConfig::dlock_absl_flags)
  pkg_check_modules(dlock_absl_flags QUIET IMPORTED_TARGET GLOBAL ${DLOCK_ABSL_FLAGS_MODULES})
endif()
# Only the PostgreSQL fenced store (dlock::fenced_pg) needs libpq; without
# it that component is not built.
if(NOT TARGET PkgConfig::dlock_libpq)
  pkg_check_modules(dlock_libpq QUIET IMPORTED_TARGET GLOBAL libpq)
endif()
