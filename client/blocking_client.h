// Forwarding header: `BlockingClient` lives in
// dlock/blocking/blocking_client.h (target //blocking:blocking_client).
// Kept so code that includes the old path still compiles.
#ifndef DLOCK_CLIENT_BLOCKING_CLIENT_H_
#define DLOCK_CLIENT_BLOCKING_CLIENT_H_

#include "dlock/blocking/blocking_client.h"

#endif  // DLOCK_CLIENT_BLOCKING_CLIENT_H_
