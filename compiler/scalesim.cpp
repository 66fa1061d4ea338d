// SCALE-Sim topology CSVs (v2 conv format) as conv2d models. Tolerant of the format's habits
// (a header row, trailing commas, spaces and tabs, blank lines, CRLF, notes in columns after the
// eighth, as SCALE-Sim itself reads only eight); strict about every number.
#include "compiler/scalesim.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <set>

#include "isa/error.h"

namespace tpusim::compiler {

namespace {

constexpr uint64_t kMaxDim = 65535;
constexpr uint64_t kMaxTensor = uint64_t{1} << 31;

// The columns, as SCALE-Sim names them, and the normalized prefix a header cell must start with.
constexpr std::array<std::string_view, 8> kColumns = {"Layer name",   "IFMAP Height", "IFMAP Width", "Filter Height",
                                                      "Filter Width", "Channels",     "Num Filter",  "Strides"};

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string_view{} : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string normalized(std::string_view s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c)) && c != '_') out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split_row(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  while (!fields.empty() && fields.back().empty()) fields.pop_back();  // trailing commas
  return fields;
}

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string quoted(std::string_view s) { return fmt::format("\"{}\"", s.substr(0, 80)); }

std::string sanitize(std::string_view raw, size_t position) {
  std::string out;
  for (char c : raw) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  return out.empty() ? fmt::format("layer{}", position) : out.substr(0, 200);
}

struct Row {
  int line = 0;
  std::string name;
  uint64_t ifmap_h = 0, ifmap_w = 0, filter_h = 0, filter_w = 0, channels = 0, filters = 0, stride = 0;
};

class TopologyReader {
 public:
  TopologyReader(const std::string& source) : source_(source) {
    for (size_t i = 0; i < kColumns.size(); ++i) names_[i] = std::string(kColumns[i]);
  }

  [[noreturn]] void fail(int line, std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", source_, line, what));
  }

  void header(int line, const std::vector<std::string_view>& f) {
    bool ok = f.size() >= kColumns.size();
    for (size_t i = 0; ok && i < kColumns.size(); ++i) ok = normalized(f[i]).starts_with(normalized(kColumns[i]));
    if (!ok)
      fail(line, fmt::format("header: expected the SCALE-Sim conv topology columns: {}", fmt::join(kColumns, ", ")));
    for (size_t i = 0; i < kColumns.size(); ++i) names_[i] = std::string(f[i]);
  }

  Row row(int line, const std::vector<std::string_view>& f, size_t position) const {
    if (f.size() < kColumns.size())  // columns after the eighth (notes, in some topologies) are ignored
      fail(line, fmt::format("{} columns; expected {} ({})", f.size(), kColumns.size(), fmt::join(kColumns, ", ")));
    Row r;
    r.line = line;
    r.name = sanitize(f[0], position);
    r.ifmap_h = number(line, f, 1);
    r.ifmap_w = number(line, f, 2);
    r.filter_h = number(line, f, 3);
    r.filter_w = number(line, f, 4);
    r.channels = number(line, f, 5);
    r.filters = number(line, f, 6);
    r.stride = number(line, f, 7);
    if (r.filter_h > r.ifmap_h)
      fail(line, fmt::format("{}: {}: larger than {} {}", names_[3], r.filter_h, names_[1], r.ifmap_h));
    if (r.filter_w > r.ifmap_w)
      fail(line, fmt::format("{}: {}: larger than {} {}", names_[4], r.filter_w, names_[2], r.ifmap_w));
    if (r.ifmap_h * r.ifmap_w * r.channels > kMaxTensor)
      fail(line, fmt::format("{}: {}: the input map {} x {} x {} has more than 2^31 elements", names_[5], r.channels,
                             r.ifmap_h, r.ifmap_w, r.channels));
    return r;
  }

 private:
  uint64_t number(int line, const std::vector<std::string_view>& f, size_t column) const {
    const std::string_view s = f[column];
    uint64_t v = 0;
    bool ok = is_number(s) && s.size() <= 6;
    for (char c : s) v = v * 10 + uint64_t(c - '0');
    if (!ok || v < 1 || v > kMaxDim)
      fail(line, fmt::format("{}: {}: expected an integer 1..{}", names_[column], quoted(s), kMaxDim));
    return v;
  }

  const std::string& source_;
  std::array<std::string, kColumns.size()> names_;
};

std::vector<Row> read_rows(std::string_view csv, const std::string& source) {
  TopologyReader reader(source);
  std::vector<Row> rows;
  bool first = true;
  int line = 0;
  size_t start = 0;
  while (start <= csv.size()) {
    const size_t end = std::min(csv.find('\n', start), csv.size());
    ++line;
    const std::string_view text = csv.substr(start, end - start);
    start = end + 1;
    const std::vector<std::string_view> f = split_row(text);
    if (f.empty() || trim(text).starts_with('#')) continue;
    if (first && !(f.size() > 1 && is_number(f[1]))) {
      reader.header(line, f);
    } else {
      rows.push_back(reader.row(line, f, rows.size() + 1));
    }
    first = false;
  }
  if (rows.empty()) throw InputError(fmt::format("{}: no layers: expected rows of {}", source, fmt::join(kColumns, ", ")));
  return rows;
}

}  // namespace

Model import_scalesim(std::string_view csv, const std::string& source, const LoadOptions& options) {
  Model m;
  m.source = source;
  m.name = sanitize(std::filesystem::path(source).stem().string(), 0);
  if (options.batch && (*options.batch < 1 || *options.batch > kMaxDim))
    throw InputError(fmt::format("--batch: {}: expected an integer 1..{}", *options.batch, kMaxDim));
  m.batch = options.batch.value_or(1);
  m.inputs.clear();
  const std::vector<Row> rows = read_rows(csv, source);
  std::set<std::string> names;
  uint64_t parameters = 0, input_values = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    Layer l;
    l.name = r.name;
    for (int k = 2; !names.insert(l.name).second; ++k) l.name = fmt::format("{}_{}", r.name, k);
    l.type = LayerType::conv2d;
    l.line = r.line;
    l.units = r.filters;
    l.kernel_h = r.filter_h;
    l.kernel_w = r.filter_w;
    l.stride = r.stride;
    l.use_bias = false;
    l.out = map_shape((r.ifmap_h - r.filter_h) / r.stride + 1, (r.ifmap_w - r.filter_w) / r.stride + 1, r.filters);
    const Shape in = map_shape(r.ifmap_h, r.ifmap_w, r.channels);
    if (i > 0 && m.layers.back().out == in) {
      l.inputs = {int(i - 1)};
    } else {
      const uint64_t values = m.batch * in.elements();
      if (values > options.max_values - input_values)
        throw InputError(fmt::format("{}:{}: the model's inputs have more than {} values", source, r.line, options.max_values));
      input_values += values;
      l.inputs = {model_input(int(m.inputs.size()))};
      m.inputs.push_back(ModelInput{l.name + "_in", in, generate_input(in, m.batch, m.seed, m.inputs.size()), std::nullopt});
    }
    const uint64_t weights = weight_count(l, in);
    if (weights > options.max_values - parameters)
      throw InputError(fmt::format("{}:{}: the model has more than {} weights up to this layer", source, r.line, options.max_values));
    parameters += weights;
    l.weights = generate_weights(l, in, m.seed, i + 1);
    m.layers.push_back(std::move(l));
  }
  return m;
}

}  // namespace tpusim::compiler
