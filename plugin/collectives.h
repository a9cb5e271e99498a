// Collectives: c10d ops (c10d::allreduce_, c10d::_allgather_base_, ...) are issued on the
// training thread, while gloo runs the communication later on its own threads
// ("gloo:all_reduce"). The issuing op knows the module and phase; the work knows when the data
// actually moved. Both are events; the work inherits the issuer's attribution through one FIFO
// per collective kind (a backend runs the work of a process group in issue order).
#pragma once
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

#include "plugin/event.h"

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
};

// Bytes of the tensors the collective moves (its first argument) and its process group's size.
void describe(c10::ArrayRef<const c10::IValue> inputs, uint64_t* bytes, uint32_t* group_size);

// Lock-free: the issuing op records its attribution, the backend's work range takes it.
void issue(uint8_t kind, const Issued& issued);
bool take(uint8_t kind, Issued* out);
// A new session starts counting afresh.
void reset();

}  // namespace fqntrace::collectives
