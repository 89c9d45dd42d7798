// Fuzzes the operator schema parser (layers/binding/schema_parser.cpp). A malformed schema must be an
// Error naming the column; an accepted one must be self-consistent and parse again to the same thing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "layers/binding/binding.h"
#include "lib/error.h"

using namespace strata;
using namespace strata::binding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Schema schema;
  try {
    schema = parse_schema(text);
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(" at column ") == std::string_view::npos) std::abort();
    return 0;
  }
  if (schema.name.empty() || schema.returns.empty() || schema.text != text) std::abort();
  bool keyword_only = false;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const Argument& a = schema.arguments[i];
    if (a.name.empty()) std::abort();
    if (keyword_only && !a.keyword_only) std::abort();  // '*' splits the list once
    keyword_only = a.keyword_only;
    if (a.default_value && a.default_value->is_none() && a.type != ArgType::kOptionalTensor &&
        a.type != ArgType::kOptionalScalarType && a.type != ArgType::kOptionalFloat)
      std::abort();
    for (size_t j = 0; j < i; ++j)
      if (schema.arguments[j].name == a.name) std::abort();
  }
  const Schema again = parse_schema(schema.text);
  if (again.name != schema.name || again.arguments.size() != schema.arguments.size()) std::abort();
  // Binding it either works or is refused for having too many arguments; calling with no arguments
  // either reaches the (null) operator or reports what is missing or mistyped.
  try {
    BoundOperator op(schema, [](const IValue* const*) { return IValue(); });
    op.call({});
  } catch (const Error&) {
  }
  return 0;
}
