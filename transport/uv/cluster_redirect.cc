#include "dlock/transport/uv/cluster_redirect.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/uv/cluster_options.h"

namespace dlock {

ClusterRedirect ClassifyClusterReply(const absl::StatusOr<Reply>& reply) {
  using Kind = ClusterRedirect::Kind;
  ClusterRedirect r;
  if (!reply.ok() || reply->type != Reply::Type::kError) return r;
  const std::string& text = reply->str;
  if (absl::StartsWith(text, "TRYAGAIN")) {
    r.kind = Kind::kTryAgain;
    return r;
  }
  if (absl::StartsWith(text, "CLUSTERDOWN")) {
    r.kind = Kind::kClusterDown;
    return r;
  }
  const bool moved = absl::StartsWith(text, "MOVED ");
  if (!moved && !absl::StartsWith(text, "ASK ")) return r;
  // "MOVED <slot> <host:port>" / "ASK <slot> <host:port>".
  std::vector<absl::string_view> f = absl::StrSplit(text, ' ');
  int slot = -1;
  if (f.size() != 3 || !absl::SimpleAtoi(f[1], &slot) || slot < 0 || slot >= kClusterSlots ||
      !ParseClusterEndpoint(f[2]).ok()) {
    return r;
  }
  r.kind = moved ? Kind::kMoved : Kind::kAsk;
  r.slot = slot;
  r.target = std::string(f[2]);
  if (absl::StartsWith(r.target, ":")) r.target = "127.0.0.1" + r.target;  // no announced host
  return r;
}

}  // namespace dlock
