#include "plugin/captures.h"

#include <atomic>
#include <deque>
#include <mutex>

namespace fqntrace::captures {
namespace {

constexpr size_t kKept = 8;  // the status record shows the last few
std::atomic<uint64_t> g_version{0};
void changed() { g_version.fetch_add(1, std::memory_order_relaxed); }

struct Ledger {
  std::mutex mu;
  std::deque<Capture> captures;
  uint32_t next_index = 1;
  Answer answer;
};
Ledger& ledger() {
  static Ledger* l = new Ledger();  // never destroyed: the demand thread may read it at exit
  return *l;
}

Capture* find_locked(Ledger& l, uint32_t index) {
  for (Capture& c : l.captures) {
    if (c.index == index) return &c;
  }
  return nullptr;
}

}  // namespace

const char* state_name(State state) {
  switch (state) {
    case State::kPending:
      return "pending";
    case State::kRecording:
      return "recording";
    case State::kWriting:
      return "writing";
    case State::kDone:
      return "done";
    case State::kFailed:
      return "failed";
  }
  return "unknown";
}

void reset() {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  l.captures.clear();
  l.next_index = 1;
  l.answer = Answer{};
}

Capture add(Capture capture) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  capture.index = l.next_index++;
  capture.state = State::kPending;
  l.captures.push_back(capture);
  changed();
  while (l.captures.size() > kKept) l.captures.pop_front();
  return capture;
}

void set_state(uint32_t index, State state, const std::string& file, const std::string& error) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  Capture* c = find_locked(l, index);
  if (c == nullptr) return;
  c->state = state;
  changed();
  if (!file.empty()) c->file = file;
  if (!error.empty()) c->error = error;
}

void set_last_step(uint32_t index, uint64_t last_step) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  if (Capture* c = find_locked(l, index)) c->last_step = last_step;
}

bool find(uint32_t index, Capture* out) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  Capture* c = find_locked(l, index);
  if (c != nullptr) *out = *c;
  return c != nullptr;
}

std::vector<Capture> recent() {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  return std::vector<Capture>(l.captures.begin(), l.captures.end());
}

uint64_t version() { return g_version.load(std::memory_order_relaxed); }

bool busy() {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  for (const Capture& c : l.captures) {
    if (c.state == State::kPending || c.state == State::kRecording || c.state == State::kWriting)
      return true;
  }
  return false;
}

void set_answer(const Answer& answer) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  l.answer = answer;
  changed();
}

Answer last_answer() {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.answer;
}

}  // namespace fqntrace::captures
