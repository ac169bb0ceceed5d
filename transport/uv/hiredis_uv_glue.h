// This header attaches a hiredis async context to a libuv loop: the
// replacement for hiredis 0.14.1's adapters/libuv.h used by
// `HiredisTransport`. Private to //transport/uv:hiredis_transport.
//
// Why not the stock adapter: its poll callback returns early on a non-zero
// status. When a connect is refused, libuv reports POLLERR as status
// UV_EBADF (and stops the poll), the adapter drops it, hiredis never learns
// the connect failed, and the attempt hangs. Here an error status is handed
// to hiredis as "readable/writable", so its own read/write sees the socket
// error and fails the connection.
//
// Writes: once the connection is up, what hiredis buffers is written by a
// zero-delay timer, i.e. in the loop's next timer phase (one write for every
// command of a loop phase), not after a writability event: libuv re-registers
// the fd with epoll (two epoll_ctl calls) on every change of watched events.
// Only a write the socket did not take whole waits for writability.
//
// `after_io`, when set, runs after every poll event and every such write, once hiredis's
// redisAsyncHandleRead/HandleWrite have returned, i.e. outside every
// hiredis callback of the context: the transport delivers the replies
// collected during the read there, in the same loop turn. It may free the
// context (redisAsyncFree) or destroy its owner. It also runs for the event
// in which hiredis cleaned the context up, never after: cleanup closes the
// watcher, so `arg` must outlive the context.
#ifndef DLOCK_TRANSPORT_UV_HIREDIS_UV_GLUE_H_
#define DLOCK_TRANSPORT_UV_HIREDIS_UV_GLUE_H_

struct redisAsyncContext;
struct uv_loop_s;

namespace dlock {
namespace uv_glue {

using AfterIo = void (*)(void* arg);

// Watches `ac`'s socket on `loop` and installs hiredis's event hooks. False
// when `ac` already has an event library attached or libuv refuses the fd
// (nothing is attached then). The watcher is closed (and its memory freed
// in libuv's close callback) when hiredis cleans up the context.
bool Attach(redisAsyncContext* ac, uv_loop_s* loop, AfterIo after_io, void* arg);

}  // namespace uv_glue
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_UV_GLUE_H_
