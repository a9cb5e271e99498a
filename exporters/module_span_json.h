// The line of a backward or recompute module span (kModuleSpan, drain/module_spans.h) in the two
// streaming formats: an "X" event of category "module_span" on the module track of its thread,
// named as the forward spans are ("nn.Module: <fqn>"). Kept apart from the op lines
// (event_lines.cpp): spans are few, one per module and stretch. The streaming exporters write
// spans with json::EventLines (cached heads, the same bytes); this is the plain reference its
// tests compare against, as json::append_event is for the ranges.
#pragma once
#include <string>

#include "exporters/exporter.h"

namespace fqntrace::json {

void append_module_span(std::string& out, const EventRecord& e, long pid, const char* separator,
                        bool* first);

}  // namespace fqntrace::json
