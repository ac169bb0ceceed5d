#include "dlock/transport/uv/host_lookup.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <uv.h>

#include <utility>

namespace dlock {

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Owned by libuv from uv_getaddrinfo until its callback, which frees it.
struct HostLookup::Request {
  uv_getaddrinfo_t req;
  HostLookup* owner = nullptr;  // null once abandoned
  Done done;
};

int HostLookup::Start(uv_loop_s* loop, const std::string& host, Done done,
                      std::unique_ptr<HostLookup>* lookup) {
  auto* r = new Request;
  r->req.data = r;
  r->done = std::move(done);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = uv_getaddrinfo(
      loop, &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        std::unique_ptr<Request> r(static_cast<Request*>(req->data));
        char ip[INET6_ADDRSTRLEN] = {0};
        if (status == 0 && res != nullptr) {
          const addrinfo* pick = res;
          for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
            if (a->ai_family == AF_INET) {
              pick = a;
              break;
            }
          }
          if (pick->ai_family == AF_INET6) {
            uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(pick->ai_addr), ip, sizeof(ip));
          } else if (pick->ai_family == AF_INET) {
            uv_ip4_name(reinterpret_cast<const sockaddr_in*>(pick->ai_addr), ip, sizeof(ip));
          }
        }
        if (res != nullptr) uv_freeaddrinfo(res);
        if (r->owner == nullptr) return;  // abandoned
        r->owner->request_ = nullptr;
        Done done = std::move(r->done);
        r.reset();
        // May destroy the HostLookup (it no longer refers to the request).
        std::move(done)(status, ip);
      },
      host.c_str(), nullptr, &hints);
  if (rc != 0) {
    delete r;
    lookup->reset();
    return rc;
  }
  lookup->reset(new HostLookup(r));
  r->owner = lookup->get();
  return 0;
}

HostLookup::~HostLookup() {
  if (request_ == nullptr) return;
  request_->owner = nullptr;
  request_->done = nullptr;
  uv_cancel(reinterpret_cast<uv_req_t*>(&request_->req));
}

}  // namespace dlock
