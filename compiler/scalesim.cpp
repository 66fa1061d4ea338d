// SCALE-Sim topology CSVs as models: the conv format (one conv2d per row) and the GEMM format
// (`Layer, M, N, K`: one dense layer over an M x K operand per row). Tolerant of the habits of
// the files SCALE-Sim ships and its users write (a UTF-8 byte-order mark, a header row or none,
// trailing commas, spaces, tab-separated columns, blank lines, CRLF, notes in columns after the
// last one SCALE-Sim reads, rows of empty cells); strict about every number.
#include "compiler/scalesim.h"

#include "compiler/compile_memory.h"
#include "compiler/reference.h"

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
constexpr uint64_t kMaxGemmDim = kMaxTensor;  // M, N, K: each operand and result below 2^31 elements
constexpr uint64_t kMaxTimingOperand = uint64_t{1} << 40;  // a timing-only compile's A and C: host bytes

// The columns, as SCALE-Sim names them, and the normalized prefix a header cell must start with.
constexpr std::array<std::string_view, 8> kColumns = {"Layer name",   "IFMAP Height", "IFMAP Width", "Filter Height",
                                                      "Filter Width", "Channels",     "Num Filter",  "Strides"};
// The GEMM format (SCALE-Sim's topologies/GEMM_mnk): C[M][N] = A[M][K] x B[K][N].
constexpr std::array<std::string_view, 4> kGemmColumns = {"Layer", "M", "N", "K"};

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

// Cells separated by commas, or by tabs in a line that has no comma (as in SCALE-Sim's
// UNet_maestro.csv).
std::vector<std::string_view> split_row(std::string_view line) {
  std::vector<std::string_view> fields;
  const char sep = line.find(',') == std::string_view::npos && line.find('\t') != std::string_view::npos ? '\t' : ',';
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(sep, start);
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

// A cell a user meant as a number (digits, maybe a sign, a point or an exponent): such a first
// row is data with a bad value, not a header.
bool looks_numeric(std::string_view s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.');
}

std::string quoted(std::string_view s) { return fmt::format("\"{}\"", s.substr(0, 80)); }

std::string sanitize(std::string_view raw, size_t position) {
  std::string out;
  for (char c : raw) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  return out.empty() ? fmt::format("layer{}", position) : out.substr(0, 200);
}

enum class Format { conv, gemm };

struct Row {
  int line = 0;
  std::string name;
  // conv: the eight columns; gemm: m, n, k.
  uint64_t ifmap_h = 0, ifmap_w = 0, filter_h = 0, filter_w = 0, channels = 0, filters = 0, stride = 0;
  uint64_t m = 0, n = 0, k = 0;
  bool depthwise = false;  // conv: a name containing "DP", SCALE-Sim's depthwise marker
};

// The rows of one topology. The format is the header's (conv or GEMM columns); without a header,
// a first row of fewer than eight cells is GEMM.
class TopologyReader {
 public:
  // timing_only (LoadOptions): a GEMM's A operand and result are not generated, so M x K and
  // M x N are bounded by the host address space (2^40 bytes) instead of 2^31 values.
  TopologyReader(const std::string& source, bool timing_only)
      : source_(source), max_operand_(timing_only ? kMaxTimingOperand : kMaxTensor) {
    set_names(Format::conv);
  }

  [[noreturn]] void fail(int line, std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", source_, line, what));
  }
  Format format() const { return format_; }

  // The first row: a header (its second cell is not meant as a number) or the first data row.
  bool first(int line, const std::vector<std::string_view>& f) {
    if (f.size() > 1 && looks_numeric(f[1])) {
      set_names(f.size() >= kColumns.size() ? Format::conv : Format::gemm);
      return false;
    }
    if (matches(f, kColumns)) {
      set_names(Format::conv);
    } else if (matches(f, kGemmColumns)) {
      set_names(Format::gemm);
    } else {
      fail(line, fmt::format("header: expected the SCALE-Sim conv topology columns ({}) or the GEMM columns ({})",
                             fmt::join(kColumns, ", "), fmt::join(kGemmColumns, ", ")));
    }
    for (size_t i = 0; i < names_.size(); ++i) names_[i] = std::string(f[i]);
    return true;
  }

  Row row(int line, const std::vector<std::string_view>& f, size_t position) const {
    // Columns after the last one read (notes, in some topologies) are ignored, as SCALE-Sim does.
    if (f.size() < names_.size())
      fail(line, fmt::format("{} columns; expected {} ({})", f.size(), names_.size(), fmt::join(names_, ", ")));
    Row r;
    r.line = line;
    r.name = sanitize(f[0], position);
    if (format_ == Format::gemm) {
      r.m = number(line, f, 1, kMaxGemmDim);
      r.n = number(line, f, 2, kMaxGemmDim);
      r.k = number(line, f, 3, kMaxGemmDim);
      if (r.m * r.k > max_operand_ || r.m * r.n > max_operand_ || r.k * r.n > kMaxTensor)
        fail(line, fmt::format("M x K and M x N must each be at most 2^{} elements{}, K x N at most 2^31 (M {}, N {}, K {})",
                               max_operand_ == kMaxTensor ? 31 : 40,
                               max_operand_ == kMaxTensor ? " (2^40 with --engine timing, which does not generate them)" : "",
                               r.m, r.n, r.k));
      return r;
    }
    r.ifmap_h = number(line, f, 1, kMaxDim);
    r.ifmap_w = number(line, f, 2, kMaxDim);
    r.filter_h = number(line, f, 3, kMaxDim);
    r.filter_w = number(line, f, 4, kMaxDim);
    r.channels = number(line, f, 5, kMaxDim);
    r.filters = number(line, f, 6, kMaxDim);
    r.stride = number(line, f, 7, kMaxDim);
    r.depthwise = f[0].find("DP") != std::string_view::npos;
    if (r.filter_h > r.ifmap_h)
      fail(line, fmt::format("{}: {}: larger than {} {}", names_[3], r.filter_h, names_[1], r.ifmap_h));
    if (r.filter_w > r.ifmap_w)
      fail(line, fmt::format("{}: {}: larger than {} {}", names_[4], r.filter_w, names_[2], r.ifmap_w));
    if (r.ifmap_h * r.ifmap_w * r.channels > kMaxTensor)
      fail(line, fmt::format("{}: {}: the input map {} x {} x {} has more than 2^31 elements", names_[5], r.channels,
                             r.ifmap_h, r.ifmap_w, r.channels));
    if (r.depthwise && r.channels * r.filters > kMaxDim)
      fail(line, fmt::format("{}: {}: a depthwise layer (\"DP\" in its name) has {} x {} output channels, more than {}",
                             names_[6], r.filters, r.channels, r.filters, kMaxDim));
    return r;
  }

 private:
  template <size_t N>
  static bool matches(const std::vector<std::string_view>& f, const std::array<std::string_view, N>& columns) {
    bool ok = f.size() >= N;
    for (size_t i = 0; ok && i < N; ++i) ok = normalized(f[i]).starts_with(normalized(columns[i]));
    return ok;
  }
  void set_names(Format format) {
    format_ = format;
    if (format == Format::gemm)
      names_.assign(kGemmColumns.begin(), kGemmColumns.end());
    else
      names_.assign(kColumns.begin(), kColumns.end());
  }
  uint64_t number(int line, const std::vector<std::string_view>& f, size_t column, uint64_t max) const {
    const std::string_view s = f[column];
    uint64_t v = 0;
    bool ok = is_number(s) && s.size() <= 10;
    for (char c : s) v = v * 10 + uint64_t(c - '0');
    if (!ok || v < 1 || v > max)
      fail(line, fmt::format("{}: {}: expected an integer 1..{}", names_[column], quoted(s), max));
    return v;
  }

  const std::string& source_;
  const uint64_t max_operand_;
  Format format_ = Format::conv;
  std::vector<std::string> names_;
};

struct Topology {
  Format format = Format::conv;
  std::vector<Row> rows;
};

Topology read_rows(std::string_view csv, const std::string& source, bool timing_only) {
  if (csv.starts_with("\xEF\xBB\xBF")) csv.remove_prefix(3);  // a UTF-8 byte-order mark (Excel writes one)
  TopologyReader reader(source, timing_only);
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
    const bool header = first && reader.first(line, f);
    first = false;
    if (!header) rows.push_back(reader.row(line, f, rows.size() + 1));
  }
  if (rows.empty())
    throw InputError(fmt::format("{}: no layers: expected rows of {} (conv) or of {} (GEMM)", source,
                                 fmt::join(kColumns, ", "), fmt::join(kGemmColumns, ", ")));
  return {reader.format(), std::move(rows)};
}

// A row's layer (weights not yet drawn) and the input shape it reads.
std::pair<Layer, Shape> layer_of(const Row& r, Format format) {
  Layer l;
  l.line = r.line;
  l.use_bias = false;
  if (format == Format::gemm) {
    // C = A x B: A is a sequence of M rows of K values, B the weights of a dense layer of N units
    // applied to every row (SCALE-Sim maps it the same way: an M x K map, a 1 x K filter, N filters).
    l.type = LayerType::dense;
    l.units = r.n;
    l.out = sequence_shape(r.m, r.n);
    return {std::move(l), sequence_shape(r.m, r.k)};
  }
  l.type = LayerType::conv2d;
  // A "DP" row is depthwise, as SCALE-Sim reads it: each of the C channels convolved with its own
  // `Num Filter` filters (SCALE-Sim runs C one-channel layers), C x filters outputs in all.
  l.groups = r.depthwise ? r.channels : 1;
  l.units = r.depthwise ? r.channels * r.filters : r.filters;
  l.kernel_h = r.filter_h;
  l.kernel_w = r.filter_w;
  l.stride = r.stride;
  l.out = map_shape((r.ifmap_h - r.filter_h) / r.stride + 1, (r.ifmap_w - r.filter_w) / r.stride + 1, l.units);
  return {std::move(l), map_shape(r.ifmap_h, r.ifmap_w, r.channels)};
}

}  // namespace

Model import_scalesim(std::string_view csv, const std::string& source, const LoadOptions& options) {
  Model m;
  m.source = source;
  m.name = sanitize(std::filesystem::path(source).stem().string(), 0);
  // int8 throughout (--precision overrides): a topology's layers have seeded weights and, in a
  // timing-only compile, no inputs, so the automatic choice (docs/compiler.md) has nothing to
  // measure and its programs would differ between the two compiles.
  m.precision = Precision::int8;
  if (options.batch && (*options.batch < 1 || *options.batch > kMaxBatch))
    throw InputError(fmt::format("--batch: {}: expected an integer 1..{}", *options.batch, kMaxBatch));
  m.batch = options.batch.value_or(1);
  m.inputs.clear();
  const Topology topo = read_rows(csv, source, options.timing_only);
  std::set<std::string> names;
  uint64_t parameters = 0, input_values = 0;
  for (size_t i = 0; i < topo.rows.size(); ++i) {
    const Row& r = topo.rows[i];
    auto [l, in] = layer_of(r, topo.format);
    l.name = r.name;
    for (int k = 2; !names.insert(l.name).second; ++k) l.name = fmt::format("{}_{}", r.name, k);
    if (i > 0 && m.layers.back().out == in) {
      l.inputs = {int(i - 1)};
    } else {
      // A timing-only compile generates no input values (LoadOptions::timing_only).
      const uint64_t values = options.timing_only ? 0 : m.batch * in.elements();
      if (values > options.max_values - input_values)
        throw InputError(fmt::format("{}:{}: the model's inputs have more than {} values", source, r.line, options.max_values));
      input_values += values;
      l.inputs = {model_input(int(m.inputs.size()))};
      m.inputs.push_back(ModelInput{l.name + "_in", in, {}, std::nullopt});  // (generated below)
    }
    const uint64_t weights = weight_count(l, in);
    if (weights > options.max_values - parameters)
      throw InputError(fmt::format("{}:{}: the model has more than {} weights up to this layer", source, r.line, options.max_values));
    parameters += weights;
    l.seeded_weights = weights > 0;  // (not generated for a timing-only compile: Layer::seeded_weights)
    m.layers.push_back(std::move(l));
  }
  // The compile's memory, by the rule descriptions and ONNX models follow (compile_memory.h),
  // before any input or weight is generated.
  check_compile_memory(m, source, compile_values(m), options);
  if (options.timing_only) return m;
  for (size_t i = 0; i < m.inputs.size(); ++i) m.inputs[i].data = generate_input(m.inputs[i].shape, m.batch, m.seed, i);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    Layer& l = m.layers[i];
    l.weights = generate_weights(l, source_shape(m, l, l.inputs.at(0)), m.seed, i + 1);
  }
  return m;
}

}  // namespace tpusim::compiler
