// A prepared SQLite statement of the sweep's results database (store.h), finalized when it goes.
//
// A statement that changes the database (INSERT, UPDATE, DELETE, ATTACH) is run through run(),
// which binds its parameters, steps it to its end and always resets it afterwards, whether it
// succeeded or threw: a statement prepared once and reused row after row (record()'s INSERT) can
// then never be left holding its last step (its error, a half-read result) or a row's values for
// the next. A query reads its rows with step() and the column getters and is used once.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tools/sweep/results.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tpusim::tools::sweep {

class Statement {
 public:
  // Prepares `sql` on `db`; `where` names the database in errors (InputError, exit 2).
  Statement(sqlite3* db, const std::string& sql, const std::string& where);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds params[i] to parameter ?i+1, steps the statement until it is done (rows a statement
  // returns are skipped) and resets it: back at its start, every parameter unbound. Throws
  // InputError for a value it cannot bind or a step that fails (a UNIQUE key taken); reset all
  // the same.
  void run(std::span<const Cell> params);
  void run(std::initializer_list<Cell> params) { run(std::span<const Cell>(params.begin(), params.size())); }

  // A query: binds one parameter, then steps to the next row (false when there is none).
  void bind(int i, const Cell& c);
  bool step();
  Cell cell(int i) const;
  // An integer column; a database whose cell is not one is not a tpusim sweep's (exit 2).
  int64_t integer(int i) const;
  std::string text(int i) const;

  // Whether a step left the statement mid-way (stepped and neither done nor reset: a query with
  // rows left). After run(), false.
  bool busy() const;
  // The SQL with the values bound now in place of its parameters (NULL where none is bound): for
  // messages and tests.
  std::string bound_sql() const;

 private:
  [[noreturn]] void fail() const;
  void reset();
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  std::string where_;
};

}  // namespace tpusim::tools::sweep
