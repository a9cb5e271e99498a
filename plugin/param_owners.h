// Which module owns each trainable parameter, so that the AccumulateGrad node of a parameter (it
// has no sequence number, so no forward op to take its fqn from) and the ops under it carry the
// owner's fqn. Nothing is attached to the parameter (no hook, no weak reference): the observer
// asks the autograd engine which node it is running and looks the node's variable up here.
#pragma once
#include <cstdint>

namespace fqntrace::param_owners {

// `key` is the parameter's Python object (stable across swap_tensors and `.data =`), or for a
// C++ module's parameter without one its TensorImpl. Writers are serialized inside; readers are
// lock-free. A full table keeps its entries (later parameters fall back to the enclosing fqn).
void set(const void* key, uint32_t fqn_id);
uint32_t find(const void* key);  // 0: unknown

// The owner of the AccumulateGrad node the engine is running on this thread; 0 when the node is
// not an AccumulateGrad or its parameter is unknown. No lock, no allocation.
uint32_t of_current_node() noexcept;

}  // namespace fqntrace::param_owners
