// UseDlockReplies: a reader that builds dlock Replies itself gives the same
// Reply as hiredis's own objects copied by ReplyFromHiredis, for every RESP2
// type, nested arrays, and replies split across feeds.
#include "dlock/transport/uv/hiredis_reply.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dlock {
namespace {

// Every reply in `resp`, fed `chunk` bytes at a time (0: all at once), with
// hiredis's objects (copied) or with UseDlockReplies.
std::vector<Reply> ReadAll(const std::string& resp, bool dlock, size_t chunk) {
  redisReader* r = redisReaderCreate();
  if (dlock) UseDlockReplies(r);
  std::vector<Reply> out;
  size_t fed = 0;
  for (;;) {
    void* obj = nullptr;
    EXPECT_EQ(redisReaderGetReply(r, &obj), REDIS_OK) << r->errstr;
    if (obj != nullptr) {
      out.push_back(dlock ? TakeDlockReply(obj)
                          : ReplyFromHiredis(*static_cast<redisReply*>(obj)));
      r->fn->freeObject(obj);
      continue;
    }
    if (fed == resp.size()) break;
    const size_t n = chunk == 0 ? resp.size() - fed : std::min(chunk, resp.size() - fed);
    redisReaderFeed(r, resp.data() + fed, n);
    fed += n;
  }
  redisReaderFree(r);
  return out;
}

const char kMixed[] =
    "+OK\r\n+QUEUED\r\n-ERR wrong\r\n:42\r\n:-7\r\n$-1\r\n*-1\r\n*0\r\n$0\r\n\r\n"
    "$32\r\n0123456789abcdef0123456789abcdef\r\n"
    // EXEC of the fenced acquire with TIME: nil, fence, marker, [sec, usec]
    "*4\r\n$-1\r\n:18\r\n$1\r\n0\r\n*2\r\n$10\r\n1733140000\r\n$6\r\n123456\r\n"
    // nesting, an error inside an array, a NUL byte
    "*3\r\n*2\r\n:1\r\n*1\r\n+deep\r\n-WRONGTYPE x\r\n$3\r\na\0b\r\n";

TEST(HiredisReplyTest, DlockRepliesMatchHiredisObjects) {
  const std::string resp(kMixed, sizeof(kMixed) - 1);
  const std::vector<Reply> want = ReadAll(resp, /*dlock=*/false, 0);
  ASSERT_EQ(want.size(), 12u);
  EXPECT_EQ(want[11].elements[2].str, std::string("a\0b", 3));
  for (size_t chunk : {0, 1, 3, 7}) {
    EXPECT_EQ(ReadAll(resp, /*dlock=*/true, chunk), want) << "chunk " << chunk;
  }
}

TEST(HiredisReplyTest, HeaderCarriesTypeAndErrorText) {
  // hiredis reads a reply nobody waits for through redisReply: type, str.
  redisReader* r = redisReaderCreate();
  UseDlockReplies(r);
  const std::string resp = "-ERR max clients\r\n";
  redisReaderFeed(r, resp.data(), resp.size());
  void* obj = nullptr;
  ASSERT_EQ(redisReaderGetReply(r, &obj), REDIS_OK);
  ASSERT_NE(obj, nullptr);
  const redisReply* head = static_cast<const redisReply*>(obj);
  EXPECT_EQ(head->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(head->str, head->len), "ERR max clients");
  r->fn->freeObject(obj);
  redisReaderFree(r);
}

TEST(HiredisReplyTest, PartialReplyFreedWithTheReader) {
  // A reply cut off by the connection's end is freed by redisReaderFree
  // (LeakSanitizer checks it under --config=asan).
  redisReader* r = redisReaderCreate();
  UseDlockReplies(r);
  const std::string resp = "*3\r\n:1\r\n$5\r\nab";
  redisReaderFeed(r, resp.data(), resp.size());
  void* obj = nullptr;
  ASSERT_EQ(redisReaderGetReply(r, &obj), REDIS_OK);
  EXPECT_EQ(obj, nullptr);
  redisReaderFree(r);
}

}  // namespace
}  // namespace dlock
