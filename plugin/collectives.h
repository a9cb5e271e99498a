// Collectives: c10d ops (c10d::allreduce_, c10d::_allgather_base_, ...) are issued on the
// training thread, while gloo runs the communication later on its own threads
// ("gloo:all_reduce"). The issuing op knows the module and phase; the work knows when the data
// actually moved. Both are events; the work inherits the issuer's attribution through a tag the
// issuing op pushes onto c10's ThreadLocalDebugInfo while it runs: the backend captures the
// issuer's thread-local state when it creates the work (at::wrapPropagateTLSState) and restores
// it around the work's range, so the tag arrives with exactly the work it belongs to.
#pragma once
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

#include "buffer/event.h"

namespace fqntrace::collectives {

// Collective kind of an op name: 0 for ordinary ops. *is_work says the name is the backend's
// work range ("gloo:...") rather than the issuing c10d op.
uint8_t kind_of(const char* op_name, bool* is_work);
// "allreduce", "allgather", "reduce_scatter", "broadcast", ...
const char* kind_name(uint8_t kind);

struct Issued {
  uint32_t fqn_id = 0;
  Phase phase = Phase::kForward;
  uint64_t bytes = 0;
  uint32_t group_size = 0;
  uint32_t kind_name_id = 0;  // the issuer's kind: gloo runs reduce_scatter_tensor as "all_reduce"
};

// Bytes of the tensors the collective moves (its first argument) and its process group's size.
void describe(c10::ArrayRef<const c10::IValue> inputs, uint64_t* bytes, uint32_t* group_size);

// The issuing op (on its own thread, while its range is open) tags the thread-local state; the
// mark returned restores the state the op found, and goes to end_issue when the op's range ends.
// Only collectives pay for this (one small allocation each), never ordinary ops.
uint32_t begin_issue(const Issued& issued, uint64_t session);
void end_issue(uint32_t mark);
// On the backend's thread, inside the work's range: the tag of the op that created the work.
bool issuer_of_work(uint64_t session, Issued* out);

}  // namespace fqntrace::collectives
