#include "dlock/cli/signal_watch.h"

#include <uv.h>

#include <utility>

namespace dlock {
namespace cli {

SignalWatch::~SignalWatch() { Stop(); }

void SignalWatch::Start(uv_loop_s* loop, std::initializer_list<int> signals,
                        std::function<void(int)> handler) {
  handler_ = std::move(handler);
  for (int signum : signals) {
    auto* h = new uv_signal_t;
    uv_signal_init(loop, h);
    h->data = this;
    uv_signal_start(h, &SignalWatch::OnSignal, signum);
    handles_.push_back(h);
  }
}

void SignalWatch::Stop() {
  // The memory goes in the close callback (libuv handle.rst).
  for (uv_signal_t* h : handles_) {
    uv_close(reinterpret_cast<uv_handle_t*>(h),
             [](uv_handle_t* handle) { delete reinterpret_cast<uv_signal_t*>(handle); });
  }
  handles_.clear();
}

void SignalWatch::OnSignal(uv_signal_t* handle, int signum) {
  static_cast<SignalWatch*>(handle->data)->handler_(signum);
}

}  // namespace cli
}  // namespace dlock
