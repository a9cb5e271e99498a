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
// `kind` is the Python object's type (0 for a TensorImpl key): keys are never removed, so a dead
// parameter's address can be taken by another tensor (a leaf input of a gradient penalty); an
// entry answers only for an object of the kind it was set for.
void set(const void* key, uint32_t fqn_id, uintptr_t kind = 0);
uint32_t find(const void* key, uintptr_t kind = 0);  // 0: unknown

// The kind of a live Python object, read by the Python binding (the core has no Python headers);
// without a reader (a libtorch program) kinds are not compared.
using KindReader = uintptr_t (*)(const void* object);
void set_kind_reader(KindReader reader);

// The owner of the AccumulateGrad node the engine is running on this thread; 0 when the node is
// not an AccumulateGrad or its parameter is unknown. No lock, no allocation.
uint32_t of_current_node() noexcept;

}  // namespace fqntrace::param_owners
