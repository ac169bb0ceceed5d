// HiredisLink: see hiredis_link.h.
#include "hiredis_link.h"  // private, same directory

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_reply.h"
#include "hiredis_uv_glue.h"  // private, same directory

namespace dlock {
namespace {

void AfterIo(void* events) { static_cast<LinkEvents*>(events)->AfterLinkIo(); }

std::string Lost(const std::string& endpoint, const redisAsyncContext* ac) {
  const char* err = ac != nullptr ? ac->errstr : nullptr;
  return absl::StrCat(endpoint, ": connection lost",
                      err != nullptr && err[0] ? absl::StrCat(": ", err) : "");
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisLink>> HiredisLink::Open(
    uv_loop_s* loop, const HiredisTransportOptions& options, const std::string& ip,
    const std::string& endpoint, LinkEvents* events) {
  redisAsyncContext* ac = options.unix_socket.empty()
                              ? redisAsyncConnect(ip.c_str(), options.port)
                              : redisAsyncConnectUnix(options.unix_socket.c_str());
  if (ac == nullptr) return absl::UnavailableError(absl::StrCat(endpoint, ": out of memory"));
  absl::Status why;
  if (ac->err) {
    why = absl::UnavailableError(absl::StrCat(endpoint, ": connect failed: ", ac->errstr));
  } else if (!uv_glue::Attach(ac, loop, &AfterIo, events)) {
    why = absl::UnavailableError(
        absl::StrCat(endpoint, ": cannot watch the socket on the loop"));
  }
  if (!why.ok()) {
    redisAsyncFree(ac);
    return why;
  }
  std::unique_ptr<HiredisLink> link(new HiredisLink(endpoint, events));
  // A command connection's replies are built as dlock Replies by the reader
  // itself (hiredis_reply.h); a pub/sub connection's stay hiredis's, which
  // hiredis reads to route its subscription replies.
  link->dlock_replies_ = !events->PushReplies();
  if (link->dlock_replies_) UseDlockReplies(ac->c.reader);
  ac->data = link.get();
  link->ac_ = ac;
  // The adapter must be attached first: setting the connect callback asks
  // it to watch for writability.
  redisAsyncSetConnectCallback(ac, &HiredisLink::OnConnect);
  redisAsyncSetDisconnectCallback(ac, &HiredisLink::OnDisconnect);
  return std::unique_ptr<RedisLink>(std::move(link));
}

HiredisLink::~HiredisLink() {
  if (ac_ == nullptr) return;
  tearing_down_ = true;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;
  // Never called from inside a hiredis callback of this context (the owner
  // defers what a reply callback would tear down).
  redisAsyncFree(ac);
}

void HiredisLink::OnConnect(const redisAsyncContext* ac, int status) {
  HiredisLink* link = static_cast<HiredisLink*>(ac->data);
  if (status == REDIS_OK) {
    link->events_->OnLinkOpen();
    return;
  }
  // hiredis frees the context after this callback; nothing was sent on it.
  link->ac_ = nullptr;
  link->events_->OnLinkLost(absl::UnavailableError(absl::StrCat(
      link->endpoint_, ": connect failed: ", ac->errstr ? ac->errstr : "?")));
}

void HiredisLink::OnDisconnect(const redisAsyncContext* ac, int) {
  HiredisLink* link = static_cast<HiredisLink*>(ac->data);
  if (link->tearing_down_) return;  // the destructor is freeing it
  // hiredis has called every pending reply callback with NULL and frees the
  // context after we return.
  link->ac_ = nullptr;
  link->events_->OnLinkLost(absl::UnavailableError(Lost(link->endpoint_, ac)));
}

void HiredisLink::OnReply(redisAsyncContext*, void* reply, void* privdata) {
  HiredisLink* link = static_cast<HiredisLink*>(privdata);
  // NULL: the context is going away; the owner fails the FIFO itself.
  if (reply == nullptr || link->tearing_down_) return;
  link->events_->OnLinkReply(link->dlock_replies_
                                 ? TakeDlockReply(reply)
                                 : ReplyFromHiredis(*static_cast<const redisReply*>(reply)));
}

bool HiredisLink::Write(absl::Span<const absl::string_view> argv) {
  if (ac_ == nullptr) return false;
  // The protocol is formatted here, into a buffer kept across commands,
  // rather than by redisAsyncCommandArgv (which builds a new sds per
  // command): the same bytes, without the allocations.
  format_.clear();
  AppendCommand(argv, &format_);
  return redisAsyncFormattedCommand(ac_, &HiredisLink::OnReply, this, format_.data(),
                                    format_.size()) == REDIS_OK;
}

std::string HiredisLink::TimeoutMessage(absl::Duration limit) const {
  return absl::StrCat(endpoint_, ": connect timed out after ", absl::FormatDuration(limit));
}

}  // namespace dlock
