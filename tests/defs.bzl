"""Macros shared by the BUILD files under tests/.

Every target there follows one pattern: a test is NAME.cc linked with
GoogleTest's main; a helper library is testonly NAME.cc + NAME.h included as
"dlock/<package>/NAME.h"; a helper binary (a worker process) is testonly
NAME.cc. The macros write that pattern once; each BUILD file names only what
differs (deps, size, data, visibility).
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

# What a test of a lock through UvTransport on a private Sentinel deployment
# (//testing:sentinel_deployment) links besides its own deps.
SENTINEL_CLIENT_TEST_DEPS = [
    "//lock:simple_lock",
    "//testing:sentinel_deployment",
    "//testing:status_matchers",
    "//transport/uv:redis_url",
    "//transport/uv:uv_event_loop",
    "//transport/uv:uv_test_loop",
    "//transport/uv:uv_transport",
    "@com_google_absl//absl/strings",
]

def dlock_test(name, deps, size = "medium", srcs = None, **kwargs):
    """A cc_test built from NAME.cc (unless srcs is given) with gtest_main."""
    cc_test(
        name = name,
        size = size,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = deps + ["@com_google_googletest//:gtest_main"],
        **kwargs
    )

def dlock_test_library(name, deps = [], srcs = None, hdrs = None, **kwargs):
    """A testonly cc_library of NAME.cc and NAME.h, included as dlock/<package>/NAME.h.

    A header-only helper passes srcs = [].
    """
    cc_library(
        name = name,
        testonly = True,
        srcs = srcs if srcs != None else [name + ".cc"],
        hdrs = hdrs if hdrs != None else [name + ".h"],
        include_prefix = "dlock/" + native.package_name(),
        deps = deps,
        **kwargs
    )

def dlock_test_binary(name, deps, srcs = None, **kwargs):
    """A testonly cc_binary built from NAME.cc (a worker process or a long run)."""
    cc_binary(
        name = name,
        testonly = True,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = deps,
        **kwargs
    )
