#include "tools/source_dir.h"

namespace tpusim {

const char* source_dir() { return TPUSIM_SOURCE_DIR; }  // set by tools/CMakeLists.txt

}  // namespace tpusim
