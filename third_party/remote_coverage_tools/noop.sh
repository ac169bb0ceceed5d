#!/bin/sh
# Coverage post-processing is not part of dlock's offline toolchain.
exit 0
