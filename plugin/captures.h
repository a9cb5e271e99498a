// Captures (docs/on-demand.md): a few steps recorded into a file of their own while the session
// is armed, asked for by `python -m fqntrace capture`, by fqntrace.capture() or by the slow-step
// trigger. This is their ledger: what each capture is and how far it got, written by the step
// hook (a capture starts recording), the drain thread (its file is open, done, failed) and the
// demand thread (a request answered), and read by the demand thread for the status record.
// A mutex guards it; nobody holds it across I/O, and the step hook takes it only when a capture
// starts or ends.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fqntrace::captures {

enum class State : uint8_t { kPending, kRecording, kWriting, kDone, kFailed };
const char* state_name(State state);

struct Capture {
  uint32_t index = 0;       // 1, 2, … in this process
  std::string id;           // the request's id; "" for the program's and the slow trigger's
  std::string reason;       // "request", "program", or what the slow step was
  uint64_t first_step = 0;  // the step recording starts at (a seconds capture: the step running)
  uint64_t steps = 0;       // steps to record; 0: until `seconds` have passed
  double seconds = 0.0;     // 0: until `steps` steps have been recorded
  bool memory = false;      // the allocator's reports too (FQNTRACE_MEMORY for this capture)
  uint64_t last_step = 0;   // the last step recorded, once it ended
  State state = State::kPending;
  std::string file;   // the main output's path, once open
  std::string error;  // kFailed: why
};

// Session start: forgets the last session's captures; indexes restart at 1.
void reset();
// A new capture, pending; returns it with its index set.
Capture add(Capture capture);
// The capture `index` moved on (set its fields as given; empty strings keep the old ones).
void set_state(uint32_t index, State state, const std::string& file = "",
               const std::string& error = "");
void set_last_step(uint32_t index, uint64_t last_step);
bool find(uint32_t index, Capture* out);
// The last few captures, oldest first (the status record's "captures").
std::vector<Capture> recent();
// A capture is pending, recording or being written: a new one must wait.
bool busy();
// Grows at every change of the ledger (the demand thread rewrites the status record then).
uint64_t version();

// The answer this process gave to the last request that named it.
struct Answer {
  std::string id;
  std::string answer;  // "accepted" or "refused"
  std::string why;
};
void set_answer(const Answer& answer);
Answer last_answer();

}  // namespace fqntrace::captures
