// tpusim debug: what the debugger shows of the machine (debug.h, docs/debugger.md). Every view
// is plain text and deterministic: the same program and commands give the same bytes.
#include <fmt/format.h>

#include <algorithm>

#include "isa/disassembler.h"
#include "tools/debug.h"

namespace tpusim::tools {

namespace {

std::string text(const sim::DebugSession& s, uint64_t i) {
  return isa::format_instruction(s.program().code[i]);
}

std::string tile_text(const sim::DebugSession&, const sim::TileView& t) {
  return fmt::format("tile {} (waddr {:#x}{}, nonzero {} x {})", t.number, t.waddr,
                     t.is_unsigned ? ", unsigned" : "", t.use.rows, t.use.cols);
}

// Values in lines of `per_line`, each line led by the index of its first value.
template <typename T>
std::string value_lines(const T* v, uint64_t n, uint64_t per_line, bool hex, std::string_view lead) {
  std::string out;
  for (uint64_t k = 0; k < n; k += per_line) {
    out += n > per_line ? fmt::format("{}[{:>3}]", lead, k) : std::string(lead);
    for (uint64_t j = k; j < std::min(n, k + per_line); ++j) {
      if (!hex) out += fmt::format(" {:>{}}", int64_t(v[j]), sizeof(T) == 1 ? 4 : 11);
      else if (sizeof(T) == 1) out += fmt::format(" {:02x}", uint8_t(v[j]));
      else out += fmt::format(" {:08x}", uint32_t(v[j]));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string format_event(const sim::DebugSession& s, const sim::InstructionEvent& e) {
  return fmt::format("  cycle {:>6}  {:<5} {:>4}  {}\n", e.cycle, sim::event_name(e.kind), e.index,
                     text(s, e.index));
}

std::string view_memory(const sim::DebugSession& s, const std::string& space, uint64_t first, uint64_t count,
                        bool hex) {
  const sim::MachineState& m = s.state();
  std::string out;
  for (uint64_t r = first; r < first + count; ++r) {
    const std::string lead = fmt::format("{} {:>4}", space, r);
    if (space == "ub")
      out +=
          value_lines(reinterpret_cast<const int8_t*>(m.ub_row(r)), s.arch().ub_row_bytes(), 16, hex, lead);
    else out += value_lines(m.acc_row(r), s.arch().array_cols, 8, hex, lead);
  }
  return out;
}

std::string view_host(const sim::DebugSession& s, const std::string& region, uint64_t offset, uint64_t bytes,
                      bool hex) {
  for (const sim::HostBuffer& h : s.state().host)
    if (h.name == region) {
      std::string out =
          fmt::format("host region {} ({}, {} bytes at {:#x}), bytes {}..{}:\n", h.name,
                      h.output ? "output" : "input", h.bytes.size(), h.addr, offset, offset + bytes - 1);
      for (uint64_t k = 0; k < bytes; k += 16)
        out += value_lines(reinterpret_cast<const int8_t*>(h.bytes.data() + offset + k),
                           std::min<uint64_t>(16, bytes - k), 16, hex, fmt::format("  {:>6}", offset + k));
      return out;
    }
  return "";
}

std::string view_fifo(const sim::DebugSession& s) {
  const sim::WeightPathView w = s.weight_path();
  const uint64_t now = s.cycle(), rows = s.arch().array_rows;
  const bool shifting = w.shadow && now < w.shift_start + rows;
  std::string out = fmt::format("weight FIFO at cycle {}: {} of {} slots hold tiles\n", now,
                                w.fifo.size() + shifting, s.arch().weight_fifo_tiles);
  // A shifting tile keeps its FIFO slot until its last row is written.
  if (shifting)
    out += fmt::format(
        "  {}  shifting into the shadow slot: {} of {} rows written (its slot frees at cycle {})\n",
        tile_text(s, *w.shadow), now - w.shift_start, rows, w.shift_start + rows);
  for (size_t k = 0; k < w.fifo.size(); ++k)
    out += fmt::format("  {}  {}\n", tile_text(s, w.fifo[k]),
                       w.fifo[k].landed <= now
                           ? fmt::format("landed at cycle {}", w.fifo[k].landed)
                           : fmt::format("in weight memory, lands at cycle {}", w.fifo[k].landed));
  if (w.fifo.empty() && !shifting) out += "  (no tile waiting)\n";
  if (!w.shadow) {
    out += "shadow: empty\n";
  } else if (shifting) {
    out += fmt::format("shadow: {} shifting in since cycle {}: {} of {} rows written\n",
                       tile_text(s, *w.shadow), w.shift_start, now - w.shift_start, rows);
  } else {
    out += fmt::format("shadow: {} shifted in (cycles {}..{}), waiting for a matmul with switch\n",
                       tile_text(s, *w.shadow), w.shift_start, w.shift_start + rows - 1);
  }
  out += w.active ? fmt::format("active: {}\n", tile_text(s, *w.active))
                  : "active: none (no matmul has switched yet)\n";
  return out;
}

std::string view_cell(const sim::DebugSession& s, uint64_t r, uint64_t c) {
  const sim::SystolicArray& a = s.array();
  const uint8_t f = a.x_flags(r, c);
  const std::string flags = std::string(f & sim::ArrayModel::kValid ? "valid" : "empty") +
                            (f & sim::ArrayModel::kSwitch ? ", switch" : "");
  return fmt::format(
      "cell ({}, {}) at cycle {}:\n  weight       {:>11}\n  shadow       {:>11}\n  input        {:>11}  "
      "({})\n"
      "  partial sum  {:>11}  ({})\n",
      r, c, s.cycle(), a.weight(r, c), a.shadow(r, c), a.x_value(r, c), flags, a.psum(r, c),
      a.psum_valid(r, c) ? "valid" : "empty");
}

// One character per cell, or per block of cells when the window is wider than 32; a window of
// at most 8 x 8 cells also shows each cell's input and partial sum.
std::string view_array(const sim::DebugSession& s, uint64_t row, uint64_t col, uint64_t size) {
  const sim::SystolicArray& a = s.array();
  // (The window stops at the array's edge: at most N - row rows from `row` (the caller checks row <
  // N), so that a SIZE near 2^64 cannot wrap row + SIZE around to below `row`.)
  const uint64_t N = a.rows(), M = a.cols(), r1 = row + std::min(size, N - row), c1 = col + std::min(size, M - col);
  const uint64_t b = std::max<uint64_t>(1, (std::max(r1 - row, c1 - col) + 31) / 32);
  const bool whole = row == 0 && col == 0 && r1 == N && c1 == M;
  std::string out = fmt::format("array at cycle {} ({} x {} cells", s.cycle(), N, M);
  if (!whole) out += fmt::format(", rows {}..{}, columns {}..{}", row, r1 - 1, col, c1 - 1);
  out += b == 1 ? "" : fmt::format(", one character per {} x {} block", b, b);
  out += "): '#' live input and partial sum, '*' live and switching to the shadow tile, '.' idle\n";
  // The columns' numbers read downwards, one line per digit (the first column of each block),
  // as the rows' numbers lead each line.
  // (A window taller than wide has blocks wider than its columns: c1 - b would wrap.)
  const uint64_t last = col + (c1 - 1 - col) / b * b;  // the last block's first column
  uint64_t place = 1;  // the largest digit place of `last`
  while (place <= last / 10) place *= 10;
  for (; place > 0; place /= 10) {
    std::string line = "     ";
    for (uint64_t j = col; j < c1; j += b)
      line += j >= place || place == 1 ? char('0' + (j / place) % 10) : ' ';
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  for (uint64_t k = row; k < r1; k += b) {
    out += fmt::format("{:>4} ", k);
    for (uint64_t j = col; j < c1; j += b) {
      char ch = '.';
      for (uint64_t r = k; r < std::min(r1, k + b); ++r)
        for (uint64_t c = j; c < std::min(c1, j + b); ++c) {
          const uint8_t f = a.x_flags(r, c);
          if (f & sim::ArrayModel::kSwitch) ch = '*';
          else if ((f & sim::ArrayModel::kValid) && ch == '.') ch = '#';
        }
      out += ch;
    }
    out += "\n";
  }
  if (r1 - row <= 8 && c1 - col <= 8) {
    out += "inputs (x, '-': empty) and partial sums (psum, '-': empty), by cell:\n";
    for (uint64_t k = row; k < r1; ++k) {
      std::string x = fmt::format("{:>4} x   ", k), p = "     psum";
      for (uint64_t j = col; j < c1; ++j) {
        x += (a.x_flags(k, j) & sim::ArrayModel::kValid) ? fmt::format(" {:>11}", a.x_value(k, j))
                                                         : fmt::format(" {:>11}", "-");
        p += a.psum_valid(k, j) ? fmt::format(" {:>11}", a.psum(k, j)) : fmt::format(" {:>11}", "-");
      }
      out += x + "\n" + p + "\n";
    }
  }
  for (const sim::MatmulView& m : s.matmuls())
    out += fmt::format("matmul {} ({}): vectors enter in cycles {}..{}; {} of {} results written\n", m.index,
                       text(s, m.index), m.t0 + m.period - 1, m.t0 + m.vectors * m.period - 1, m.written, m.vectors * M);
  return out;
}

std::string view_weights(const std::string& title, uint64_t row, uint64_t col, uint64_t size, uint64_t rows,
                         uint64_t cols, const std::function<int32_t(uint64_t, uint64_t)>& at) {
  const uint64_t r1 = row + std::min(size, rows - row), c1 = col + std::min(size, cols - col);  // (as view_array's)
  std::string out = fmt::format("{}, rows {}..{}, columns {}..{} of {} x {}:\n     ", title, row, r1 - 1, col,
                                c1 - 1, rows, cols);
  for (uint64_t j = col; j < c1; ++j) out += fmt::format(" {:>4}", j);
  out += "\n";
  for (uint64_t k = row; k < r1; ++k) {
    out += fmt::format("{:>4} ", k);
    for (uint64_t j = col; j < c1; ++j) out += fmt::format(" {:>4}", at(k, j));
    out += "\n";
  }
  return out;
}

std::string view_units(const sim::DebugSession& s) {
  const std::vector<sim::StationView> v = s.stations();
  const uint64_t now = s.cycle();
  std::string out = fmt::format("units at cycle {}\n", now);
  for (const sim::StationView& st : v) {
    const std::string name(isa::kUnitNames[int(st.unit)]);
    std::string lines;
    if (st.unit == isa::Unit::control) {
      lines = s.result() ? "halted"
              : s.error()
                  ? "stopped: the run failed"
                  : fmt::format("issued up to instruction {} ({})", s.current(), text(s, s.current()));
    }
    for (uint64_t i : st.running) {
      std::string what =
          fmt::format("{}running {} ({}) since cycle {}", lines.empty() ? "" : "\n              ", i,
                      text(s, i), *s.started_at(i));
      for (const sim::MatmulView& m : s.matmuls())
        if (m.index == i)
          what += now < m.t0 + m.vectors * m.period
                      ? fmt::format(": vector {} of {} entering", (now - m.t0) / m.period, m.vectors)
                                         : fmt::format(": draining, {} of {} results written", m.written,
                                                       m.vectors * s.arch().array_cols);
      lines += what;
    }
    for (const auto& q : st.queued)
      lines += fmt::format(
          "{}queued {} ({}){}", lines.empty() ? "" : "\n              ", q.index, text(s, q.index),
          q.available > now ? fmt::format(", reaches the station at cycle {}", q.available) : "");
    if (!st.blocked.empty()) lines += (lines.empty() ? "" : "\n              ") + ("waits: " + st.blocked);
    out += fmt::format("{:<13} {}\n", name, lines.empty() ? "idle" : lines);
  }
  const sim::WeightPathView w = s.weight_path();
  out += fmt::format("{:<13} tiles waiting: {}; shadow tile: {}; active tile: {}\n", "weight FIFO",
                     w.fifo.size(),
                     !w.shadow                                   ? "empty"
                     : now < w.shift_start + s.arch().array_rows ? "shifting"
                                                                 : "loaded",
                     w.active ? fmt::format("{}", w.active->number) : "none");
  return out;
}

std::string view_disasm(const sim::DebugSession& s, uint64_t first, uint64_t count) {
  std::string out;
  for (uint64_t i = first; i < first + count; ++i) {
    std::string when;
    if (auto t = s.issued_at(i)) when += fmt::format("issue {}", *t);
    if (auto t = s.started_at(i)) when += fmt::format(", start {}", *t);
    if (auto t = s.ended_at(i)) when += fmt::format(", end {}", *t);
    std::string line = fmt::format("{:>2} {:>4}  {:<8} {:<52} {}", i == s.current() ? "=>" : "", i,
                                   sim::phase_name(s.phase(i)), text(s, i), when);
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

}  // namespace tpusim::tools
