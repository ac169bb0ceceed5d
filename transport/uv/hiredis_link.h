// Internal to //transport/uv:hiredis_transport: `HiredisLink`, the RedisLink
// of HiredisTransport (redis_link.h): one hiredis async context on a libuv
// loop (hiredis_uv_glue.h), over TCP or a unix socket.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_HIREDIS_LINK_H_
#define DLOCK_TRANSPORT_UV_HIREDIS_LINK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/uv/connection_options.h"
#include "dlock/transport/uv/redis_link.h"

struct redisAsyncContext;
struct uv_loop_s;

namespace dlock {

class HiredisLink : public RedisLink {
 public:
  // Starts connecting to `ip`:options.port (or options.unix_socket) on
  // `loop`; kUnavailable when hiredis or libuv refuse at once. `events`
  // must outlive the context (it is also the glue's after_io argument).
  static absl::StatusOr<std::unique_ptr<RedisLink>> Open(
      uv_loop_s* loop, const HiredisTransportOptions& options, const std::string& ip,
      const std::string& endpoint, LinkEvents* events);
  // Frees the context (hiredis calls every pending reply callback with
  // NULL first; they are ignored: the owner fails its own FIFO).
  ~HiredisLink() override;

  bool Write(absl::Span<const absl::string_view> argv) override;
  std::string TimeoutMessage(absl::Duration limit) const override;

 private:
  HiredisLink(std::string endpoint, LinkEvents* events)
      : endpoint_(std::move(endpoint)), events_(events) {}
  static void OnReply(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnDisconnect(const redisAsyncContext* ac, int status);

  const std::string endpoint_;
  LinkEvents* const events_;
  redisAsyncContext* ac_ = nullptr;  // null once hiredis frees it
  bool tearing_down_ = false;        // we are freeing the context
  // The reader builds dlock Replies (UseDlockReplies): not on pub/sub.
  bool dlock_replies_ = false;
  std::string format_;  // the command being written, in RESP (reused)
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_LINK_H_
