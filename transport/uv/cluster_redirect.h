// This header defines `ClassifyClusterReply`: what a node's answer to a
// command routed by ClusterTransport (cluster_transport.h) means for that
// command -- its result, or a redirect to follow.
//
//   MOVED <slot> <host:port>   the slot has a new owner: update the map,
//                              send the command there
//   ASK <slot> <host:port>     the key is being migrated to host:port:
//                              send ASKING then the command there, once
//   TRYAGAIN..., CLUSTERDOWN... a migration or failover is under way: send
//                              the command again after a delay
//
// The resend rule lives here: only an error reply, which means the command
// did not run, is ever a redirect. A transport failure (timeout, lost
// connection: the command may have run) is always the result, never resent.
// A MOVED or ASK whose slot or address does not parse is the result too.
// A target announced without a host (":port") is taken to be 127.0.0.1.
//
// Thread-safe (pure function).
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_REDIRECT_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_REDIRECT_H_

#include <string>

#include "absl/status/statusor.h"
#include "dlock/transport/reply.h"

namespace dlock {

struct ClusterRedirect {
  enum class Kind { kResult, kMoved, kAsk, kTryAgain, kClusterDown };
  Kind kind = Kind::kResult;
  int slot = -1;       // kMoved, kAsk
  std::string target;  // kMoved, kAsk: "host:port"
};

ClusterRedirect ClassifyClusterReply(const absl::StatusOr<Reply>& reply);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_REDIRECT_H_
