#include "dlock/cli/trust_cluster.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace cli {
namespace {

// Sends every command at once (the cluster transport pipelines them per
// master) and waits for all replies.
std::vector<absl::StatusOr<Reply>> CallAll(Session& s, size_t i,
                                           std::vector<std::vector<std::string>> commands) {
  std::vector<absl::StatusOr<Reply>> out(commands.size(), absl::UnknownError("no reply"));
  size_t done = 0;
  for (size_t c = 0; c < commands.size(); ++c) {
    absl::Status sent = s.transport(i)->Send(std::move(commands[c]), s.command_timeout(),
                                             [&out, &done, c](absl::StatusOr<Reply> r) {
                                               out[c] = std::move(r);
                                               ++done;
                                             });
    if (!sent.ok()) {
      out[c] = sent;
      ++done;
    }
  }
  s.RunUntil([&] { return done == out.size(); });
  return out;
}

}  // namespace

void TrustCluster(Session& s, size_t i, const KeyScheme& keys, int64_t now_ms,
                  absl::Duration restart_window, bool force, TrustCounts* counts) {
  const std::string where = s.urls()[i].Display();
  std::vector<std::vector<std::string>> gets;
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    gets.push_back({"GET", keys.SlotDataSetKey(slot)});
  }
  const std::vector<absl::StatusOr<Reply>> got = CallAll(s, i, std::move(gets));
  int trusted = 0, absent = 0, young = 0, old = 0, failed = 0, foreign = 0;
  std::vector<std::vector<std::string>> sets;
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    const absl::StatusOr<Reply>& r = got[slot];
    int64_t began = 0;
    if (!r.ok()) {
      ++failed;
      continue;
    }
    if (r->is_nil()) {
      ++absent;
    } else if (!r->is_string() || !absl::SimpleAtoi(r->str, &began)) {
      ++foreign;
      continue;
    } else if (began == 0) {
      ++trusted;
      continue;
    } else if (absl::Milliseconds(now_ms - began) < restart_window) {
      ++young;
    } else {
      ++old;
    }
    sets.push_back({"SET", keys.SlotDataSetKey(slot), "0"});
  }
  std::string state = absl::StrCat(kClusterSlots, " slot markers: ", trusted, " trusted, ",
                                   absent, " absent, ", old, " began before the window, ",
                                   young, " young");
  if (foreign > 0) absl::StrAppend(&state, ", ", foreign, " foreign (not touched)");
  if (failed > 0) absl::StrAppend(&state, ", ", failed, " unreadable");
  counts->failed += failed > 0 ? 1 : 0;
  counts->foreign += foreign > 0 ? 1 : 0;
  if (!force || sets.empty()) {
    counts->untrusted += sets.empty() ? 0 : 1;
    std::printf("  %s: %s\n", where.c_str(), state.c_str());
    return;
  }
  int set_failed = 0;
  for (const absl::StatusOr<Reply>& r : CallAll(s, i, sets)) {
    if (!r.ok() || r->is_error()) ++set_failed;
  }
  if (set_failed > 0) {
    ++counts->failed;
    std::printf("  %s: %s; FAILED to trust %d of %zu\n", where.c_str(), state.c_str(),
                set_failed, sets.size());
    return;
  }
  std::printf("  %s: %s; %zu now trusted\n", where.c_str(), state.c_str(), sets.size());
}

}  // namespace cli
}  // namespace dlock
