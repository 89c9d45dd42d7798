// A small recursive-descent parser for operator schemas (a subset of PyTorch's native_functions.yaml
// grammar: the types strata's operators use, defaults, and '*' for keyword-only arguments).
#include <cctype>
#include <charconv>
#include <cstdio>

#include "layers/binding/binding.h"
#include "lib/error.h"

namespace strata::binding {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Schema parse() {
    Schema schema;
    schema.text = std::string(text_);
    skip_space();
    schema.name = identifier("operator name");
    // An overload name, as native_functions.yaml's "mul.Scalar": part of the operator's unique name (what
    // find_operator and the dispatcher know it by); the Python frontend picks among a name's overloads.
    if (consume('.')) schema.name += "." + identifier("overload name");
    expect('(');
    bool keyword_only = false;
    skip_space();
    if (!consume(')')) {
      while (true) {
        skip_space();
        if (consume('*')) {
          if (keyword_only) fail("a second '*'");
          keyword_only = true;
        } else {
          Argument arg = argument();
          arg.keyword_only = keyword_only;
          for (const Argument& other : schema.arguments)
            if (other.name == arg.name) fail("a second argument named '" + arg.name + "'");
          if (!arg.default_value && !arg.keyword_only && !schema.arguments.empty() &&
              schema.arguments.back().default_value && !schema.arguments.back().keyword_only)
            fail("argument '" + arg.name + "' without a default after one with a default");
          schema.arguments.push_back(std::move(arg));
        }
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == ')') {
          // A '*' promises keyword-only arguments; one with nothing after it is a typo in the schema.
          if (keyword_only && (schema.arguments.empty() || !schema.arguments.back().keyword_only))
            fail("a keyword-only argument after '*'");
          ++pos_;
          break;
        }
        expect(',');
      }
    }
    skip_space();
    expect('-');
    expect('>');
    skip_space();
    schema.returns = identifier("return type");
    if (schema.returns == "Tensor") alias_annotation();  // "-> Tensor(a!)": self is returned
    skip_space();
    if (pos_ != text_.size()) fail("end of schema");
    return schema;
  }

 private:
  // PyTorch's alias annotation after a Tensor type, "(a)" or "(a!)" (the tensor aliases set a; '!': the
  // op writes it, an in-place op's self). Only that much of the grammar: one set, no wildcards. Returns
  // whether it had '!'.
  bool alias_annotation() {
    if (!consume('(')) return false;
    identifier("an alias set (a)");
    const bool writes = consume('!');
    expect(')');
    return writes;
  }

  Argument argument() {
    Argument arg;
    std::string type = identifier("argument type");
    bool optional = consume('?');
    if (type == "Tensor") {
      arg.type = optional ? ArgType::kOptionalTensor : ArgType::kTensor;
      if (!optional) arg.writes = alias_annotation();
    } else if (type == "ScalarType") {
      arg.type = optional ? ArgType::kOptionalScalarType : ArgType::kScalarType;
    } else if (type == "float" && optional) {
      arg.type = ArgType::kOptionalFloat;
    } else if (optional) {
      fail("'?' only after Tensor, ScalarType or float");
    } else if (type == "int" && consume('[')) {
      while (pos_ < text_.size() && std::isdigit(uc(text_[pos_])) && arg.list_size <= Shape::kMaxDims)
        arg.list_size = arg.list_size * 10 + (text_[pos_++] - '0');
      if (arg.list_size > Shape::kMaxDims) fail("a list size of at most 4");
      expect(']');
      arg.type = ArgType::kIntList;
    } else if (type == "int") {
      arg.type = ArgType::kInt;
    } else if (type == "float") {
      arg.type = ArgType::kFloat;
    } else if (type == "bool") {
      arg.type = ArgType::kBool;
    } else {
      pos_ -= type.size();
      fail("a type (Tensor, Tensor?, int, int[], int[N], float, float?, bool, ScalarType, ScalarType?)");
    }
    skip_space();
    arg.name = identifier("argument name");
    skip_space();
    if (consume('=')) {
      skip_space();
      arg.default_value = default_value(arg.type, arg.list_size);
    }
    return arg;
  }

  IValue default_value(ArgType type, int list_size) {
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')' && !std::isspace(uc(text_[pos_]))) ++pos_;
    std::string_view token = text_.substr(start, pos_ - start);
    if (token == "None") {
      if (type != ArgType::kOptionalTensor && type != ArgType::kOptionalScalarType && type != ArgType::kOptionalFloat)
        fail_at(start, "a default that fits the type (None is for Tensor?, ScalarType? and float?)");
      return IValue();
    }
    if (type == ArgType::kBool) {
      if (token == "True") return IValue(true);
      if (token == "False") return IValue(false);
      fail_at(start, "True or False");
    }
    if (type == ArgType::kInt || (type == ArgType::kIntList && list_size > 0)) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (ec != std::errc() || end != token.data() + token.size()) fail_at(start, "an integer default");
      if (type == ArgType::kInt) return IValue(v);
      Shape list;  // int[N]'s default: the int for each of the N
      while (list.ndim < list_size) list[list.ndim++] = v;
      return IValue(list);
    }
    if (type == ArgType::kFloat || type == ArgType::kOptionalFloat) {
      double v = 0;
      auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (ec != std::errc() || end != token.data() + token.size()) fail_at(start, "a number default");
      return IValue(v);
    }
    if (type == ArgType::kScalarType || type == ArgType::kOptionalScalarType) {
      if (const std::optional<DType> d = parse_dtype(token)) return IValue(*d);
      fail_at(start, "a dtype default (f32, f64, f16, bf16)");
    }
    fail_at(start, "no default (a Tensor cannot have one, nor an int[] without a size)");
  }

  std::string identifier(const char* what) {
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(uc(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_ || std::isdigit(uc(text_[start]))) fail_at(start, what);
    return std::string(text_.substr(start, pos_ - start));
  }

  static unsigned char uc(char c) { return static_cast<unsigned char>(c); }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(uc(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("'") + c + "'");
  }
  [[noreturn]] void fail(const std::string& expected) { fail_at(pos_, expected); }
  [[noreturn]] void fail_at(size_t at, const std::string& expected) {
    std::string found = at < text_.size() ? "'" + printable(text_.substr(at, 1)) + "'" : "the end";
    throw Error("bad schema \"" + printable(text_) + "\": expected " + expected + " at column " +
                std::to_string(at + 1) + ", found " + found);
  }
  // Control and non-ASCII bytes as \xNN: a NUL would cut the message short (what() is a C string).
  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (uc(c) >= 0x20 && uc(c) < 0x7f) {
        out += c;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", uc(c));
        out += buf;
      }
    }
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Schema parse_schema(std::string_view text) { return Parser(text).parse(); }

}  // namespace strata::binding
