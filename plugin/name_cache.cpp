#include "plugin/name_cache.h"

#include <limits>
#include <string>

#include "buffer/intern.h"
#include "plugin/collectives.h"
#include "plugin/flops.h"

namespace fqntrace {

NameInfo describe_name(const char* name) {
  static constexpr char kEngineEvalPrefix[] = "autograd::engine::evaluate_function: ";
  static constexpr char kCompiledRegionPrefix[] = "Torch-Compiled Region";
  NameInfo info;
  info.id = InternTable::instance().intern(name);
  info.flop_kind = static_cast<uint8_t>(flop_kind_of(name));
  info.engine_eval = std::strncmp(name, kEngineEvalPrefix, sizeof(kEngineEvalPrefix) - 1) == 0;
  info.compiled_region =
      std::strncmp(name, kCompiledRegionPrefix, sizeof(kCompiledRegionPrefix) - 1) == 0;
  bool is_work = false;
  info.collective = collectives::kind_of(name, &is_work);
  info.collective_work = is_work;
  info.collective_name_id =
      info.collective != 0 ? InternTable::instance().intern(collectives::kind_name(info.collective))
                           : 0;
  info.special = needs_special_start(info, true);
  return info;
}

const NameInfo& NameCache::fill(Slot& s, uint64_t h, const char* name, size_t n) {
  s.info = describe_name(name);
  const std::string& interned = InternTable::instance().str(s.info.id);
  // A name the table could not take (id 0 once it is full) or an absurdly long one is described
  // on every lookup rather than cached under bytes that are not its own.
  if (interned.size() != n || n > std::numeric_limits<uint32_t>::max()) {
    s.hash = 0;
    return s.info;
  }
  s.text = interned.data();
  s.length = static_cast<uint32_t>(n);
  s.hash = h;
  return s.info;
}

void NameCache::forget_pointers(uint64_t epoch) {
  for (PointerSlot& p : pointer_slots_) p.name = nullptr;
  pointer_epoch_ = epoch;
}

}  // namespace fqntrace
