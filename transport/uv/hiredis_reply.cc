#include "dlock/transport/uv/hiredis_reply.h"

#include <hiredis/hiredis.h>

#include <string>
#include <utility>
#include <vector>

namespace dlock {

Reply ReplyFromHiredis(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      return Reply::Integer(reply.integer);
    case REDIS_REPLY_STATUS:
      return Reply::Status(std::string(reply.str, reply.len));
    case REDIS_REPLY_STRING:
      return Reply::String(std::string(reply.str, reply.len));
    case REDIS_REPLY_ERROR:
      return Reply::Error(std::string(reply.str, reply.len));
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(reply.elements);
      for (size_t i = 0; i < reply.elements; ++i) {
        elements.push_back(ReplyFromHiredis(*reply.element[i]));
      }
      return Reply::Array(std::move(elements));
    }
    case REDIS_REPLY_NIL:
    default:
      return Reply::Nil();
  }
}

}  // namespace dlock
