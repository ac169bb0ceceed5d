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

namespace {

// A top-level reply of a UseDlockReplies reader. `head` comes first: hiredis
// casts the object to redisReply* where it looks at a reply itself (a reply
// no callback waits for: its type, and an error's text).
struct RootReply {
  redisReply head;
  Reply reply;
  RootReply* next = nullptr;  // in the free list
};

// This thread's spare RootReplys (a reader's replies are built and freed on
// the thread that reads; a few are kept, the rest deleted).
class FreeRoots {
 public:
  FreeRoots() = default;
  FreeRoots(const FreeRoots&) = delete;
  FreeRoots& operator=(const FreeRoots&) = delete;
  ~FreeRoots() {
    while (first_ != nullptr) delete Pop();
  }
  RootReply* Get() { return first_ != nullptr ? Pop() : new RootReply(); }
  void Put(RootReply* r) {
    if (kept_ >= kKeep) {
      delete r;
      return;
    }
    r->reply = Reply();  // frees what a reply not taken still holds
    r->next = first_;
    first_ = r;
    ++kept_;
  }

 private:
  static constexpr int kKeep = 16;
  RootReply* Pop() {
    RootReply* r = first_;
    first_ = r->next;
    --kept_;
    return r;
  }
  RootReply* first_ = nullptr;
  int kept_ = 0;
};

thread_local FreeRoots free_roots;

// The Reply that `task` fills, and the object hiredis keeps for it: a new
// RootReply for a top-level reply, else the element of its parent's vector
// (sized when the parent array was created, so the pointer stays valid).
struct Target {
  Reply* reply;
  void* obj;
  RootReply* root;  // null for an element
};

Target TargetOf(const redisReadTask* task) {
  const redisReadTask* parent = task->parent;
  if (parent == nullptr) {
    RootReply* r = free_roots.Get();
    return {&r->reply, r, r};
  }
  Reply* array = parent->parent == nullptr ? &static_cast<RootReply*>(parent->obj)->reply
                                           : static_cast<Reply*>(parent->obj);
  Reply* slot = &array->elements[static_cast<size_t>(task->idx)];
  return {slot, slot, nullptr};
}

// Fills a top-level reply's redisReply header from its Reply.
void Describe(RootReply* r, int type) {
  r->head = redisReply{};
  r->head.type = type;
  Reply& v = r->reply;
  switch (type) {
    case REDIS_REPLY_INTEGER:
      r->head.integer = v.integer;
      break;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STRING:
      r->head.str = &v.str[0];
      r->head.len = v.str.size();
      break;
    case REDIS_REPLY_ARRAY:
      r->head.elements = v.elements.size();
      break;
    default:
      break;
  }
}

void* Finish(const Target& t, int type) {
  if (t.root != nullptr) Describe(t.root, type);
  return t.obj;
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Target t = TargetOf(task);
  Reply& r = *t.reply;
  r.type = task->type == REDIS_REPLY_STATUS  ? Reply::Type::kStatus
           : task->type == REDIS_REPLY_ERROR ? Reply::Type::kError
                                             : Reply::Type::kString;
  r.str.assign(str, len);
  return Finish(t, task->type);
}

void* CreateArray(const redisReadTask* task, int elements) {
  Target t = TargetOf(task);
  Reply& r = *t.reply;
  r.type = Reply::Type::kArray;
  r.elements.resize(elements > 0 ? static_cast<size_t>(elements) : 0);
  return Finish(t, REDIS_REPLY_ARRAY);
}

void* CreateInteger(const redisReadTask* task, long long value) {  // NOLINT(runtime/int)
  Target t = TargetOf(task);
  t.reply->type = Reply::Type::kInteger;
  t.reply->integer = value;
  return Finish(t, REDIS_REPLY_INTEGER);
}

void* CreateNil(const redisReadTask* task) {
  Target t = TargetOf(task);
  t.reply->type = Reply::Type::kNil;
  return Finish(t, REDIS_REPLY_NIL);
}

// Called only for top-level objects (hiredis frees a reply as a whole).
void FreeObject(void* obj) { free_roots.Put(static_cast<RootReply*>(obj)); }

redisReplyObjectFunctions dlock_reply_functions = {CreateString, CreateArray, CreateInteger,
                                                   CreateNil, FreeObject};

}  // namespace

void UseDlockReplies(redisReader* reader) { reader->fn = &dlock_reply_functions; }

Reply TakeDlockReply(void* obj) { return std::move(static_cast<RootReply*>(obj)->reply); }

}  // namespace dlock
