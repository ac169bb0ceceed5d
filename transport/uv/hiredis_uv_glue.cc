#include "hiredis_uv_glue.h"  // private, same directory

#include <hiredis/async.h>
#include <uv.h>

namespace dlock {
namespace uv_glue {
namespace {

struct UvPoll {
  uv_poll_t handle;
  redisAsyncContext* context;  // null once hiredis has cleaned up
  int events;
  AfterIo after_io;
  void* arg;
};

void PollUpdate(UvPoll* p);

void OnPoll(uv_poll_t* handle, int status, int events) {
  UvPoll* p = static_cast<UvPoll*>(handle->data);
  int ev = events;
  if (status < 0) {
    ev = p->events;
    // libuv stopped the handle on error; keep watching what hiredis wants.
    if (p->context != nullptr && p->events != 0) PollUpdate(p);
  }
  // hiredis may clean the context up inside either call (p->context is
  // then null); `p` itself stays valid until libuv's close callback, which
  // runs on a later loop turn.
  if (p->context != nullptr && (ev & UV_READABLE)) redisAsyncHandleRead(p->context);
  if (p->context != nullptr && (ev & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
  if (p->after_io != nullptr) p->after_io(p->arg);
}

void PollUpdate(UvPoll* p) {
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, OnPoll);
  } else {
    uv_poll_stop(&p->handle);
  }
}

// hiredis's addRead/delRead/addWrite/delWrite: `flag` on or off, the
// poll handle restarted only when the set of events changes.
void PollSetEvent(void* data, int flag, bool on) {
  UvPoll* p = static_cast<UvPoll*>(data);
  const int events = on ? (p->events | flag) : (p->events & ~flag);
  if (events == p->events) return;
  p->events = events;
  PollUpdate(p);
}
void PollAddRead(void* data) { PollSetEvent(data, UV_READABLE, true); }
void PollDelRead(void* data) { PollSetEvent(data, UV_READABLE, false); }
void PollAddWrite(void* data) { PollSetEvent(data, UV_WRITABLE, true); }
void PollDelWrite(void* data) { PollSetEvent(data, UV_WRITABLE, false); }
void PollCleanup(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->context = nullptr;
  // `after_io` stays: replies read before hiredis gave up on the context
  // (e.g. a protocol error later in the same read) are still delivered by
  // it. After uv_close the poll callback never runs again.
  // The memory may only be freed in the close callback.
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
           [](uv_handle_t* h) { delete static_cast<UvPoll*>(h->data); });
}

}  // namespace

bool Attach(redisAsyncContext* ac, uv_loop_s* loop, AfterIo after_io, void* arg) {
  if (ac->ev.data != nullptr) return false;
  UvPoll* p = new UvPoll{};
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;  // not registered with the loop when init fails
    return false;
  }
  p->handle.data = p;
  p->context = ac;
  p->after_io = after_io;
  p->arg = arg;
  ac->ev.data = p;
  ac->ev.addRead = PollAddRead;
  ac->ev.delRead = PollDelRead;
  ac->ev.addWrite = PollAddWrite;
  ac->ev.delWrite = PollDelWrite;
  ac->ev.cleanup = PollCleanup;
  return true;
}

}  // namespace uv_glue
}  // namespace dlock
