#include "hiredis_uv_glue.h"  // private, same directory

#include <hiredis/async.h>
#include <uv.h>

namespace dlock {
namespace uv_glue {
namespace {

struct UvPoll {
  uv_poll_t handle;
  // Writes of a connected context: flushed by a zero-delay timer instead
  // of waiting for the socket's writability (see OnFlush).
  uv_timer_t flush;
  redisAsyncContext* context;  // null once hiredis has cleaned up
  int events;                  // what `handle` watches
  bool flush_armed;
  bool flushing;  // inside OnFlush's redisAsyncHandleWrite
  int open_handles;
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
// A zero-delay timer, i.e. the next timer phase (before the loop polls, or
// right after the poll phase in UV_RUN_ONCE): write what hiredis buffered
// since, in one write -- every command issued in one loop phase still goes
// out together -- without watching the socket for writability first.
// libuv's uv_poll_start removes and re-adds the fd to epoll on every change
// of events (two epoll_ctl calls each), so watching for writability around
// each command cost four system calls per round trip. Only a write the
// socket did not take whole (hiredis asks again from inside HandleWrite)
// waits for writability.
// Not an idle handle: the libuv here (Debian's 1.44.2-1+deb12u1; seen in
// its uv_run) lets a UV_RUN_ONCE iteration that starts with an active idle
// handle poll only without blocking, so a caller turn (loop_turns.h) paid a
// second uv_run and an epoll_wait(0) per round trip. A due timer runs before
// the poll and leaves the blocking poll of the same iteration alone.
void OnFlush(uv_timer_t* timer) {
  UvPoll* p = static_cast<UvPoll*>(timer->data);
  p->flush_armed = false;
  if (p->context == nullptr) return;
  p->flushing = true;
  redisAsyncHandleWrite(p->context);
  p->flushing = false;
  if (p->after_io != nullptr) p->after_io(p->arg);
}

void PollAddRead(void* data) { PollSetEvent(data, UV_READABLE, true); }
void PollDelRead(void* data) { PollSetEvent(data, UV_READABLE, false); }
void PollAddWrite(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  // Before the connection is up, writability is how a non-blocking connect
  // reports that it finished: watch for it.
  if (!p->flushing && p->context != nullptr && (p->context->c.flags & REDIS_CONNECTED) != 0) {
    if (!p->flush_armed) {
      p->flush_armed = true;
      uv_timer_start(&p->flush, OnFlush, 0, 0);
    }
    return;
  }
  PollSetEvent(data, UV_WRITABLE, true);
}
void PollDelWrite(void* data) { PollSetEvent(data, UV_WRITABLE, false); }
void PollCleanup(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->context = nullptr;
  // `after_io` stays: replies read before hiredis gave up on the context
  // (e.g. a protocol error later in the same read) are still delivered by
  // it. After uv_close the poll callback never runs again.
  // The memory may only be freed in the close callback.
  auto closed = [](uv_handle_t* h) {
    UvPoll* q = static_cast<UvPoll*>(h->data);
    if (--q->open_handles == 0) delete q;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&p->flush), closed);
}

}  // namespace

bool Attach(redisAsyncContext* ac, uv_loop_s* loop, AfterIo after_io, void* arg) {
  if (ac->ev.data != nullptr) return false;
  UvPoll* p = new UvPoll{};
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;  // not registered with the loop when init fails
    return false;
  }
  uv_timer_init(loop, &p->flush);
  p->open_handles = 2;
  p->handle.data = p;
  p->flush.data = p;
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
