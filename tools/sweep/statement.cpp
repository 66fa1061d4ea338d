// Prepared statements of the sweep's results database (statement.h).
#include "tools/sweep/statement.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include "isa/error.h"

namespace tpusim::tools::sweep {

Statement::Statement(sqlite3* db, const std::string& sql, const std::string& where) : db_(db), where_(where) {
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) != SQLITE_OK) fail();
}

Statement::~Statement() { sqlite3_finalize(s_); }

void Statement::run(std::span<const Cell> params) {
  struct Reset {  // (also when a bind or the step throws)
    Statement& s;
    ~Reset() { s.reset(); }
  } reset{*this};
  int i = 1;
  for (const Cell& c : params) bind(i++, c);
  while (step()) {
  }
}

void Statement::bind(int i, const Cell& c) {
  int rc = SQLITE_OK;
  if (const auto* v = std::get_if<int64_t>(&c)) rc = sqlite3_bind_int64(s_, i, *v);
  else if (const auto* d = std::get_if<double>(&c)) rc = sqlite3_bind_double(s_, i, *d);
  else if (const auto* t = std::get_if<std::string>(&c)) rc = sqlite3_bind_text(s_, i, t->c_str(), -1, SQLITE_TRANSIENT);
  else rc = sqlite3_bind_null(s_, i);
  if (rc != SQLITE_OK) fail();
}

bool Statement::step() {
  const int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) fail();
  return false;
}

Cell Statement::cell(int i) const {
  switch (sqlite3_column_type(s_, i)) {
    case SQLITE_INTEGER: return static_cast<int64_t>(sqlite3_column_int64(s_, i));
    case SQLITE_FLOAT: return sqlite3_column_double(s_, i);
    case SQLITE_NULL: return {};
    default: return text(i);
  }
}

int64_t Statement::integer(int i) const {
  if (sqlite3_column_type(s_, i) != SQLITE_INTEGER)
    throw InputError(fmt::format("{}: column {} is not an integer: not a tpusim sweep database", where_, i));
  return sqlite3_column_int64(s_, i);
}

std::string Statement::text(int i) const {
  const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
  return t ? std::string(t, static_cast<size_t>(sqlite3_column_bytes(s_, i))) : std::string();
}

bool Statement::busy() const { return sqlite3_stmt_busy(s_) != 0; }

std::string Statement::bound_sql() const {
  char* sql = sqlite3_expanded_sql(s_);
  const std::string out = sql ? sql : "";
  sqlite3_free(sql);
  return out;
}

void Statement::fail() const { throw InputError(fmt::format("{}: SQLite: {}", where_, sqlite3_errmsg(db_))); }

// The statement back at its start (releasing what a step held, an error included) and every
// parameter unbound.
void Statement::reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

}  // namespace tpusim::tools::sweep
