#include "isa/assembler.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "isa/asm_lexer.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/text.h"

namespace tpusim::isa {
namespace {

using namespace asmtext;
using i128 = __int128;
using nlohmann::json;

constexpr size_t kMaxErrors = 20;

struct LineError {
  int col;
  std::string message;
};

[[noreturn]] void error_at(const Token& t, std::string msg) { throw LineError{t.col, std::move(msg)}; }

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::end: return "end of line";
    case Tok::string: return fmt::format("string \"{}\"", t.text);
    default: return fmt::format("'{}'", t.text);
  }
}

class Cursor {
 public:
  explicit Cursor(const std::vector<Token>& toks) : t_(toks) {}
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_punct(std::string_view p) const { return peek().kind == Tok::punct && peek().text == p; }
  bool accept(std::string_view p) {
    if (!is_punct(p)) return false;
    next();
    return true;
  }
  const Token& expect(std::string_view p, std::string_view what) {
    if (!is_punct(p)) error_at(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  const Token& expect_kind(Tok k, std::string_view what) {
    if (peek().kind != k) error_at(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  bool at_end() const { return peek().kind == Tok::end; }

 private:
  const std::vector<Token>& t_;
  size_t i_ = 0;
};

i128 parse_integer(const Token& t) {
  std::string digits;
  for (char c : t.text)
    if (c != '_') digits += c;
  int base = 10;
  std::string_view body = digits;
  if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'))
    base = 16, body.remove_prefix(2);
  else if (body.size() > 2 && body[0] == '0' && (body[1] == 'b' || body[1] == 'B'))
    base = 2, body.remove_prefix(2);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v, base);
  if (ec == std::errc::result_out_of_range)
    error_at(t, fmt::format("number {} does not fit in 64 bits", t.text));
  if (ec != std::errc() || end != body.data() + body.size() || body.empty())
    error_at(t, fmt::format("malformed number '{}'", t.text));
  return v;
}

class Assembler {
 public:
  Assembler(std::string source, std::filesystem::path base)
      : source_(std::move(source)), base_(std::move(base)) {}

  Program run(std::string_view text) {
    std::vector<std::string> lines;
    std::string line;
    std::istringstream in{std::string(text)};
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
    }
    collect_labels(lines);
    for (size_t n = 0; n < lines.size() && errors_.size() < kMaxErrors; ++n) {
      line_ = static_cast<int>(n) + 1;
      try {
        const std::vector<Token> toks = tokenize(lines[n]);
        Cursor c(toks);
        statement(c);
      } catch (const LineError& e) {
        report(e.col, e.message);
      } catch (const LexError& e) {
        report(e.col, e.message);
      }
    }
    if (!errors_.empty()) {
      std::string all;
      for (const std::string& e : errors_) append_joined(all, "\n", e);
      if (errors_.size() >= kMaxErrors) all += "\n" + source_ + ": too many errors, stopping";
      throw InputError(all);
    }
    std::sort(prog_.symbols.begin(), prog_.symbols.end(), symbol_order);
    if (std::string err = check_program(prog_); !err.empty()) throw InputError(source_ + ": " + err);
    return std::move(prog_);
  }

 private:
  void report(int col, const std::string& msg) {
    errors_.push_back(fmt::format("{}:{}:{}: error: {}", source_, line_, col, msg));
  }

  // Labels may be used before their line, so they are found first.
  void collect_labels(const std::vector<std::string>& lines) {
    uint64_t index = 0;
    for (const std::string& text : lines) {
      std::vector<Token> toks;
      try {
        toks = tokenize(text);
      } catch (const LexError&) {
        continue;  // reported in the main pass
      }
      size_t i = 0;
      while (toks[i].kind == Tok::ident && toks[i + 1].kind == Tok::punct && toks[i + 1].text == ":") {
        labels_.emplace(toks[i].text, index);
        i += 2;
      }
      if (toks[i].kind == Tok::ident && toks[i].text[0] != '.') ++index;
    }
  }

  void statement(Cursor& c) {
    while (c.peek().kind == Tok::ident && c.peek(1).kind == Tok::punct && c.peek(1).text == ":") {
      const Token& name = c.next();
      c.next();
      define_label(name);
    }
    if (c.at_end()) return;
    const Token& head = c.expect_kind(Tok::ident, "an instruction or directive");
    if (head.text[0] == '.') directive(head, c);
    else instruction(head, c);
    if (!c.at_end()) error_at(c.peek(), fmt::format("unexpected {} after the statement", describe(c.peek())));
  }

  void define_label(const Token& name) {
    check_new_name(name);
    const uint64_t index = prog_.code.size();
    symbols_[name.text] = index;
    prog_.symbols.push_back({name.text, "code", index, 0});
  }

  void check_new_name(const Token& name) {
    if (std::string err = check_name(name.text); !err.empty()) error_at(name, err);
    if (symbols_.count(name.text)) error_at(name, fmt::format("'{}' is already defined", name.text));
  }

  bool is_defined(const std::string& name) const { return symbols_.count(name) || labels_.count(name); }

  // ---- expressions: | & << >> + - * / % unary - ~ ( ) literals symbols name.size name.end ----
  i128 expr(Cursor& c) { return binary(c, 0); }

  i128 binary(Cursor& c, int level) {
    static const std::vector<std::vector<std::string_view>> levels = {
        {"|"}, {"&"}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}};
    if (level == static_cast<int>(levels.size())) return unary(c);
    i128 v = binary(c, level + 1);
    for (;;) {
      const Token& op = c.peek();
      bool match = false;
      for (std::string_view o : levels[level]) match |= c.is_punct(o);
      if (!match) return v;
      c.next();
      const i128 r = binary(c, level + 1);
      v = apply(op, v, r);
    }
  }

  static i128 apply(const Token& op, i128 a, i128 b) {
    const std::string& o = op.text;
    i128 v = 0;
    if (o == "+") v = a + b;
    else if (o == "-") v = a - b;
    else if (o == "*") v = a * b;
    else if (o == "/" || o == "%") {
      if (b == 0) error_at(op, "division by zero");
      v = o == "/" ? a / b : a % b;
    } else if (o == "<<" || o == ">>") {
      if (b < 0 || b > 63) error_at(op, "shift count must be 0..63");
      v = o == "<<" ? a << static_cast<int>(b) : a >> static_cast<int>(b);
    } else if (o == "&") v = a & b;
    else v = a | b;
    if (v > i128(UINT64_MAX) || v < -i128(INT64_MAX) - 1) error_at(op, "expression overflows 64 bits");
    return v;
  }

  // Parentheses and unary operators nest by recursion: bounded, so that a pathological line gets
  // an error rather than overflowing the stack (5000 '(' did).
  static constexpr int kMaxNesting = 256;
  struct NestingGuard {
    int& depth;
    explicit NestingGuard(int& d) : depth(++d) {}
    ~NestingGuard() { --depth; }
  };

  i128 unary(Cursor& c) {
    const NestingGuard guard(nesting_);
    if (nesting_ > kMaxNesting)
      error_at(c.peek(), fmt::format("expression nested more than {} levels deep", kMaxNesting));
    if (c.is_punct("-")) {
      const Token& minus = c.next();
      const i128 v = -unary(c);
      if (v < -i128(INT64_MAX) - 1) error_at(minus, "expression overflows 64 bits");
      return v;
    }
    if (c.accept("~")) return ~static_cast<uint64_t>(unary(c));
    if (c.accept("(")) {
      const i128 v = expr(c);
      c.expect(")", "')'");
      return v;
    }
    const Token& t = c.next();
    if (t.kind == Tok::number) return parse_integer(t);
    if (t.kind == Tok::ident) return symbol_value(t);
    error_at(t, fmt::format("expected a number or a name, found {}", describe(t)));
  }

  i128 symbol_value(const Token& t) {
    std::string name = t.text, suffix;
    if (const size_t dot = name.find('.'); dot != std::string::npos && dot > 0) {
      suffix = name.substr(dot + 1);
      name.resize(dot);
    }
    if (!suffix.empty()) {
      auto it = sizes_.find(name);
      if (it == sizes_.end() || (suffix != "size" && suffix != "end"))
        error_at(t,
                 fmt::format("unknown name '{}' (.size and .end apply to regions defined earlier)", t.text));
      return suffix == "size" ? i128(it->second) : symbols_.at(name) + i128(it->second);
    }
    if (auto it = symbols_.find(name); it != symbols_.end()) return it->second;
    if (auto it = labels_.find(name); it != labels_.end()) return it->second;
    error_at(t, fmt::format("unknown name '{}' (constants and regions must be defined before use)", name));
  }

  uint64_t expr_in(Cursor& c, uint64_t lo, uint64_t hi, std::string_view what) {
    const Token& at = c.peek();
    const i128 v = expr(c);
    if (v < i128(lo) || v > i128(hi))
      error_at(at, fmt::format("{} = {} is out of range ({}..{})", what, v, lo, hi));
    return static_cast<uint64_t>(v);
  }

  // ---- instructions ----
  void instruction(const Token& head, Cursor& c) {
    const OpcodeSpec* s = find_mnemonic(head.text);
    if (!s) error_at(head, fmt::format("unknown mnemonic '{}'", head.text));
    Instruction inst = make_instruction(s->opcode);
    std::set<Field> given;
    while (!c.at_end()) {
      if (!given.empty()) c.expect(",", "',' between operands");
      const Token& name = c.expect_kind(Tok::ident, "an operand name");
      const std::optional<Field> f = find_field(name.text);
      const Operand* o = f ? find_operand(*s, *f) : nullptr;
      if (!o)
        error_at(name, fmt::format("{} has no operand '{}' (operands: {})", s->mnemonic, name.text,
                                   operand_list(*s)));
      if (!given.insert(*f).second) error_at(name, fmt::format("operand '{}' given twice", name.text));
      inst[*f] = operand_value(*o, name, c);
    }
    for (const Operand& o : s->operands)
      if (!o.default_value && !given.count(o.field))
        error_at(head, fmt::format("{} needs operand '{}' ({})", s->mnemonic, field_spec(o.field).name,
                                   field_spec(o.field).doc));
    if (std::string err = check(inst); !err.empty()) error_at(head, err);
    prog_.code.push_back(inst);
  }

  static std::string operand_list(const OpcodeSpec& s) {
    std::string out;
    for (const Operand& o : s.operands) append_joined(out, ", ", field_spec(o.field).name);
    return out.empty() ? "none" : out;
  }

  uint64_t operand_value(const Operand& o, const Token& name, Cursor& c) {
    const FieldSpec& f = field_spec(o.field);
    if (f.kind == FieldKind::flag && !c.is_punct("=")) return 1;
    c.expect("=", fmt::format("'=' after '{}'", name.text));
    const Token& v = c.peek();
    // A value name always means the value, even where a constant of the same name exists.
    if (f.kind == FieldKind::enumeration && v.kind == Tok::ident &&
        (find_value(f.values, v.text) || !is_defined(v.text))) {
      c.next();
      if (const EnumValue* e = find_value(f.values, v.text)) return e->value;
      error_at(v, fmt::format("'{}' is not a {} value (one of: {})", v.text, f.name, value_list(f)));
    }
    if (f.kind == FieldKind::mask && v.kind == Tok::ident &&
        (find_value(f.values, v.text) || !is_defined(v.text))) {
      uint64_t m = 0;
      do {
        const Token& part = c.expect_kind(Tok::ident, fmt::format("a {} name", f.name));
        const EnumValue* e = find_value(f.values, part.text);
        if (!e)
          error_at(part, fmt::format("'{}' is not a {} name (one of: {})", part.text, f.name, value_list(f)));
        m |= uint64_t{1} << e->value;
      } while (c.accept("|"));
      return m;
    }
    return expr_in(c, o.min, field_max(o), f.name);
  }

  static std::string value_list(const FieldSpec& f) {
    std::string out;
    for (const EnumValue& e : f.values) append_joined(out, ", ", e.name);
    return out;
  }

  // ---- directives ----
  void directive(const Token& head, Cursor& c) {
    const std::string& d = head.text;
    if (d == ".model") {
      once(head, ".model");
      prog_.model = c.expect_kind(Tok::string, "a quoted model name").text;
    } else if (d == ".arch") {
      once(head, ".arch");
      arch(c);
    } else if (d == ".meta") {
      const Token& key = json_key(c, "a metadata key");
      if (prog_.meta.contains(key.text)) error_at(key, fmt::format(".meta {} is already set", key.text));
      c.expect(",", "','");
      prog_.meta[key.text] = json_value(c);
    } else if (d == ".equ") {
      const Token& name = c.expect_kind(Tok::ident, "a constant name");
      check_new_name(name);
      c.expect(",", "','");
      symbols_[name.text] = expr(c);
    } else if (d == ".ub" || d == ".acc") region(c, d.substr(1));
    else if (d == ".weights") weights(c);
    else if (d == ".wimage") {
      const std::vector<uint8_t> data = init_data(c, prog_.weights.size(), false);
      if (data.size() > prog_.weights.size()) prog_.weights.resize(data.size());
      std::copy(data.begin(), data.end(), prog_.weights.begin());
    } else if (d == ".input" || d == ".output") host_region(c, d == ".output");
    else
      error_at(head, fmt::format("unknown directive '{}' (directives: {})", d, fmt::join(kDirectives, " ")));
  }

  // A JSON object key: a name, or a quoted string for keys that are not names ("my-key").
  static const Token& json_key(Cursor& c, std::string_view what) {
    if (c.peek().kind == Tok::string) return c.next();
    return c.expect_kind(Tok::ident, what);
  }

  void once(const Token& head, const std::string& directive) {
    if (!once_.insert(directive).second) error_at(head, fmt::format("{} may appear only once", directive));
  }

  void arch(Cursor& c) {
    prog_.arch["name"] = c.expect_kind(Tok::string, "a quoted architecture name").text;
    while (c.accept(",")) {
      const Token& key = json_key(c, "a parameter name");
      if (prog_.arch.contains(key.text)) error_at(key, fmt::format(".arch {} is given twice", key.text));
      c.expect("=", "'='");
      prog_.arch[key.text] = json_value(c);
    }
  }

  // A metadata value: integer expression, real literal, string, or json "<JSON text>".
  json json_value(Cursor& c) {
    const Token& t = c.peek();
    if (t.kind == Tok::string) return c.next().text;
    if (t.kind == Tok::real) return real(c.next());
    if (t.kind == Tok::punct && t.text == "-" && c.peek(1).kind == Tok::real) {
      c.next();
      return -real(c.next());
    }
    if (t.kind == Tok::ident && t.text == "json") {
      c.next();
      const Token& s = c.expect_kind(Tok::string, "a quoted JSON text after json");
      // The manifest reader allows 64 levels; a value sits 2 levels down in it.
      std::string err;
      json j = parse_json_bounded(s.text, /*max_depth=*/32, err);
      if (!err.empty()) error_at(s, err);
      return j;
    }
    const i128 v = expr(c);
    return v < 0 ? json(static_cast<int64_t>(v)) : json(static_cast<uint64_t>(v));
  }

  static double real(const Token& t) {
    char* end = nullptr;
    const double v = std::strtod(t.text.c_str(), &end);
    if (end != t.text.c_str() + t.text.size() || !std::isfinite(v))
      error_at(t, fmt::format("malformed number '{}'", t.text));
    return v;
  }

  // A region's name evaluates to its address, NAME.size to its size, NAME.end to their sum.
  void define_region_name(const Token& name, uint64_t addr, uint64_t size) {
    check_new_name(name);
    symbols_[name.text] = addr;
    sizes_[name.text] = size;
  }

  // A region of a modelled memory, also recorded as a symbol in the program.
  void define_region(const Token& name, const std::string& space, uint64_t addr, uint64_t size) {
    define_region_name(name, addr, size);
    prog_.symbols.push_back({name.text, space, addr, size});
  }

  void region(Cursor& c, const std::string& space) {
    const Token& name = c.expect_kind(Tok::ident, "a region name");
    c.expect(",", "','");
    const uint64_t limit = address_space_rows(space);
    const uint64_t addr = expr_in(c, 0, limit - 1, "address");
    c.expect(",", "','");
    const uint64_t rows = expr_in(c, 1, limit - addr, "rows");
    define_region(name, space, addr, rows);
  }

  void weights(Cursor& c) {
    const Token& name = c.expect_kind(Tok::ident, "a region name");
    c.expect(",", "','");
    const uint64_t addr = expr_in(c, 0, kMaxDataBytes - 1, "address");
    c.expect(",", "','");
    const uint64_t bytes = expr_in(c, 1, kMaxDataBytes - addr, "bytes");
    define_region(name, "weights", addr, bytes);
    if (prog_.weights.size() < addr + bytes) prog_.weights.resize(addr + bytes);
    if (c.accept(",")) {
      expect_key(c, "init");
      const std::vector<uint8_t> data = init_data(c, bytes, true);
      std::copy(data.begin(), data.end(), prog_.weights.begin() + static_cast<ptrdiff_t>(addr));
    }
  }

  static void expect_key(Cursor& c, std::string_view key) {
    const Token& k = c.expect_kind(Tok::ident, fmt::format("'{}='", key));
    if (k.text != key) error_at(k, fmt::format("unknown option '{}' (expected '{}=')", k.text, key));
    c.expect("=", "'='");
  }

  // zero | random(SEED) | file("path"); `exact` requires a file to be exactly `bytes` long.
  std::vector<uint8_t> init_data(Cursor& c, uint64_t bytes, bool exact) {
    const Token& kind = c.expect_kind(Tok::ident, "zero, random(SEED) or file(\"PATH\")");
    std::vector<uint8_t> out;
    if (kind.text == "zero") {
      out.assign(bytes, 0);
    } else if (kind.text == "random") {
      c.expect("(", "'('");
      const uint64_t seed = expr_in(c, 0, UINT64_MAX, "seed");
      c.expect(")", "')'");
      out.resize(bytes);
      fill_random(out, seed);
    } else if (kind.text == "file") {
      c.expect("(", "'('");
      const Token& path = c.expect_kind(Tok::string, "a quoted file name");
      c.expect(")", "')'");
      out = read_data_file(path);
      if (exact && out.size() != bytes)
        error_at(path, fmt::format("file \"{}\" has {} bytes; the region needs exactly {}", path.text,
                                   out.size(), bytes));
    } else {
      error_at(kind,
               fmt::format("unknown initializer '{}' (zero, random(SEED) or file(\"PATH\"))", kind.text));
    }
    return out;
  }

  std::vector<uint8_t> read_data_file(const Token& path) {
    const std::filesystem::path p = base_ / path.text;
    try {
      return io::read_binary_file(p, kMaxDataBytes, "a data file");
    } catch (const InputError& e) {
      error_at(path, e.what());
    }
  }

  void host_region(Cursor& c, bool output) {
    HostRegion r;
    r.output = output;
    const Token& name = c.expect_kind(Tok::ident, "a region name");
    c.expect(",", "','");
    r.host_addr = expr_in(c, 0, (uint64_t{1} << 40) - 1, "host address");
    c.expect(",", "','");
    r.bytes = expr_in(c, 1, std::min(kMaxDataBytes, (uint64_t{1} << 40) - r.host_addr), "bytes");
    r.name = name.text;
    while (c.accept(",")) {
      const Token& key = c.expect_kind(Tok::ident, "an option (dtype, shape, scale, init)");
      c.expect("=", "'='");
      if (key.text == "dtype") r.dtype = c.expect_kind(Tok::ident, "int8, uint8 or int32").text;
      else if (key.text == "shape") r.shape = shape(c);
      else if (key.text == "scale") {
        const Token& t = c.peek();
        if (t.kind == Tok::punct && t.text == "-") error_at(t, "scale must be a number >= 0");
        r.scale =
            t.kind == Tok::real ? real(c.next()) : static_cast<double>(expr_in(c, 0, UINT64_MAX, "scale"));
      } else if (key.text == "init" && !output) r.init = init_data(c, r.bytes, true);
      else
        error_at(key, fmt::format("unknown option '{}' for {} (dtype, shape, scale{})", key.text,
                                  output ? ".output" : ".input", output ? "" : ", init"));
    }
    define_region_name(name, r.host_addr, r.bytes);  // listed in host_regions, not as a symbol
    Program alone;
    alone.host_regions.push_back(r);
    if (std::string err = check_program(alone); !err.empty()) error_at(name, err);
    prog_.host_regions.push_back(std::move(r));
  }

  // shape=8x256 (the lexer reads "8x256" as one malformed number, so split it here) or (8,256)
  std::vector<uint64_t> shape(Cursor& c) {
    std::vector<uint64_t> dims;
    if (c.accept("(")) {
      do dims.push_back(expr_in(c, 1, UINT32_MAX, "dimension"));
      while (c.accept(","));
      c.expect(")", "')'");
      return dims;
    }
    const Token& t = c.expect_kind(Tok::number, "a shape such as 8x256");
    std::string_view s = t.text;
    while (!s.empty()) {
      const size_t x = s.find('x');
      const std::string part(s.substr(0, x));
      uint64_t d = 0;
      auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
      if (ec != std::errc() || end != part.data() + part.size() || d == 0)
        error_at(t, fmt::format("malformed shape '{}' (expected e.g. 8x256)", t.text));
      dims.push_back(d);
      s = x == std::string_view::npos ? std::string_view() : s.substr(x + 1);
      if (x != std::string_view::npos && s.empty()) error_at(t, fmt::format("malformed shape '{}'", t.text));
    }
    return dims;
  }

  std::string source_;
  std::filesystem::path base_;
  int line_ = 0;
  Program prog_;
  std::map<std::string, i128> symbols_;
  std::map<std::string, uint64_t> sizes_;
  std::map<std::string, uint64_t> labels_;
  std::vector<std::string> errors_;
  int nesting_ = 0;  // current depth of unary() recursion
  std::set<std::string> once_;
};

}  // namespace

void fill_random(std::span<uint8_t> out, uint64_t seed) {
  uint64_t state = seed;
  for (uint8_t& b : out) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    b = static_cast<uint8_t>((z ^ (z >> 31)) >> 56);
  }
}

Program assemble(std::string_view text, const std::string& source_name,
                 const std::filesystem::path& base_dir) {
  return Assembler(source_name, base_dir).run(text);
}

Program assemble_file(const std::filesystem::path& path) {
  const std::string text = io::read_text_file(path, io::kMaxAssemblyBytes, "an assembly source");
  return assemble(text, path.string(), path.parent_path().empty() ? "." : path.parent_path());
}

}  // namespace tpusim::isa
